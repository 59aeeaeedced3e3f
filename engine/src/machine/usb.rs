//! A USB disk's bridge as sysfs reports it: the vendor and product id of
//! the USB device, which driver took its storage interface (`uas` or
//! `usb-storage`), how it is powered, and whether a known-bad bridge should
//! be kept off UAS.

use serde::{Deserialize, Serialize};
use std::fmt;

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
