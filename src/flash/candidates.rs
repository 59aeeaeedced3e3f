//! Which block devices may be flashed, from sysfs and /proc: identity
//! (model, serial, transport, size), what each holds (signatures read from
//! its first and last bytes by `nasforge_engine::machine::signature`, the same probe
//! the on-board setup trusts) and whether the running system uses it (by
//! `nasforge_engine::machine::mounts`, the rule the on-board setup applies
//! before it writes a disk). A target is refused for a reason the user can
//! read, with the flag that overrides it when one exists.

use nasforge_engine::machine::mounts::{BlockDevice, InUse, SystemUse};
use nasforge_engine::machine::signature::{self, Signature};
use nasforge_engine::machine::sysfs::{name_of, parse_devnum, read_trimmed, read_u64};
use std::fs;
use std::path::{Path, PathBuf};

/// 512 GB: no SD card or eMMC a board boots from is larger; a disk that is,
/// is far more likely a data or backup disk named by mistake.
pub const DEFAULT_MAX_SIZE: u64 = 512_000_000_000;

#[derive(Debug, Clone)]
pub struct Device {
    /// Kernel name: `sdb`, `mmcblk0`, `loop3`.
    pub name: String,
    pub path: PathBuf,
    pub major: u32,
    pub minor: u32,
    pub size: u64,
    /// Vendor and model, an MMC card's name, or a loop device's backing file.
    pub model: Option<String>,
    pub serial: Option<String>,
    pub transport: String,
    pub removable: bool,
    pub read_only: bool,
    /// What the disk and its partitions hold: (kernel name, signature).
    pub contents: Vec<(String, Signature)>,
    /// Why the first bytes could not be read, when they could not.
    pub unreadable: Option<String>,
    pub partitions: Vec<Partition>,
    pub in_use: Vec<InUse>,
}

#[derive(Debug, Clone)]
pub struct Partition {
    /// Kernel name: `sdb1`, `mmcblk0p2`.
    pub name: String,
    pub devnum: (u32, u32),
    pub sys: PathBuf,
    /// Byte offset and length on the disk.
    pub start: u64,
    pub size: u64,
}

/// Why a target is not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    InUse(InUse),
    TooLarge {
        size: u64,
        max: u64,
    },
    ReadOnly,
    Partition {
        disk: String,
    },
    /// An md array or device-mapper device: storage built on disks, not one.
    NotADisk {
        kind: String,
    },
    /// A non-removable disk on a SATA, NVMe, SAS/SCSI or virtio bus: a
    /// computer's own disk,
    /// never an SD card, eMMC in a reader, or a USB stick.
    Internal {
        /// "Samsung SSD 980, serial S64D..."
        disk: String,
        transport: String,
    },
}

impl Refusal {
    /// The flag that overrides this refusal, if any may.
    pub fn override_flag(&self) -> Option<&'static str> {
        match self {
            Refusal::TooLarge { .. } => Some("--force-large"),
            Refusal::Internal { .. } => Some("--force"),
            _ => None,
        }
    }

    /// "is larger than ... (pass --force-large ...)"
    pub fn explain(&self) -> String {
        match self {
            Refusal::InUse(InUse::Boot) => "it holds the running system's root filesystem; nasforge never writes the disk it runs from".into(),
            Refusal::InUse(u @ InUse::Mounted { .. }) => format!("{}; unmount it first (everything on the disk will be lost)", u.by_path()),
            Refusal::InUse(u @ InUse::Held { .. }) => format!("{}; stop that device first (mdadm --stop, dmsetup remove, vgchange -an)", u.by_path()),
            Refusal::InUse(u @ InUse::Swap { .. }) => format!("{}; swapoff it first", u.by_path()),
            Refusal::InUse(u @ InUse::ZfsPool { pool, .. }) => format!("{}; export it first (zpool export {pool})", u.by_path()),
            // Found only by the board's discovery, never by `read_device`.
            Refusal::InUse(u @ (InUse::EmmcBootArea | InUse::Unreadable { .. })) => u.by_path().to_string(),
            Refusal::TooLarge { size, max } => format!(
                "it is {}, larger than --max-size {}: SD cards and eMMC are smaller, so this looks like a data disk; pass --force-large if it really is the target",
                both_units(*size),
                both_units(*max)
            ),
            Refusal::ReadOnly => "it is read-only (an SD card's lock switch, or the kernel marked it so)".into(),
            Refusal::Partition { disk } => format!("it is a partition; an image is written to the whole disk: name /dev/{disk}"),
            Refusal::NotADisk { kind } => format!("it is {kind}, not a disk; name the card itself (see nasforge flash --list)"),
            Refusal::Internal { disk, transport } => format!(
                "it is an internal {} disk ({disk}): sysfs reports it non-removable on a {transport} bus, where SD cards, card readers and USB sticks never sit, so it is this computer's own disk whatever its size; pass --force if you really mean to overwrite it",
                transport_name(transport)
            ),
        }
    }
}

impl Device {
    /// "SanDisk Ultra, serial 4C53..., 31.9 GB (29.7 GiB), usb"
    pub fn summary(&self) -> String {
        format!(
            "{}, {}, {}",
            self.model_and_serial(),
            both_units(self.size),
            self.transport
        )
    }

    /// "SanDisk Ultra, serial 4C53...": what tells two disks of one size apart.
    pub fn model_and_serial(&self) -> String {
        let model = self.model.as_deref().unwrap_or("unknown model");
        match &self.serial {
            Some(serial) => format!("{model}, serial {serial}"),
            None => model.to_string(),
        }
    }

    /// Non-removable on a SATA, NVMe, SAS/SCSI (an HBA) or virtio (a
    /// virtual machine's) bus: a computer's own disk. USB and MMC report
    /// their own transports, so a disk in a USB enclosure or a card in a
    /// reader never counts.
    pub fn is_internal(&self) -> bool {
        !self.removable && matches!(self.transport.as_str(), "sata" | "nvme" | "scsi" | "virtio")
    }

    /// "a dos partition table; sdb1: a vfat filesystem labelled 'bootfs'"
    pub fn holds(&self) -> String {
        if let Some(e) = &self.unreadable {
            return format!("unknown: its first bytes cannot be read ({e})");
        }
        if self.contents.is_empty() {
            return if self.partitions.is_empty() {
                "nothing recognisable (blank or unknown)".into()
            } else {
                format!("{} partition(s)", self.partitions.len())
            };
        }
        self.contents
            .iter()
            .map(|(on, sig)| {
                if *on == self.name {
                    sig.to_string()
                } else {
                    format!("{on}: {sig}")
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Everything that stops this disk being written, given the size limit,
    /// whether the user forced a large one (`--force-large`) and whether an
    /// internal one (`--force`).
    pub fn refusals(&self, max_size: u64, force_large: bool, force: bool) -> Vec<Refusal> {
        let mut out: Vec<Refusal> = self.in_use.iter().cloned().map(Refusal::InUse).collect();
        if self.read_only {
            out.push(Refusal::ReadOnly);
        }
        match self.transport.as_str() {
            "md" => out.push(Refusal::NotADisk {
                kind: "an md RAID array".into(),
            }),
            "dm" => out.push(Refusal::NotADisk {
                kind: "a device-mapper device (LVM, LUKS, multipath)".into(),
            }),
            _ => {}
        }
        if self.is_internal() && !force {
            out.push(Refusal::Internal {
                disk: self.model_and_serial(),
                transport: self.transport.clone(),
            });
        }
        if self.size > max_size && !force_large {
            out.push(Refusal::TooLarge {
                size: self.size,
                max: max_size,
            });
        }
        out
    }

    /// Shown by `--list`: removable media, USB and MMC devices.
    pub fn is_candidate(&self) -> bool {
        self.removable || self.transport == "usb" || self.transport == "mmc"
    }
}

/// "31.9 GB (29.7 GiB)": the label's unit and the one tools print.
pub fn both_units(bytes: u64) -> String {
    format!(
        "{:.1} GB ({})",
        bytes as f64 / 1e9,
        crate::size::human(bytes)
    )
}

fn transport(name: &str, sys: &str) -> String {
    let t = if name.starts_with("loop") {
        "loop"
    } else if sys.contains("/usb") {
        "usb"
    } else if name.starts_with("mmcblk") || sys.contains("/mmc_host/") {
        "mmc"
    } else if name.starts_with("nvme") {
        "nvme"
    } else if sys.contains("/ata") {
        "sata"
    } else if sys.contains("/virtio") || name.starts_with("vd") {
        "virtio"
    } else if name.starts_with("md") {
        "md"
    } else if name.starts_with("dm-") {
        "dm"
    } else if sys.contains("/devices/virtual/") {
        "virtual"
    } else {
        "scsi"
    };
    t.to_string()
}

pub fn model(sys: &Path) -> Option<String> {
    if let Some(backing) = read_trimmed(&sys.join("loop/backing_file")) {
        return Some(format!("loop on {backing}"));
    }
    let vendor = read_trimmed(&sys.join("device/vendor")).filter(|v| !v.starts_with("0x"));
    let model =
        read_trimmed(&sys.join("device/model")).or_else(|| read_trimmed(&sys.join("device/name")));
    match (vendor, model) {
        (Some(v), Some(m)) if !m.starts_with(&v) => Some(format!("{v} {m}")),
        (_, Some(m)) => Some(m),
        (Some(v), None) => Some(v),
        (None, None) => None,
    }
}

/// A disk's serial number: NVMe and MMC report it beside the model, SCSI
/// and SATA disks a World Wide ID, USB disks sit below a USB device that
/// reports one.
pub fn serial(sys: &Path) -> Option<String> {
    ["device/serial", "wwid", "device/wwid"]
        .iter()
        .find_map(|attr| read_trimmed(&sys.join(attr)))
        .or_else(|| {
            sys.ancestors()
                .skip(1)
                .take_while(|a| a.file_name().is_some_and(|n| n != "devices"))
                .find_map(|a| read_trimmed(&a.join("serial")))
        })
}

/// "SATA", "NVMe": a transport as people write it.
fn transport_name(transport: &str) -> &str {
    match transport {
        "sata" => "SATA",
        "nvme" => "NVMe",
        "scsi" => "SAS/SCSI",
        other => other,
    }
}

/// Reads one whole disk by its sysfs directory: identity, partitions and
/// how the running system uses it. What it holds is left to [`Device::probe`].
pub fn read_device(sys: &Path, system: &SystemUse) -> Option<Device> {
    let name = name_of(sys);
    let sectors = read_u64(&sys.join("size"))?;
    let (major, minor) = parse_devnum(&fs::read_to_string(sys.join("dev")).ok()?)?;
    let partitions = partitions(sys);
    let in_use = in_use(system, &name, (major, minor), sys, &partitions);
    let sys_text = sys.to_string_lossy();
    Some(Device {
        transport: transport(&name, &sys_text),
        model: model(sys),
        serial: serial(sys),
        removable: read_u64(&sys.join("removable")) == Some(1),
        read_only: read_u64(&sys.join("ro")) == Some(1),
        partitions,
        path: PathBuf::from("/dev").join(&name),
        name,
        major,
        minor,
        size: sectors.checked_mul(512)?,
        contents: Vec::new(),
        unreadable: None,
        in_use,
    })
}

/// The partitions in a disk's sysfs directory, by start.
fn partitions(sys: &Path) -> Vec<Partition> {
    let mut partitions: Vec<Partition> = fs::read_dir(sys)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("partition").exists())
                .filter_map(|p| {
                    let devnum = parse_devnum(&fs::read_to_string(p.join("dev")).ok()?)?;
                    let sectors = |attr| read_u64(&p.join(attr)).unwrap_or(0).checked_mul(512);
                    Some(Partition {
                        name: name_of(&p),
                        devnum,
                        start: sectors("start")?,
                        size: sectors("size")?,
                        sys: p,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    partitions.sort_by_key(|p| p.start);
    partitions
}

/// Why the running system needs the disk, the root filesystem first:
/// nasforge never writes the disk it runs from, whatever else holds it.
fn in_use(
    system: &SystemUse,
    name: &str,
    devnum: (u32, u32),
    sys: &Path,
    partitions: &[Partition],
) -> Vec<InUse> {
    let whole = BlockDevice { name, devnum, sys };
    let devices: Vec<BlockDevice> = std::iter::once(whole)
        .chain(partitions.iter().map(|p| BlockDevice {
            name: &p.name,
            devnum: p.devnum,
            sys: &p.sys,
        }))
        .collect();
    let (root, rest): (Vec<InUse>, Vec<InUse>) = system
        .uses(&devices)
        .into_iter()
        .partition(|u| *u == InUse::Boot);
    root.into_iter().take(1).chain(rest).collect()
}

impl Device {
    /// Fills in what the disk and each partition hold, from `probe(offset,
    /// len)` over their byte ranges on the disk.
    pub fn probe(&mut self, probe: impl Fn(u64, u64) -> std::io::Result<Vec<Signature>>) {
        if self.size == 0 {
            return;
        }
        match probe(0, self.size) {
            Ok(found) => self
                .contents
                .extend(found.into_iter().map(|s| (self.name.clone(), s))),
            Err(e) => self.unreadable = Some(e.to_string()),
        }
        for p in &self.partitions {
            if p.size > 0
                && p.start
                    .checked_add(p.size)
                    .is_some_and(|end| end <= self.size)
                && let Ok(found) = probe(p.start, p.size)
            {
                self.contents
                    .extend(found.into_iter().map(|s| (p.name.clone(), s)));
            }
        }
    }
}

/// Every whole disk with media (empty card-reader slots and unbound loop
/// devices report size 0 and are left out), in name order, probed by path:
/// for `--list`, which writes nothing.
pub fn all() -> Vec<Device> {
    let system = SystemUse::read(Path::new("/"));
    let mut names: Vec<String> = fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|n| (n.len(), n.clone()));
    names
        .iter()
        .filter_map(|n| fs::canonicalize(Path::new("/sys/block").join(n)).ok())
        .filter_map(|sys| read_device(&sys, &system))
        .filter(|d| d.size > 0)
        .map(|mut d| {
            let path = d.path.clone();
            d.probe(|offset, len| signature::read(&path, offset, Some(len)));
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_come_from_the_sysfs_path() {
        assert_eq!(
            transport(
                "sdb",
                "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb"
            ),
            "usb"
        );
        assert_eq!(
            transport(
                "mmcblk0",
                "/sys/devices/platform/emmc2bus/fe340000.mmc/mmc_host/mmc0/mmc0:aaaa/block/mmcblk0"
            ),
            "mmc"
        );
        assert_eq!(
            transport(
                "sda",
                "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
            ),
            "sata"
        );
        assert_eq!(
            transport("loop3", "/sys/devices/virtual/block/loop3"),
            "loop"
        );
    }

    /// A fake sysfs directory for one whole disk, where the kernel would
    /// put it, with the attributes `read_device` reads.
    fn fake_disk(root: &Path, sys: &str, removable: u8, model: &str, serial: &str) -> PathBuf {
        let dir = root.join(sys);
        fs::create_dir_all(dir.join("device")).unwrap();
        for (attr, value) in [
            ("size", "1953525168"),
            ("dev", "8:0"),
            ("removable", &removable.to_string()),
            ("ro", "0"),
            ("device/model", model),
            ("device/serial", serial),
        ] {
            fs::write(dir.join(attr), format!("{value}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn internal_sata_nvme_sas_and_virtio_disks_need_force_whatever_their_size() {
        let root = tempfile::tempdir().unwrap();
        let sata = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda",
            0,
            "WDC WD10EZEX-08W",
            "WD-WCC6Y0RL1234",
        );
        let nvme = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1",
            0,
            "Samsung SSD 980 1TB",
            "S64DNX0R123456",
        );
        // A SAS/SATA disk behind an HBA (no `ata` in its path), and a
        // virtual machine's disk.
        let sas = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:01.0/0000:01:00.0/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0/block/sdd",
            0,
            "ST4000NM0023",
            "Z1Z0ABCD",
        );
        let vm = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:04.0/virtio1/block/vda",
            0,
            "unknown",
            "vm-disk-1",
        );
        let system = SystemUse::default();
        for (sys, kind, model, serial) in [
            (&sata, "SATA", "WDC WD10EZEX-08W", "WD-WCC6Y0RL1234"),
            (&nvme, "NVMe", "Samsung SSD 980 1TB", "S64DNX0R123456"),
            (&sas, "SAS/SCSI", "ST4000NM0023", "Z1Z0ABCD"),
            (&vm, "virtio", "unknown", "vm-disk-1"),
        ] {
            let d = read_device(sys, &system).unwrap();
            assert!(d.is_internal(), "{d:?}");
            // Far under --max-size, and --force-large given: still refused.
            let refusals = d.refusals(u64::MAX, true, false);
            let [r @ Refusal::Internal { .. }] = &refusals[..] else {
                panic!("{refusals:?}")
            };
            let why = r.explain();
            assert!(
                why.contains(&format!("internal {kind} disk ({model}, serial {serial})"))
                    && why.contains("non-removable")
                    && why.contains("pass --force"),
                "{why}"
            );
            assert_eq!(r.override_flag(), Some("--force"));
            assert!(d.refusals(u64::MAX, false, true).is_empty());
        }

        // The same disk behind USB, or reported removable, is a candidate.
        let usb = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb",
            0,
            "WDC WD10EZEX-08W",
            "WD-WCC6Y0RL1234",
        );
        let hotswap = fake_disk(
            root.path(),
            "devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdc",
            1,
            "SD card slot",
            "0001",
        );
        for sys in [&usb, &hotswap] {
            let d = read_device(sys, &system).unwrap();
            assert!(!d.is_internal(), "{d:?}");
            assert!(d.refusals(u64::MAX, false, false).is_empty(), "{d:?}");
        }
    }

    #[test]
    fn refusals_name_their_override() {
        let r = Refusal::TooLarge {
            size: 2_000_000_000_000,
            max: DEFAULT_MAX_SIZE,
        };
        assert_eq!(r.override_flag(), Some("--force-large"));
        assert!(r.explain().contains("--force-large"));
        assert_eq!(Refusal::InUse(InUse::Boot).override_flag(), None);
    }
}
