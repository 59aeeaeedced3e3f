//! Which block devices may be flashed, from sysfs and /proc: identity
//! (model, transport, size), what each holds (signatures read from its first
//! and last bytes by `nasforge_setup::signature`, the same probe the on-board
//! setup trusts) and whether the running system uses it. A target is refused
//! for a reason the user can read, with the flag that overrides it when one
//! exists.

use nasforge_setup::signature::{self, Signature};
use nasforge_setup::sysfs::{parse_devnum, read_trimmed, read_u64};
use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
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
    pub transport: String,
    pub removable: bool,
    pub read_only: bool,
    /// What the disk and its partitions hold: (kernel name, signature).
    pub contents: Vec<(String, Signature)>,
    /// Why the first bytes could not be read, when they could not.
    pub unreadable: Option<String>,
    pub partitions: Vec<String>,
    pub in_use: Vec<InUse>,
}

/// How the running system uses a disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InUse {
    /// It holds `/` (directly, or under an md / dm device).
    System,
    Mounted {
        device: String,
        at: String,
    },
    /// An md, dm (LVM, LUKS) or bcache device is built on it.
    Held {
        device: String,
        by: String,
    },
    Swap {
        device: String,
    },
}

impl fmt::Display for InUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InUse::System => f.write_str("it holds the running system's root filesystem"),
            InUse::Mounted { device, at } => write!(f, "{device} is mounted at {at}"),
            InUse::Held { device, by } => write!(f, "{device} is in use by {by}"),
            InUse::Swap { device } => write!(f, "{device} is active swap"),
        }
    }
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
}

impl Refusal {
    /// The flag that overrides this refusal, if any may.
    pub fn override_flag(&self) -> Option<&'static str> {
        match self {
            Refusal::TooLarge { .. } => Some("--force-large"),
            _ => None,
        }
    }

    /// "is larger than ... (pass --force-large ...)"
    pub fn explain(&self) -> String {
        match self {
            Refusal::InUse(InUse::System) => "it holds the running system's root filesystem; nasforge never writes the disk it runs from".into(),
            Refusal::InUse(u @ InUse::Mounted { .. }) => format!("{u}; unmount it first (everything on the disk will be lost)"),
            Refusal::InUse(u @ InUse::Held { .. }) => format!("{u}; stop that device first (mdadm --stop, dmsetup remove, vgchange -an)"),
            Refusal::InUse(u @ InUse::Swap { .. }) => format!("{u}; swapoff it first"),
            Refusal::TooLarge { size, max } => format!(
                "it is {}, larger than --max-size {}: SD cards and eMMC are smaller, so this looks like a data disk; pass --force-large if it really is the target",
                both_units(*size),
                both_units(*max)
            ),
            Refusal::ReadOnly => "it is read-only (an SD card's lock switch, or the kernel marked it so)".into(),
            Refusal::Partition { disk } => format!("it is a partition; an image is written to the whole disk: name /dev/{disk}"),
            Refusal::NotADisk { kind } => format!("it is {kind}, not a disk; name the card itself (see nasforge flash --list)"),
        }
    }
}

impl Device {
    /// "SanDisk Ultra, 31.9 GB (29.7 GiB), usb"
    pub fn summary(&self) -> String {
        let model = self.model.as_deref().unwrap_or("unknown model");
        format!("{model}, {}, {}", both_units(self.size), self.transport)
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

    /// Everything that stops this disk being written, given the size limit
    /// and whether the user forced a large one.
    pub fn refusals(&self, max_size: u64, force_large: bool) -> Vec<Refusal> {
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

/// The sysfs directory of a device number (canonical, under /sys/devices).
fn sysfs_of(devnum: (u32, u32)) -> Option<PathBuf> {
    fs::canonicalize(format!("/sys/dev/block/{}:{}", devnum.0, devnum.1)).ok()
}

fn name_of(sys: &Path) -> String {
    sys.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The whole disks a device number rests on: a partition's parent disk, and
/// for md/dm devices (root on LVM, LUKS or RAID) every disk under them.
fn disks_under(devnum: (u32, u32)) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Some(sys) = sysfs_of(devnum) {
        walk_down(&sys, &mut out, 0);
    }
    out
}

fn walk_down(sys: &Path, out: &mut BTreeSet<String>, depth: u32) {
    let disk = if sys.join("partition").exists() {
        sys.parent().map(Path::to_path_buf)
    } else {
        Some(sys.to_path_buf())
    };
    let Some(disk) = disk else { return };
    let slaves: Vec<PathBuf> = fs::read_dir(disk.join("slaves"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    if slaves.is_empty() || depth > 8 {
        out.insert(name_of(&disk));
        return;
    }
    for s in slaves {
        if let Ok(s) = fs::canonicalize(&s) {
            walk_down(&s, out, depth + 1);
        }
    }
}

/// How the running system uses block devices, read once.
pub struct SystemUse {
    /// Whole disks holding `/`.
    system_disks: BTreeSet<String>,
    /// (device number, source path, mount point)
    mounts: Vec<((u32, u32), String, String)>,
    swaps: Vec<String>,
}

impl SystemUse {
    pub fn read() -> SystemUse {
        let mut system_disks = BTreeSet::new();
        // `/`'s st_dev names the device directly; for filesystems that report
        // an anonymous device (btrfs, overlay), mountinfo's source is used too.
        if let Ok(meta) = fs::metadata("/") {
            let dev = meta.dev();
            system_disks.extend(disks_under((libc::major(dev), libc::minor(dev))));
        }
        let mut mounts = Vec::new();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
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
            let source = fields.get(sep + 2).map(|s| unescape(s)).unwrap_or_default();
            let at = unescape(at);
            if at == "/" {
                system_disks.extend(disks_under(devnum));
                if let Some(rdev) = block_rdev(Path::new(&source)) {
                    system_disks.extend(disks_under(rdev));
                }
            }
            mounts.push((devnum, source, at));
        }
        let swaps = fs::read_to_string("/proc/swaps")
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        SystemUse {
            system_disks,
            mounts,
            swaps,
        }
    }
}

fn block_rdev(path: &Path) -> Option<(u32, u32)> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type()
        .is_block_device()
        .then(|| (libc::major(meta.rdev()), libc::minor(meta.rdev())))
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap(), 8)
                    .unwrap_or(b'?'),
            );
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

fn model(sys: &Path) -> Option<String> {
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

/// Reads one whole disk by its sysfs directory.
fn read_device(sys: &Path, system: &SystemUse) -> Option<Device> {
    let name = name_of(sys);
    let sectors = read_u64(&sys.join("size"))?;
    let (major, minor) = parse_devnum(&fs::read_to_string(sys.join("dev")).ok()?)?;
    let path = PathBuf::from("/dev").join(&name);
    // (name, device number, sysfs dir, start, size) of each partition
    type Part = (String, (u32, u32), PathBuf, u64, u64);
    let mut parts: Vec<Part> = fs::read_dir(sys)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("partition").exists())
                .filter_map(|p| {
                    let dev = parse_devnum(&fs::read_to_string(p.join("dev")).ok()?)?;
                    let start = read_u64(&p.join("start")).unwrap_or(0) * 512;
                    let size = read_u64(&p.join("size")).unwrap_or(0) * 512;
                    Some((name_of(&p), dev, p, start, size))
                })
                .collect()
        })
        .unwrap_or_default();
    parts.sort_by_key(|p| p.3);

    let mut in_use = Vec::new();
    if system.system_disks.contains(&name) {
        in_use.push(InUse::System);
    }
    let mut members: Vec<(String, (u32, u32), PathBuf)> =
        vec![(name.clone(), (major, minor), sys.to_path_buf())];
    members.extend(parts.iter().map(|p| (p.0.clone(), p.1, p.2.clone())));
    for (dev_name, devnum, dir) in &members {
        let dev_path = format!("/dev/{dev_name}");
        for (_, _, at) in system
            .mounts
            .iter()
            .filter(|m| m.0 == *devnum || m.1 == dev_path)
        {
            in_use.push(InUse::Mounted {
                device: dev_path.clone(),
                at: at.clone(),
            });
        }
        let mut holders: Vec<String> = fs::read_dir(dir.join("holders"))
            .map(|d| d.flatten().map(|e| name_of(&e.path())).collect())
            .unwrap_or_default();
        holders.sort();
        for by in holders {
            in_use.push(InUse::Held {
                device: dev_path.clone(),
                by,
            });
        }
        if system.swaps.contains(&dev_path) {
            in_use.push(InUse::Swap {
                device: dev_path.clone(),
            });
        }
    }
    in_use.dedup();

    let size = sectors * 512;
    let mut contents = Vec::new();
    let mut unreadable = None;
    if size > 0 {
        match signature::read(&path, 0, Some(size)) {
            Ok(found) => contents.extend(found.into_iter().map(|s| (name.clone(), s))),
            Err(e) => unreadable = Some(e.to_string()),
        }
        for (pname, _, _, start, psize) in &parts {
            if *psize > 0
                && start + psize <= size
                && let Ok(found) = signature::read(&path, *start, Some(*psize))
            {
                contents.extend(found.into_iter().map(|s| (pname.clone(), s)));
            }
        }
    }
    let sys_text = sys.to_string_lossy();
    Some(Device {
        transport: transport(&name, &sys_text),
        model: model(sys),
        removable: read_u64(&sys.join("removable")) == Some(1),
        read_only: read_u64(&sys.join("ro")) == Some(1),
        partitions: parts.into_iter().map(|p| p.0).collect(),
        name,
        path,
        major,
        minor,
        size,
        contents,
        unreadable,
        in_use,
    })
}

/// Every whole disk with media (empty card-reader slots and unbound loop
/// devices report size 0 and are left out), in name order.
pub fn all() -> Vec<Device> {
    let system = SystemUse::read();
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
        .collect()
}

/// What a named target is.
pub enum Target {
    Disk(Device),
    /// A regular file (existing or to be created), written dd-style.
    File(PathBuf),
}

/// Resolves what the user named (`/dev/sdb`, a `/dev/disk/by-id/...` link,
/// or a file path). A partition, a character device or a missing path under
/// /dev is an error, never a file to create.
pub fn resolve(named: &Path) -> Result<Target, String> {
    let shown = named.display();
    match fs::metadata(named) {
        Ok(meta) if meta.file_type().is_block_device() => {
            let devnum = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
            let sys = sysfs_of(devnum).ok_or_else(|| {
                format!(
                    "{shown}: block device {}:{} is not in /sys/dev/block",
                    devnum.0, devnum.1
                )
            })?;
            if sys.join("partition").exists() {
                let disk = sys.parent().map(name_of).unwrap_or_default();
                return Err(format!(
                    "refusing to write {shown}: {}",
                    Refusal::Partition { disk }.explain()
                ));
            }
            let system = SystemUse::read();
            read_device(&sys, &system)
                .ok_or_else(|| format!("{shown}: cannot read its size from {}", sys.display()))
                .map(Target::Disk)
        }
        Ok(meta) if meta.is_file() => Ok(Target::File(named.to_path_buf())),
        Ok(meta) if meta.is_dir() => Err(format!(
            "{shown} is a directory; name a disk such as /dev/sdX (see nasforge flash --list) or an image file to write"
        )),
        Ok(_) => Err(format!(
            "{shown} is neither a block device nor a regular file"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if named.starts_with("/dev") {
                Err(format!(
                    "{shown} does not exist; is the card inserted? `nasforge flash --list` shows the disks there are"
                ))
            } else {
                Ok(Target::File(named.to_path_buf()))
            }
        }
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mount_points() {
        assert_eq!(unescape("/media/me/my\\040card"), "/media/me/my card");
        assert_eq!(unescape("/srv\\"), "/srv\\");
    }

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

    #[test]
    fn the_root_disk_is_found() {
        // Whatever this machine boots from, `/` rests on at least one disk.
        let system = SystemUse::read();
        let meta = fs::metadata("/").unwrap();
        if libc::major(meta.dev()) != 0 {
            assert!(!system.system_disks.is_empty());
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
        assert_eq!(Refusal::InUse(InUse::System).override_flag(), None);
    }
}
