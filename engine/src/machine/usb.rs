//! A USB disk's bridge as sysfs reports it: the vendor and product id of
//! the USB device, which driver took its storage interface (`uas` or
//! `usb-storage`), how it is powered, and whether a known-bad bridge should
//! be kept off UAS.

use super::usb_quirk::UsbQuirk;
use crate::machine::host::Host;
use crate::machine::sysfs::{name_of, read_trimmed};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::path::Path;

/// Where usb-storage lists the quirks it runs with: those from
/// `usb-storage.quirks=` on the kernel command line, or written since.
pub const ACTIVE_QUIRKS: &str = "/sys/module/usb_storage/parameters/quirks";

/// The driver bound to a USB disk's mass-storage interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum UsbDriver {
    #[serde(rename = "uas")]
    Uas,
    #[serde(rename = "usb-storage")]
    UsbStorage,
}

impl fmt::Display for UsbDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UsbDriver::Uas => "uas",
            UsbDriver::UsbStorage => "usb-storage",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsbBridge {
    /// `idVendor` and `idProduct` of the USB device (the bridge chip's,
    /// or the enclosure maker's).
    pub vendor: u16,
    pub product: u16,
    /// The device's `manufacturer` and `product` strings, when it has them.
    pub name: Option<String>,
    /// None when no driver is bound (sysfs read before udev loaded one).
    pub driver: Option<UsbDriver>,
    /// The USB port path, e.g. `2-1` or `2-1.3` (behind a hub).
    pub port: String,
    /// The device draws its power from its own supply (bmAttributes bit 6).
    pub self_powered: bool,
    /// A hub with its own supply sits between the disk and the board.
    pub behind_powered_hub: bool,
}

impl UsbBridge {
    /// `152d:0578`, as lsusb and `usb-storage.quirks=` write it.
    pub fn id(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor, self.product)
    }

    /// Draws its power from the board's own USB port.
    pub fn powered_by_board(&self) -> bool {
        !self.self_powered && !self.behind_powered_hub
    }
}

/// The USB device a disk hangs off: the nearest directory above the disk's
/// sysfs path `sys` that has an `idVendor` (interfaces and SCSI hosts sit
/// between the two and have none).
pub fn device_dir(sys: &Path) -> Option<&Path> {
    sys.ancestors().find(|p| p.join("idVendor").exists())
}

/// The bridge of the USB disk whose resolved sysfs path is `sys`, or None
/// when no USB device is above it.
pub fn bridge(sys: &Path) -> Option<UsbBridge> {
    let device = device_dir(sys)?;
    // The interface (`2-1.3:1.0`) is the directory just below the device on
    // the disk's path; its driver link names uas or usb-storage.
    let interface = sys
        .ancestors()
        .take_while(|p| *p != device)
        .last()
        .filter(|p| *p != sys);
    let driver = interface
        .and_then(|i| fs::read_link(i.join("driver")).ok())
        .and_then(|link| match name_of(&link).as_str() {
            "uas" => Some(UsbDriver::Uas),
            "usb-storage" => Some(UsbDriver::UsbStorage),
            _ => None,
        });
    let strings: Vec<String> = ["manufacturer", "product"]
        .iter()
        .filter_map(|f| read_trimmed(&device.join(f)))
        .collect();
    let behind_powered_hub = device
        .ancestors()
        .skip(1)
        .filter(|p| p.join("idVendor").exists() && !on_the_board(p))
        .any(self_powered);
    Some(UsbBridge {
        vendor: read_id(device, "idVendor")?,
        product: read_id(device, "idProduct")?,
        name: (!strings.is_empty()).then(|| strings.join(" ")),
        driver,
        port: name_of(device),
        self_powered: self_powered(device),
        behind_powered_hub,
    })
}

/// Hubs that belong to the board's USB controller and draw on the board's
/// supply whatever their descriptor says: the VIA VL805's USB 2 hub, which
/// a Pi 4's USB 2 ports sit behind (`lsusb` on any Pi 4: Bus 001 Device 002,
/// ID 2109:3431 VIA Labs, Inc. Hub).
const BOARD_HUBS: &[(u16, u16)] = &[(0x2109, 0x3431)];

/// A root hub (`usb1`, `usb2`: the kernel's, always "self-powered") or a
/// hub in [`BOARD_HUBS`]: the board's own ports, not a hub with a supply.
fn on_the_board(hub: &Path) -> bool {
    name_of(hub).starts_with("usb")
        || read_id(hub, "idVendor")
            .zip(read_id(hub, "idProduct"))
            .is_some_and(|id| BOARD_HUBS.contains(&id))
}

/// `idVendor` or `idProduct`: four hex digits.
fn read_id(device: &Path, file: &str) -> Option<u16> {
    read_trimmed(&device.join(file)).and_then(|v| u16::from_str_radix(&v, 16).ok())
}

/// bmAttributes bit 6 (USB 2.0 spec, 9.6.3): the device has its own supply.
fn self_powered(device: &Path) -> bool {
    read_trimmed(&device.join("bmAttributes"))
        .and_then(|v| u8::from_str_radix(&v, 16).ok())
        .is_some_and(|bits| bits & 0x40 != 0)
}

/// The bridges usb-storage keeps off UAS now: the entries of
/// [`ACTIVE_QUIRKS`] (`VID:PID:flags`, comma-separated) whose flags carry
/// `u`. Empty when usb-storage is not loaded.
pub fn active_quirks(host: &Host) -> Vec<UsbQuirk> {
    read_trimmed(&host.path(ACTIVE_QUIRKS))
        .unwrap_or_default()
        .split(',')
        .filter_map(|entry| {
            let (id, flags) = entry.trim().rsplit_once(':')?;
            flags
                .contains(['u', 'U'])
                .then(|| id.to_ascii_lowercase().parse().ok())
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_quirks_are_the_entries_that_ignore_uas() {
        let root = tempfile::tempdir().unwrap();
        let host = Host::new(root.path());
        assert!(active_quirks(&host).is_empty(), "usb-storage not loaded");
        let file = host.path(ACTIVE_QUIRKS);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, "152d:0578:u,174C:55AA:U,0bc2:2322:r,junk\n").unwrap();
        let ids: Vec<String> = active_quirks(&host).iter().map(|q| q.to_string()).collect();
        assert_eq!(ids, ["152d:0578", "174c:55aa"]);
    }
}
