//! Disk discovery from sysfs, udev's database and /proc, under a configurable
//! root so tests run on fake trees modelled on real boards.
//!
//! Everything the planner needs to decide whether a disk may be used is
//! collected here: identity (model, serial, WWN), attachment (transport, PCI
//! controller and link), what it holds (signatures read from its first and
//! last bytes, util-linux's and udev's probes, any non-zero byte at either
//! end: see [`signature::whole_disk`]) and whether the running system uses
//! it (boot disk, mounts, holders, swap: see [`SystemUse::uses`]; disks of
//! imported ZFS pools: see [`zfs::imported_devices`]). Every
//! step that writes to a disk discovers it again just before, so this check
//! runs right before the first write as well as at planning.

use crate::machine::existing::ExistingMd;
use crate::machine::hardware;
use crate::machine::mounts::{BlockDevice, SystemUse};
use crate::machine::signature::{self, Signature};
use crate::machine::sysfs::{self, parse_devnum, read_trimmed, read_u64};
use crate::machine::udev;
use crate::machine::usb::{self, UsbBridge};
use crate::machine::zfs::{self, ZfsOnBoard};
use crate::size::Size;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

// The types a Disk's fields carry, named where callers meet the Disk; each
// lives with the code that reads it from the machine.
pub use crate::machine::hardware::{Controller, RotationalSource, Transport};
pub use crate::machine::host::{Host, kernel_name};
pub use crate::machine::mounts::InUse;

/// Whether `typed` names a disk whose kernel name, by-id path and serial
/// are these: `sdd`, `/dev/sdd`, its `/dev/disk/by-id/...` path, or its
/// serial in any case (printed on the disk's label, so a person can read
/// it off the disk they mean to erase). Nothing typed names nothing.
pub fn is_named(
    typed: &str,
    name: Option<&str>,
    by_id: Option<&str>,
    serial: Option<&str>,
) -> bool {
    let typed = typed.trim();
    !typed.is_empty()
        && (name.is_some_and(|n| typed == n || typed.strip_prefix("/dev/") == Some(n))
            || by_id == Some(typed)
            || serial.is_some_and(|s| s.eq_ignore_ascii_case(typed)))
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
    /// Whether this board can build ZFS pools, or why not.
    #[serde(default)]
    pub zfs: ZfsOnBoard,
    /// Disks failing by SMART's account (`machine::smart`), by kernel name,
    /// with why; filled by unattended setup, which the planner refuses them
    /// to unless the recipe accepts them by serial.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failing: std::collections::BTreeMap<String, String>,
    /// md arrays another machine made, found on the disks by their
    /// superblocks (`machine::existing`); filled by unattended setup, which
    /// asks mdadm, as it fills `failing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing: Vec<ExistingMd>,
    /// ZFS pools another machine made, as `zpool import` lists them
    /// (`machine::existing_pool`); filled by unattended setup when a disk
    /// carries a ZFS label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing_pools: Vec<crate::machine::existing_pool::ExistingPool>,
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
    /// The sector size the disk writes internally (`queue/physical_block_size`):
    /// 4096 on Advanced Format disks that report 512-byte logical sectors.
    /// None in plans made before discovery read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_block_size: Option<u64>,
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
    /// The USB bridge of a USB disk.
    #[serde(default)]
    pub usb: Option<UsbBridge>,
    /// A stable `/dev/disk/by-id/...` path, when udev made a unique one.
    pub by_id: Option<String>,
    /// Every `/dev/disk/by-id/...` path udev made for the whole disk:
    /// another system may have named it by one other than `by_id` (a pool
    /// made elsewhere may list the `ata-` link where nasforge takes `wwn-`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    pub partitions: Vec<Partition>,
    /// What the whole disk holds (partition table, filesystem, RAID label...).
    pub contents: Vec<Signature>,
    pub in_use: Vec<InUse>,
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

    /// Whether `typed` names this disk, the one rule for "type the disk's
    /// name to erase it": see [`is_named`].
    pub fn is_named(&self, typed: &str) -> bool {
        is_named(
            typed,
            Some(&self.name),
            self.by_id.as_deref(),
            self.serial.as_deref(),
        )
    }

    /// The larger of the logical and physical sector sizes: what a write
    /// must be aligned to and sized for to avoid read-modify-write.
    pub fn sector_size(&self) -> u64 {
        self.physical_block_size
            .unwrap_or(0)
            .max(self.logical_block_size)
    }

    /// The path steps use: stable across reboots when udev gave one, so a
    /// resumed setup finds the same disk even if sdX names moved.
    pub fn stable_path(&self) -> String {
        self.by_id.clone().unwrap_or_else(|| self.dev_path())
    }

    /// Whether `path` (a whole disk's) names this disk: its stable path or
    /// any of its by-id links.
    pub fn is_named_by(&self, path: &str) -> bool {
        self.stable_path() == path || self.links.iter().any(|l| l == path)
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
    /// "sdc (QEMU HARDDISK, serial uas-docs1)": how status and alerts name
    /// a disk, by its serial above all, since its kernel name may change.
    pub fn words(&self) -> String {
        format!(
            "{} ({}, serial {})",
            self.name,
            self.model.as_deref().unwrap_or("unknown model"),
            self.serial.as_deref().unwrap_or("unknown")
        )
    }

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

    let system = SystemUse::read(&host.root);
    let mut disks: Vec<Disk> = names
        .iter()
        .filter(|n| !VIRTUAL_PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter_map(|name| read_disk(host, &system, name))
        .collect();

    for (device, pool) in zfs::imported_devices(host) {
        if let Some(disk) = disks
            .iter_mut()
            .find(|d| d.name == device || d.partitions.iter().any(|p| p.name == device))
        {
            disk.in_use.push(InUse::ZfsPool { device, pool });
        }
    }
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
        zfs: zfs::on_board(host),
        failing: Default::default(),
        existing: Vec::new(),
        existing_pools: Vec::new(),
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
    let found = partition_dirs(&sys);

    let mut in_use = Vec::new();
    if name.starts_with("mmcblk") && name.contains("boot") {
        in_use.push(InUse::EmmcBootArea);
    }
    let whole = BlockDevice {
        name,
        devnum: (major, minor),
        sys: &sys,
    };
    let devices: Vec<BlockDevice> = std::iter::once(whole)
        .chain(found.iter().map(FoundPartition::device))
        .collect();
    in_use.extend(system.uses(&devices));

    let node = host.dev.join(name);
    let contents = match signature::whole_disk(&node, udev_contents(&db)) {
        Ok(found) => found.into_iter().map(Signature::printable).collect(),
        Err(error) => {
            in_use.push(InUse::Unreadable { error });
            Vec::new()
        }
    };
    let mut partitions = probe_partitions(&node, &udev_data, found);
    for p in &mut partitions {
        p.contents = std::mem::take(&mut p.contents)
            .into_iter()
            .map(Signature::printable)
            .collect();
    }

    let transport = hardware::transport(name, &sys, &db);
    let (rotational, rotational_from) = hardware::rotational(&sys, &db);
    let (model, serial, wwn) = hardware::names(&sys, &db);
    let printable = |s: Option<String>| s.map(|s| super::printable(&s));
    let (model, serial, wwn) = (printable(model), printable(serial), printable(wwn));
    Some(Disk {
        name: name.to_string(),
        major,
        minor,
        size: Size(sectors * 512),
        logical_block_size: read_u64(&sys.join("queue/logical_block_size")).unwrap_or(512),
        physical_block_size: read_u64(&sys.join("queue/physical_block_size")),
        model,
        serial,
        wwn,
        transport,
        rotational,
        rotational_from,
        removable: read_u64(&sys.join("removable")) == Some(1),
        controller: hardware::controller(&sys),
        usb_mbit: (transport == Some(Transport::Usb))
            .then(|| hardware::usb_speed(&sys))
            .flatten(),
        usb: (transport == Some(Transport::Usb))
            .then(|| usb::bridge(&sys))
            .flatten(),
        by_id: pick_by_id(&db.links),
        links: by_id_links(&db.links),
        partitions,
        contents,
        in_use,
    })
}

/// A partition found in the disk's sysfs directory, not yet probed.
struct FoundPartition {
    partition: Partition,
    devnum: (u32, u32),
    sys: PathBuf,
}

impl FoundPartition {
    fn device(&self) -> BlockDevice<'_> {
        BlockDevice {
            name: &self.partition.name,
            devnum: self.devnum,
            sys: &self.sys,
        }
    }
}

/// The partitions under a disk's sysfs directory, in name order.
fn partition_dirs(sys: &Path) -> Vec<FoundPartition> {
    let Ok(children) = fs::read_dir(sys) else {
        return Vec::new();
    };
    let mut children: Vec<PathBuf> = children
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("partition").exists())
        .collect();
    children.sort();
    children
        .into_iter()
        .filter_map(|child| {
            let devnum = fs::read_to_string(child.join("dev"))
                .ok()
                .as_deref()
                .and_then(parse_devnum)?;
            let partition = Partition {
                number: read_u64(&child.join("partition")).unwrap_or(0) as u32,
                start: read_u64(&child.join("start")).unwrap_or(0) * 512,
                size: Size(read_u64(&child.join("size")).unwrap_or(0) * 512),
                name: sysfs::name_of(&child),
                contents: Vec::new(),
            };
            Some(FoundPartition {
                partition,
                devnum,
                sys: child,
            })
        })
        .collect()
}

/// What each partition holds, read at its own offset on the disk `node`,
/// else what udev's probe recorded; sorted by partition number.
fn probe_partitions(node: &Path, udev_data: &Path, found: Vec<FoundPartition>) -> Vec<Partition> {
    let mut partitions: Vec<Partition> = found
        .into_iter()
        .map(|f| {
            let mut part = f.partition;
            if let Ok(found) = signature::read(node, part.start, Some(part.size.0)) {
                part.contents = found;
            }
            let pdb = udev::Record::read(udev_data, f.devnum.0, f.devnum.1);
            if part.contents.is_empty()
                && let Some(fstype) = pdb.get("ID_FS_TYPE")
            {
                part.contents.push(Signature::Filesystem {
                    fstype: fstype.to_string(),
                    label: pdb.decoded("ID_FS_LABEL_ENC"),
                    uuid: pdb.get("ID_FS_UUID").map(str::to_string),
                });
            }
            part
        })
        .collect();
    partitions.sort_by_key(|p| p.number);
    partitions
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

fn by_id_links(links: &[String]) -> Vec<String> {
    links
        .iter()
        .filter(|l| l.starts_with("disk/by-id/") && !l.contains("-part"))
        .map(|l| format!("/dev/{l}"))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_is_named_by_kernel_name_dev_path_by_id_or_serial_and_nothing_else() {
        let by_id = "/dev/disk/by-id/ata-WDC_WD40EFRX_WD-WCC7K0000003";
        let named =
            |typed: &str| is_named(typed, Some("sdd"), Some(by_id), Some("WD-WCC7K0000003"));
        for typed in ["sdd", "/dev/sdd", by_id, "wd-wcc7k0000003", " sdd "] {
            assert!(named(typed), "{typed}");
        }
        for typed in ["", "  ", "sd", "/dev/sdd1", "dev/sdd", "WD-WCC7K", "sde"] {
            assert!(!named(typed), "{typed}");
        }
        assert!(
            !is_named("", None, None, Some("")),
            "a missing disk with no serial is named by nothing"
        );
    }

    #[test]
    fn orders_names_naturally() {
        let mut names = vec!["sdaa", "sdb", "sda", "nvme0n10", "nvme0n1"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["sda", "sdb", "sdaa", "nvme0n1", "nvme0n10"]);
    }
}
