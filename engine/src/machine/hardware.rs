//! A disk's hardware as sysfs and udev's record report it: its model,
//! serial and WWN, whether it spins, and how it hangs off the board (its
//! bus, the PCI controller nearest it and that controller's PCIe link, a
//! USB disk's link speed).

use crate::machine::controllers;
use crate::machine::sysfs::{read_trimmed, read_u64};
use crate::machine::udev;
use crate::machine::usb;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// How a disk is attached. USB and MMC are listed so that recipe rules can
/// name (and warnings can single out) them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Sata,
    Sas,
    Usb,
    Nvme,
    Mmc,
    Virtio,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Sata => "sata",
            Transport::Sas => "sas",
            Transport::Usb => "usb",
            Transport::Nvme => "nvme",
            Transport::Mmc => "mmc",
            Transport::Virtio => "virtio",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controller {
    /// PCI address, e.g. `0000:01:00.0`.
    pub pci: String,
    pub vendor: u16,
    pub device: u16,
    pub name: Option<String>,
    pub note: Option<String>,
    /// Negotiated PCIe link: transfer rate in MT/s (5000 = Gen2) and lanes.
    pub link_mts: Option<u32>,
    pub link_width: Option<u32>,
}

impl Controller {
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => format!("PCI {:04x}:{:04x}", self.vendor, self.device),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationalSource {
    Udev,
    Sysfs,
}

/// Model, serial and WWN: udev's, else what sysfs reports. For a SCSI disk
/// (a SAS drive: udev's scsi_id named it, `ID_BUS=scsi`) the serial is the
/// unit serial number of its VPD page 0x80 (`ID_SCSI_SERIAL`), which the
/// drive's label and smartctl show: udev's `ID_SERIAL_SHORT` for it is the
/// page 0x83 name, the WWN again.
pub fn names(sys: &Path, db: &udev::Record) -> (Option<String>, Option<String>, Option<String>) {
    let model = db
        .decoded("ID_MODEL_ENC")
        .or_else(|| db.get("ID_MODEL").map(|m| m.replace('_', " ")))
        .or_else(|| read_trimmed(&sys.join("device/model")));
    let scsi_serial = db
        .get("ID_SCSI_SERIAL")
        .filter(|_| db.get("ID_BUS") == Some("scsi"));
    let serial = scsi_serial
        .or_else(|| db.get("ID_SERIAL_SHORT"))
        .map(str::to_string)
        .or_else(|| read_trimmed(&sys.join("device/serial")));
    let wwn = db
        .get("ID_WWN_WITH_EXTENSION")
        .or_else(|| db.get("ID_WWN"))
        .map(str::to_string)
        .or_else(|| {
            read_trimmed(&sys.join("wwid")).or_else(|| read_trimmed(&sys.join("device/wwid")))
        });
    (model, serial, wwn)
}

/// Whether the disk spins, and which source said so.
pub fn rotational(sys: &Path, db: &udev::Record) -> (bool, RotationalSource) {
    if let Some(rpm) = db
        .get("ID_ATA_ROTATION_RATE_RPM")
        .and_then(|r| r.parse::<u32>().ok())
    {
        return (rpm > 0, RotationalSource::Udev);
    }
    if db.get("ID_SSD") == Some("1") {
        return (false, RotationalSource::Udev);
    }
    (
        read_u64(&sys.join("queue/rotational")) != Some(0),
        RotationalSource::Sysfs,
    )
}

/// The kernel modules that drive SAS HBAs, as `sys/bus/pci/drivers/`
/// names them.
pub const SAS_DRIVERS: &[&str] = &["mpt3sas", "megaraid_sas", "mptsas"];

/// The `proc_name` of a SAS HBA's SCSI host: mpt3sas names the hosts of its
/// SAS2 chips (SAS2008, SAS2308) `mpt2sas`.
const SAS_HOST_NAMES: &[&str] = &["mpt2sas", "mpt3sas", "megaraid_sas", "mptsas"];

/// The bus of disk `name` whose sysfs directory is `dir`.
pub fn transport(name: &str, dir: &Path, db: &udev::Record) -> Option<Transport> {
    let sys = dir.to_string_lossy();
    let has = |part: &str| {
        sys.split('/').any(|c| {
            c.starts_with(part)
                && c[part.len()..]
                    .chars()
                    .all(|ch| ch.is_ascii_digit() || ch == '-' || ch == '.' || ch == ':')
        })
    };
    if sys.contains("/usb") && has("usb") || db.get("ID_BUS") == Some("usb") {
        Some(Transport::Usb)
    } else if name.starts_with("nvme") {
        Some(Transport::Nvme)
    } else if name.starts_with("mmcblk") {
        Some(Transport::Mmc)
    } else if has("ata") {
        Some(Transport::Sata)
    } else if has("virtio") || name.starts_with("vd") {
        Some(Transport::Virtio)
    } else if sys.contains("/end_device-")
        || sys.contains("/sas_")
        // megaraid_sas puts no SAS transport directory in a disk's path.
        || scsi_host_driver(dir).is_some_and(|d| SAS_HOST_NAMES.contains(&d.as_str()))
    {
        Some(Transport::Sas)
    } else if db.get("ID_BUS") == Some("ata") {
        Some(Transport::Sata)
    } else {
        None
    }
}

/// The driver of the SCSI host (`hostN`) above a disk, from the host's
/// `scsi_host/hostN/proc_name`, the file `sys/class/scsi_host/hostN` leads to.
fn scsi_host_driver(sys: &Path) -> Option<String> {
    let host = sys.ancestors().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str()?.strip_prefix("host"))
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })?;
    read_trimmed(
        &host
            .join("scsi_host")
            .join(host.file_name()?)
            .join("proc_name"),
    )
}

fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The PCI function nearest the disk: the SATA/NVMe/USB controller.
pub fn controller(sys: &Path) -> Option<Controller> {
    let dir = sys.ancestors().find(|p| {
        p.file_name()
            .is_some_and(|n| is_pci_address(&n.to_string_lossy()))
    })?;
    Controller::read(dir)
}

/// A sysfs file holding one hexadecimal number (`0x1b21`).
fn hex_file(dir: &Path, file: &str) -> Option<u32> {
    read_trimmed(&dir.join(file))
        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
}

/// The PCI function's class (`0x010601`: mass storage, SATA, AHCI).
pub fn pci_class(dir: &Path) -> Option<u32> {
    hex_file(dir, "class")
}

/// The driver bound to the PCI function, if any.
pub fn pci_driver(dir: &Path) -> Option<String> {
    std::fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

impl Controller {
    /// The PCI function whose sysfs directory is `dir` (under
    /// /sys/bus/pci/devices or a disk's path): the one reader of its ids,
    /// the known chip's name and the negotiated link.
    pub fn read(dir: &Path) -> Option<Controller> {
        let id = |file: &str| hex_file(dir, file).and_then(|v| u16::try_from(v).ok());
        let (vendor, device) = (id("vendor")?, id("device")?);
        let known = controllers::lookup(vendor, device);
        let link_mts = read_trimmed(&dir.join("current_link_speed"))
            .and_then(|s| {
                s.split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f32>().ok())
            })
            .map(|gts| (gts * 1000.0).round() as u32);
        let link_width = read_u64(&dir.join("current_link_width"))
            .map(|w| w as u32)
            .filter(|&w| w > 0);
        Some(Controller {
            pci: dir.file_name()?.to_string_lossy().into_owned(),
            vendor,
            device,
            name: known.as_ref().map(|k| k.name.to_string()),
            note: known.and_then(|k| k.note).map(str::to_string),
            link_mts,
            link_width,
        })
    }
}

/// A USB disk's link speed in Mbit/s, from the USB device above it.
pub fn usb_speed(sys: &Path) -> Option<u32> {
    usb::device_dir(sys)
        .and_then(|device| read_trimmed(&device.join("speed")))
        .and_then(|s| s.parse::<f32>().ok())
        .map(|s| s as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_pci_addresses() {
        assert!(is_pci_address("0000:01:00.0"));
        assert!(is_pci_address("0001:01:00.0"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("ata1"));
    }

    #[test]
    fn a_sas_drive_s_serial_is_its_unit_serial_not_its_wwn() {
        let (_dir, host) = crate::machine::fake_host(&[("/sys/block/sda/size", "8\n")]);
        let sys = host.path("/sys/block/sda");
        // As udev's scsi_id reports a SAS drive (and qemu's scsi-hd).
        let sas = udev::Record::parse(
            "E:ID_BUS=scsi\nE:ID_SERIAL=35000c500a1b2c3d4\nE:ID_SERIAL_SHORT=5000c500a1b2c3d4\nE:ID_SCSI_SERIAL=ZA1ABCDE\nE:ID_WWN=0x5000c500a1b2c3d4\n",
        );
        let (_, serial, wwn) = names(&sys, &sas);
        assert_eq!(serial.as_deref(), Some("ZA1ABCDE"));
        assert_eq!(wwn.as_deref(), Some("0x5000c500a1b2c3d4"));
        // A SATA drive behind the same HBA: ata_id's serial, as on a port.
        let sata = udev::Record::parse(
            "E:ID_BUS=ata\nE:ID_SERIAL_SHORT=ZDH1A008\nE:ID_SCSI_SERIAL=ignored\n",
        );
        assert_eq!(names(&sys, &sata).1.as_deref(), Some("ZDH1A008"));
    }

    /// A MegaRAID in JBOD mode: no `end_device-` in the path, only the
    /// SCSI host's driver says SAS.
    #[test]
    fn a_disk_on_a_sas_hba_s_scsi_host_is_sas() {
        let hba = "/sys/devices/pci0000:00/0000:00:03.0/host0";
        let disk = format!("{hba}/target0:0:1/0:0:1:0/block/sdb");
        let (_dir, host) = crate::machine::fake_host(&[
            (
                &format!("{hba}/scsi_host/host0/proc_name"),
                "megaraid_sas\n",
            ),
            (&format!("{disk}/size"), "8\n"),
        ]);
        let ata = udev::Record::parse("E:ID_BUS=ata\n");
        assert_eq!(
            transport("sdb", &host.path(&disk), &ata),
            Some(Transport::Sas),
            "a SATA disk on the HBA hangs off SAS"
        );
        let (_dir, host) = crate::machine::fake_host(&[
            (&format!("{hba}/scsi_host/host0/proc_name"), "sym53c8xx\n"),
            (&format!("{disk}/size"), "8\n"),
        ]);
        assert_eq!(
            transport("sdb", &host.path(&disk), &ata),
            Some(Transport::Sata)
        );
        assert_eq!(
            transport("sdb", &host.path(&disk), &udev::Record::default()),
            None
        );
    }
}
