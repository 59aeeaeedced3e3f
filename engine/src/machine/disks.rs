//! Disk discovery from sysfs, udev's database and /proc, under a configurable
//! root so tests run on fake trees modelled on real boards.
//!
//! Everything the planner needs to decide whether a disk may be used is
//! collected here: identity (model, serial, WWN), attachment (transport, PCI
//! controller and link), what it holds (signatures read from its first and
//! last bytes, util-linux's and udev's probes, any non-zero byte at either
//! end: see [`signature::whole_disk`]) and whether the running system uses
//! it (boot disk, mounts, holders, swap). Every step that writes to a disk
//! discovers it again just before, so this check runs right before the
//! first write as well as at planning.

use crate::machine::controllers;
use crate::machine::signature::{self, Signature};
use crate::machine::sysfs::{parse_devnum, read_trimmed, read_u64};
use crate::machine::udev;
use crate::size::Size;
use crate::spec::Transport;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// Where the system's state is read from: `/` on the board, a fake tree in
/// tests. Device nodes are read from `dev` (default `<root>/dev`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub root: PathBuf,
    pub dev: PathBuf,
}

impl Host {
    pub fn new(root: impl Into<PathBuf>) -> Host {
        let root = root.into();
        Host {
            dev: root.join("dev"),
            root,
        }
    }

    pub fn with_dev(mut self, dev: impl Into<PathBuf>) -> Host {
        self.dev = dev.into();
        self
    }

    /// An absolute system path, moved under the root.
    pub fn path(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// A device path such as `/dev/md/data` or `/dev/disk/by-id/...`, moved
    /// under the device directory.
    pub fn dev_path(&self, device: &str) -> PathBuf {
        self.dev.join(device.trim_start_matches("/dev/"))
    }
}

/// What the planner needs to know about the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    pub disks: Vec<Disk>,
    /// The fastest wired network link, for the bottleneck estimate.
    pub network: Option<NetworkLink>,
    /// md arrays already assembled: old NAS disks put back in come up as
    /// arrays of their own, possibly under the name a recipe wants.
    #[serde(default)]
    pub arrays: Vec<MdArray>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdArray {
    /// Kernel name, e.g. `md127`.
    pub device: String,
    /// The name from the `/dev/md/<name>` link udev or mdadm made, if any.
    pub name: Option<String>,
    /// Kernel names of its member devices (`sdc1`), from sysfs.
    pub members: Vec<String>,
}

/// What tells one physical disk from another, whatever name the kernel
/// gives it on this boot: a step planned for a disk checks that the disk
/// at its path is still that disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The kernel name at planning, for messages only.
    pub name: String,
    pub size: Size,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
}

impl Identity {
    pub fn same_disk(&self, other: &Identity) -> bool {
        (&self.size, &self.model, &self.serial, &self.wwn)
            == (&other.size, &other.model, &other.serial, &other.wwn)
    }
}

impl std::fmt::Display for Identity {
    /// "sdb: WDC WD40EFRX, serial WD-WCC7K1234567, no WWN, 4 TB"
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let or_none = |label: &str, v: &Option<String>| match v {
            Some(v) => format!("{label} {v}"),
            None => format!("no {label}"),
        };
        write!(
            f,
            "{}: {}, {}, {}, {}",
            self.name,
            self.model.as_deref().unwrap_or("unknown model"),
            or_none("serial", &self.serial),
            or_none("WWN", &self.wwn),
            self.size
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkLink {
    pub interface: String,
    pub mbit: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// Kernel name, e.g. `sda`, `nvme0n1`.
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub size: Size,
    pub logical_block_size: u64,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    pub transport: Option<Transport>,
    pub rotational: bool,
    /// Which source decided `rotational`: udev's ATA data or the kernel's
    /// queue flag (which USB bridges get wrong).
    pub rotational_from: RotationalSource,
    /// Reported for information only: a Marvell 9215 sets it on a Pi 5.
    pub removable: bool,
    pub controller: Option<Controller>,
    /// The USB link speed in Mbit/s for USB disks.
    pub usb_mbit: Option<u32>,
    /// A stable `/dev/disk/by-id/...` path, when udev made a unique one.
    pub by_id: Option<String>,
    pub partitions: Vec<Partition>,
    /// What the whole disk holds (partition table, filesystem, RAID label...).
    pub contents: Vec<Signature>,
    pub in_use: Vec<InUse>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationalSource {
    Udev,
    Sysfs,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    pub number: u32,
    /// Byte offset on the disk.
    pub start: u64,
    pub size: Size,
    pub contents: Vec<Signature>,
}

/// Why the running system needs a disk: such a disk is never used, whatever
/// the recipe says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InUse {
    /// It holds the root filesystem.
    Boot,
    /// An eMMC boot area (`mmcblk*boot*`): firmware lives there.
    EmmcBootArea,
    Mounted {
        device: String,
        at: String,
    },
    /// Another block device (md, dm, bcache) is built on it.
    Held {
        device: String,
        by: String,
    },
    Swap {
        device: String,
    },
    /// Its bytes could not be read, so what it holds is unknown.
    Unreadable {
        error: String,
    },
}

impl std::fmt::Display for InUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InUse::Boot => f.write_str("it holds the running system's root filesystem"),
            InUse::EmmcBootArea => f.write_str("it is an eMMC boot area"),
            InUse::Mounted { device, at } => write!(f, "{device} is mounted at {at}"),
            InUse::Held { device, by } => write!(f, "{device} is in use by {by}"),
            InUse::Swap { device } => write!(f, "{device} is active swap"),
            InUse::Unreadable { error } => write!(f, "its contents cannot be read ({error})"),
        }
    }
}

impl Disk {
    pub fn identity(&self) -> Identity {
        Identity {
            name: self.name.clone(),
            size: self.size,
            model: self.model.clone(),
            serial: self.serial.clone(),
            wwn: self.wwn.clone(),
        }
    }

    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.name)
    }

    /// The path steps use: stable across reboots when udev gave one, so a
    /// resumed setup finds the same disk even if sdX names moved.
    pub fn stable_path(&self) -> String {
        self.by_id.clone().unwrap_or_else(|| self.dev_path())
    }

    /// Everything found on the disk and inside its partitions.
    pub fn all_contents(&self) -> Vec<(String, &Signature)> {
        let whole = self.contents.iter().map(|s| (self.name.clone(), s));
        let parts = self
            .partitions
            .iter()
            .flat_map(|p| p.contents.iter().map(|s| (p.name.clone(), s)));
        whole.chain(parts).collect()
    }

    pub fn is_blank(&self) -> bool {
        self.contents.is_empty() && self.partitions.iter().all(|p| p.contents.is_empty())
    }

    /// "a gpt partition table; sdb1: an ext4 filesystem labelled 'backup'"
    pub fn describe_contents(&self) -> String {
        let mut out = Vec::new();
        for (on, sig) in self.all_contents() {
            if on == self.name {
                out.push(sig.to_string());
            } else {
                out.push(format!("{on}: {sig}"));
            }
        }
        if out.is_empty() && !self.partitions.is_empty() {
            out.push(format!("{} partition(s)", self.partitions.len()));
        }
        out.join("; ")
    }

    /// "WDC WD40EFRX (WD-WCC7K1234567), 4 TB sata"
    pub fn summary(&self) -> String {
        let model = self.model.as_deref().unwrap_or("unknown model");
        let serial = self
            .serial
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let transport = self.transport.map(|t| format!(" {t}")).unwrap_or_default();
        let kind = if self.rotational { "HDD" } else { "SSD" };
        format!("{model}{serial}, {}{transport} {kind}", self.size)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("cannot list block devices in {}: {source}; is sysfs mounted?", path.display())]
    NoSysfs {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Device names that are never disks a NAS can use.
const VIRTUAL_PREFIXES: &[&str] = &[
    "loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd", "mtdblock", "zd",
];

pub fn discover(host: &Host) -> Result<Inventory, DiscoveryError> {
    let sys_block = host.path("/sys/block");
    let entries = fs::read_dir(&sys_block).map_err(|source| DiscoveryError::NoSysfs {
        path: sys_block.clone(),
        source,
    })?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| natural_key(n));

    let system = SystemUse::read(host);
    let mut disks: Vec<Disk> = names
        .iter()
        .filter(|n| !VIRTUAL_PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter_map(|name| read_disk(host, &system, name))
        .collect();

    // Cheap USB bridges give every disk the same serial, so by-id links
    // collide; such a disk is addressed by kernel name instead.
    let links: Vec<Option<String>> = disks.iter().map(|d| d.by_id.clone()).collect();
    for disk in &mut disks {
        if disk.by_id.is_some() && links.iter().filter(|l| **l == disk.by_id).count() > 1 {
            disk.by_id = None;
        }
    }
    Ok(Inventory {
        disks,
        network: network_link(host),
        arrays: md_arrays(host, &names),
    })
}

/// The assembled md arrays among the block devices `names`.
fn md_arrays(host: &Host, names: &[String]) -> Vec<MdArray> {
    let links = md_names(host);
    names
        .iter()
        .filter(|n| host.path("/sys/block").join(n).join("md").is_dir())
        .map(|device| MdArray {
            device: device.clone(),
            name: links
                .iter()
                .find(|(kernel, _)| kernel == device)
                .map(|(_, name)| name.clone()),
            members: md_members(host, device),
        })
        .collect()
}

/// The `/dev/md/<name>` links as (kernel name, name): `md127` carries `data`.
pub fn md_names(host: &Host) -> Vec<(String, String)> {
    let Ok(entries) = fs::read_dir(host.dev_path("/dev/md")) else {
        return Vec::new();
    };
    let mut names: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| {
            let target = fs::read_link(e.path()).ok()?;
            Some((
                target.file_name()?.to_string_lossy().into_owned(),
                e.file_name().to_string_lossy().into_owned(),
            ))
        })
        .collect();
    names.sort();
    names
}

/// Kernel names of the members of md array `device` (`md127`), from its
/// `md/dev-*/block` links in sysfs, sorted.
pub fn md_members(host: &Host, device: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(host.path("/sys/block").join(device).join("md")) else {
        return Vec::new();
    };
    let mut members: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("dev-"))
        .filter_map(|e| {
            let target = fs::read_link(e.path().join("block")).ok()?;
            Some(target.file_name()?.to_string_lossy().into_owned())
        })
        .collect();
    members.sort();
    members
}

/// The kernel name of the device a path under /dev leads to:
/// `/dev/disk/by-id/wwn-...-part1` → `sdb1`, `/dev/md/data` → `md127`. Links
/// are followed only while they stay in the device directory (a test tree
/// may point a node at a real loop device). None when nothing is there.
pub fn kernel_name(host: &Host, device: &str) -> Option<String> {
    let mut path = host.dev_path(device);
    // udev's links are one or two hops; the bound only stops a loop.
    for _ in 0..8 {
        let Ok(target) = fs::read_link(&path) else {
            break;
        };
        let next = lexical_join(path.parent()?, &target);
        if !next.starts_with(&host.dev) {
            break;
        }
        path = next;
    }
    path.exists()
        .then(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .flatten()
}

/// `dir` joined with `rel`, `..` resolved without touching the filesystem.
fn lexical_join(dir: &Path, rel: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in dir.join(rel).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Sorts sda, sdb, ..., sdz, sdaa and nvme0n1 before nvme0n10.
fn natural_key(name: &str) -> (usize, String) {
    (name.len(), name.to_string())
}

fn read_disk(host: &Host, system: &SystemUse, name: &str) -> Option<Disk> {
    let link = host.path("/sys/block").join(name);
    let sys = fs::canonicalize(&link).unwrap_or(link);
    let sectors = read_u64(&sys.join("size"))?;
    if sectors == 0 {
        return None; // an empty card reader slot
    }
    let (major, minor) = parse_devnum(&fs::read_to_string(sys.join("dev")).ok()?)?;
    let udev_data = host.path("/run/udev/data");
    let db = udev::Record::read(&udev_data, major, minor);
    let sys_text = sys.to_string_lossy().into_owned();

    let transport = transport(name, &sys_text, &db);
    let (rotational, rotational_from) = rotational(&sys, &db);
    let model = db
        .decoded("ID_MODEL_ENC")
        .or_else(|| db.get("ID_MODEL").map(|m| m.replace('_', " ")))
        .or_else(|| read_trimmed(&sys.join("device/model")));
    let serial = db
        .get("ID_SERIAL_SHORT")
        .map(str::to_string)
        .or_else(|| read_trimmed(&sys.join("device/serial")));
    let wwn = db
        .get("ID_WWN_WITH_EXTENSION")
        .or_else(|| db.get("ID_WWN"))
        .map(str::to_string)
        .or_else(|| {
            read_trimmed(&sys.join("wwid")).or_else(|| read_trimmed(&sys.join("device/wwid")))
        });
    let by_id = pick_by_id(&db.links);

    let mut partitions = Vec::new();
    let mut in_use = Vec::new();
    if name.starts_with("mmcblk") && name.contains("boot") {
        in_use.push(InUse::EmmcBootArea);
    }
    let mut devices = vec![(name.to_string(), (major, minor), sys.clone())];
    if let Ok(children) = fs::read_dir(&sys) {
        let mut children: Vec<_> = children
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("partition").exists())
            .collect();
        children.sort();
        for child in children {
            let pname = child
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let Some(dev) = fs::read_to_string(child.join("dev"))
                .ok()
                .as_deref()
                .and_then(parse_devnum)
            else {
                continue;
            };
            partitions.push(Partition {
                number: read_u64(&child.join("partition")).unwrap_or(0) as u32,
                start: read_u64(&child.join("start")).unwrap_or(0) * 512,
                size: Size(read_u64(&child.join("size")).unwrap_or(0) * 512),
                name: pname.clone(),
                contents: Vec::new(),
            });
            devices.push((pname, dev, child));
        }
    }
    partitions.sort_by_key(|p| p.number);
    for (dev_name, devnum, dir) in &devices {
        if system.root.contains(devnum) {
            in_use.push(InUse::Boot);
        }
        for at in system
            .mounts
            .iter()
            .filter(|m| m.0 == *devnum || m.1 == *dev_name)
            .map(|m| &m.2)
        {
            in_use.push(InUse::Mounted {
                device: dev_name.clone(),
                at: at.clone(),
            });
        }
        if let Ok(holders) = fs::read_dir(dir.join("holders")) {
            let mut by: Vec<String> = holders
                .flatten()
                .map(|h| h.file_name().to_string_lossy().into_owned())
                .collect();
            by.sort();
            for by in by {
                in_use.push(InUse::Held {
                    device: dev_name.clone(),
                    by,
                });
            }
        }
        if system.swaps.contains(dev_name) {
            in_use.push(InUse::Swap {
                device: dev_name.clone(),
            });
        }
    }
    in_use.dedup();

    let node = host.dev.join(name);
    let contents = match signature::whole_disk(&node, udev_contents(&db)) {
        Ok(found) => found,
        Err(error) => {
            in_use.push(InUse::Unreadable { error });
            Vec::new()
        }
    };
    for part in &mut partitions {
        if let Ok(found) = signature::read(&node, part.start, Some(part.size.0)) {
            part.contents = found;
        }
        let (pmaj, pmin) = devices
            .iter()
            .find(|d| d.0 == part.name)
            .map(|d| d.1)
            .unwrap_or_default();
        let pdb = udev::Record::read(&udev_data, pmaj, pmin);
        if part.contents.is_empty()
            && let Some(fstype) = pdb.get("ID_FS_TYPE")
        {
            part.contents.push(Signature::Filesystem {
                fstype: fstype.to_string(),
                label: pdb.decoded("ID_FS_LABEL_ENC"),
                uuid: pdb.get("ID_FS_UUID").map(str::to_string),
            });
        }
    }

    Some(Disk {
        name: name.to_string(),
        major,
        minor,
        size: Size(sectors * 512),
        logical_block_size: read_u64(&sys.join("queue/logical_block_size")).unwrap_or(512),
        model,
        serial,
        wwn,
        transport,
        rotational,
        rotational_from,
        removable: read_u64(&sys.join("removable")) == Some(1),
        controller: controller(&sys),
        usb_mbit: (transport == Some(Transport::Usb))
            .then(|| usb_speed(&sys))
            .flatten(),
        by_id,
        partitions,
        contents,
        in_use,
    })
}

/// What udev's own blkid probe found on the whole disk at its last event:
/// a filesystem, RAID label or the like (`ID_FS_*`), a partition table.
fn udev_contents(db: &udev::Record) -> Vec<Signature> {
    let mut found = Vec::new();
    if let Some(kind) = db.get("ID_FS_TYPE") {
        found.push(Signature::from_blkid(
            kind,
            db.get("ID_FS_USAGE"),
            db.decoded("ID_FS_LABEL_ENC"),
            db.get("ID_FS_UUID").map(str::to_string),
            db.get("ID_FS_VERSION"),
        ));
    }
    if let Some(scheme) = db.get("ID_PART_TABLE_TYPE") {
        found.push(Signature::PartitionTable {
            scheme: scheme.to_string(),
        });
    }
    found
}

fn pick_by_id(links: &[String]) -> Option<String> {
    let ids: Vec<&str> = links
        .iter()
        .filter_map(|l| l.strip_prefix("disk/by-id/"))
        .collect();
    // A WWN names the disk itself; the bus-specific names come next.
    ids.iter()
        .find(|l| l.starts_with("wwn-"))
        .or_else(|| {
            ids.iter()
                .find(|l| !l.starts_with("nvme-eui") && !l.contains("-part"))
        })
        .map(|l| format!("/dev/disk/by-id/{l}"))
}

fn transport(name: &str, sys: &str, db: &udev::Record) -> Option<Transport> {
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
    } else if sys.contains("/end_device-") || sys.contains("/sas_") {
        Some(Transport::Sas)
    } else if db.get("ID_BUS") == Some("ata") {
        Some(Transport::Sata)
    } else {
        None
    }
}

fn rotational(sys: &Path, db: &udev::Record) -> (bool, RotationalSource) {
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
fn controller(sys: &Path) -> Option<Controller> {
    let dir = sys.ancestors().find(|p| {
        p.file_name()
            .is_some_and(|n| is_pci_address(&n.to_string_lossy()))
    })?;
    let hex = |file: &str| {
        read_trimmed(&dir.join(file))
            .and_then(|v| u16::from_str_radix(v.trim_start_matches("0x"), 16).ok())
    };
    let (vendor, device) = (hex("vendor")?, hex("device")?);
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

fn usb_speed(sys: &Path) -> Option<u32> {
    sys.ancestors()
        .filter(|p| p.join("idVendor").exists())
        .find_map(|p| read_trimmed(&p.join("speed")))
        .and_then(|s| s.parse::<f32>().ok())
        .map(|s| s as u32)
}

fn network_link(host: &Host) -> Option<NetworkLink> {
    let net = host.path("/sys/class/net");
    let mut best: Option<NetworkLink> = None;
    for entry in fs::read_dir(net).ok()?.flatten() {
        let dir = entry.path();
        // Virtual interfaces (lo, bridges, wireguard) have no device behind them.
        if !dir.join("device").exists() {
            continue;
        }
        let Some(mbit) = read_trimmed(&dir.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&s| s > 0)
        else {
            continue;
        };
        if best.as_ref().is_none_or(|b| (mbit as u32) > b.mbit) {
            best = Some(NetworkLink {
                interface: entry.file_name().to_string_lossy().into_owned(),
                mbit: mbit as u32,
            });
        }
    }
    best
}

/// How the running system uses block devices, from /proc.
struct SystemUse {
    /// Device numbers of the root filesystem.
    root: Vec<(u32, u32)>,
    /// (device number, source device name, mount point)
    mounts: Vec<((u32, u32), String, String)>,
    swaps: Vec<String>,
}

impl SystemUse {
    fn read(host: &Host) -> SystemUse {
        let mountinfo = fs::read_to_string(host.path("/proc/self/mountinfo")).unwrap_or_default();
        let mut mounts = Vec::new();
        let mut root = Vec::new();
        for line in mountinfo.lines() {
            // id parent major:minor root mountpoint options ... - fstype source superoptions
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(sep) = fields.iter().position(|f| *f == "-") else {
                continue;
            };
            let (Some(devnum), Some(at)) =
                (fields.get(2).and_then(|d| parse_devnum(d)), fields.get(4))
            else {
                continue;
            };
            let source = fields
                .get(sep + 2)
                .and_then(|s| s.strip_prefix("/dev/"))
                .unwrap_or_default()
                .to_string();
            let at = unescape_mount_path(at);
            if at == "/" {
                root.push(devnum);
            }
            mounts.push((devnum, source, at));
        }
        if host.root == Path::new("/") {
            // `/`'s own st_dev catches roots that mountinfo names oddly.
            if let Ok(meta) = fs::metadata("/") {
                use std::os::unix::fs::MetadataExt;
                let dev = meta.dev();
                root.push((libc::major(dev), libc::minor(dev)));
            }
        }
        let swaps = fs::read_to_string(host.path("/proc/swaps"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| {
                l.split_whitespace()
                    .next()?
                    .strip_prefix("/dev/")
                    .map(str::to_string)
            })
            .collect();
        SystemUse {
            root,
            mounts,
            swaps,
        }
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount_path(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
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
    fn unescapes_mount_points() {
        assert_eq!(unescape_mount_path("/mnt/my\\040disk"), "/mnt/my disk");
        assert_eq!(unescape_mount_path("/srv/data"), "/srv/data");
    }

    #[test]
    fn orders_names_naturally() {
        let mut names = vec!["sdaa", "sdb", "sda", "nvme0n10", "nvme0n1"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["sda", "sdb", "sdaa", "nvme0n1", "nvme0n10"]);
    }
}
