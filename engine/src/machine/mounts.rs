//! How the running system uses block devices: what is mounted where
//! (/proc/self/mountinfo), active swap (/proc/swaps), what md, dm or bcache
//! device is built on one (sysfs `holders`), and which devices `/` rests on.
//!
//! Read under a configurable root, so tests run on fake trees. The board's
//! disk discovery, its steps and status, and the workstation's
//! `nasforge flash` all read the machine here, so a disk the running system
//! needs is recognised by one rule wherever it is about to be written.

use crate::machine::sysfs::{self, parse_devnum};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One line of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The device number files in it report: the partition's for a disk
    /// filesystem, an anonymous one (`0:n`) for btrfs, overlay or tmpfs.
    pub devnum: (u32, u32),
    /// What was mounted: `/dev/sda1`, `tmpfs`, a server's share.
    pub source: String,
    /// The mount point.
    pub at: String,
}

/// The mount table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mounts(Vec<Mount>);

impl Mounts {
    /// `<root>/proc/self/mountinfo`; empty when it cannot be read.
    pub fn read(root: &Path) -> Mounts {
        Mounts::parse(&fs::read_to_string(root.join("proc/self/mountinfo")).unwrap_or_default())
    }

    pub fn parse(mountinfo: &str) -> Mounts {
        let mut mounts = Vec::new();
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
            mounts.push(Mount {
                devnum,
                source: fields.get(sep + 2).map(|s| unescape(s)).unwrap_or_default(),
                at: unescape(at),
            });
        }
        Mounts(mounts)
    }

    /// Whether something is mounted at `at`.
    pub fn is_mounted(&self, at: &str) -> bool {
        self.0.iter().any(|m| m.at == at)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.0.iter()
    }
}

/// mountinfo and /proc/swaps escape space, tab, newline and backslash as
/// octal (`/media/my\040disk`).
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|o| o.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(o) if b[i] == b'\\' => {
                let code = o.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(code).unwrap_or(b'?'));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why the running system needs a disk: such a disk is never written,
/// whatever the recipe or the command line says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InUse {
    /// It holds the root filesystem (directly, or under an md / dm device).
    Boot,
    /// An eMMC boot area (`mmcblk*boot*`): firmware lives there.
    EmmcBootArea,
    /// `device` is a kernel name (`sdb1`), here and below.
    Mounted {
        device: String,
        at: String,
    },
    /// Another block device (md, dm for LVM or LUKS, bcache) is built on it.
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
    /// A disk of an imported ZFS pool: ZFS holds it open, but lists it
    /// neither in `holders` nor in mountinfo.
    ZfsPool {
        device: String,
        pool: String,
    },
}

impl InUse {
    /// The same reason with devices named by their path (`/dev/sdb1`), as
    /// a user types them on a workstation.
    pub fn by_path(&self) -> impl fmt::Display + '_ {
        ByPath(self)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, dev: &str) -> fmt::Result {
        match self {
            InUse::Boot => f.write_str("it holds the running system's root filesystem"),
            InUse::EmmcBootArea => f.write_str("it is an eMMC boot area"),
            InUse::Mounted { device, at } => write!(f, "{dev}{device} is mounted at {at}"),
            InUse::Held { device, by } => write!(f, "{dev}{device} is in use by {by}"),
            InUse::Swap { device } => write!(f, "{dev}{device} is active swap"),
            InUse::Unreadable { error } => write!(f, "its contents cannot be read ({error})"),
            InUse::ZfsPool { device, pool } => {
                write!(
                    f,
                    "{dev}{device} is a disk of the imported ZFS pool '{pool}'"
                )
            }
        }
    }
}

/// "sdb1 is mounted at /srv": devices by kernel name, as discovery lists them.
impl fmt::Display for InUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "")
    }
}

struct ByPath<'a>(&'a InUse);

impl fmt::Display for ByPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, "/dev/")
    }
}

/// A block device of a disk, as the gate looks at it: the disk itself or
/// one of its partitions.
#[derive(Debug, Clone, Copy)]
pub struct BlockDevice<'a> {
    /// Kernel name: `sdb`, `sdb1`.
    pub name: &'a str,
    pub devnum: (u32, u32),
    /// Its sysfs directory, where `holders` lists what is built on it.
    pub sys: &'a Path,
}

/// How the running system uses block devices, read once and asked about
/// each disk.
#[derive(Debug, Default)]
pub struct SystemUse {
    mounts: Mounts,
    /// Active swap areas: `/dev/sda3`, or a swap file's path.
    swaps: Vec<String>,
    /// Device numbers of the filesystem mounted at `/`.
    root: Vec<(u32, u32)>,
    /// Kernel names of the devices at the bottom of what `/` rests on: its
    /// partition, or the members under an md / dm root.
    under_root: BTreeSet<String>,
}

impl SystemUse {
    /// Reads `<root>/proc` and `<root>/sys`. On the live system (`root` is
    /// `/`) the root filesystem is also found from `/`'s own st_dev and its
    /// mount's source device, which catch roots mountinfo names oddly
    /// (btrfs and overlay report an anonymous device number).
    pub fn read(root: &Path) -> SystemUse {
        let mounts = Mounts::read(root);
        let mut root_devnums: Vec<(u32, u32)> = Vec::new();
        for m in mounts.iter().filter(|m| m.at == "/") {
            root_devnums.push(m.devnum);
            if root == Path::new("/") {
                root_devnums.extend(block_rdev(Path::new(&m.source)));
            }
        }
        if root == Path::new("/")
            && let Ok(meta) = fs::metadata("/")
        {
            root_devnums.push((libc::major(meta.dev()), libc::minor(meta.dev())));
        }
        let mut under_root = BTreeSet::new();
        for devnum in &root_devnums {
            if let Some(sys) = sysfs::block_dir(root, *devnum) {
                walk_down(&sys, &mut under_root, 0);
            }
        }
        let swaps = fs::read_to_string(root.join("proc/swaps"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(unescape))
            .collect();
        SystemUse {
            mounts,
            swaps,
            root: root_devnums,
            under_root,
        }
    }

    /// Why the running system needs the disk made of `devices` (the disk,
    /// then its partitions), device by device: the root filesystem, mounts,
    /// holders (sorted) and swap.
    pub fn uses(&self, devices: &[BlockDevice<'_>]) -> Vec<InUse> {
        let mut out = Vec::new();
        for dev in devices {
            let path = format!("/dev/{}", dev.name);
            let device = || dev.name.to_string();
            if self.root.contains(&dev.devnum) || self.under_root.contains(dev.name) {
                out.push(InUse::Boot);
            }
            for m in self
                .mounts
                .iter()
                .filter(|m| m.devnum == dev.devnum || m.source == path)
            {
                out.push(InUse::Mounted {
                    device: device(),
                    at: m.at.clone(),
                });
            }
            for by in holders(dev.sys) {
                out.push(InUse::Held {
                    device: device(),
                    by,
                });
            }
            if self.swaps.contains(&path) {
                out.push(InUse::Swap { device: device() });
            }
        }
        out.dedup();
        out
    }
}

/// What is built on a device (`md127`, `dm-0`), sorted; `sys` is its
/// sysfs directory.
pub fn holders(sys: &Path) -> Vec<String> {
    let mut by: Vec<String> = fs::read_dir(sys.join("holders"))
        .map(|d| {
            d.flatten()
                .map(|h| h.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    by.sort();
    by
}

/// Collects the devices at the bottom of the stack `sys` heads: a device
/// nothing is under (a disk or partition) names itself; an md or dm device
/// (or a partition of one) leads on to its `slaves`.
fn walk_down(sys: &Path, out: &mut BTreeSet<String>, depth: u32) {
    let whole = if sys.join("partition").exists() {
        sys.parent().map(Path::to_path_buf)
    } else {
        Some(sys.to_path_buf())
    };
    let Some(whole) = whole else { return };
    let slaves: Vec<PathBuf> = fs::read_dir(whole.join("slaves"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    if slaves.is_empty() || depth > 8 {
        out.insert(sysfs::name_of(sys));
        return;
    }
    for s in slaves {
        if let Ok(s) = fs::canonicalize(&s) {
            walk_down(&s, out, depth + 1);
        }
    }
}

/// The device number of the block device node at `path`, if it is one.
fn block_rdev(path: &Path) -> Option<(u32, u32)> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type()
        .is_block_device()
        .then(|| (libc::major(meta.rdev()), libc::minor(meta.rdev())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mount_points() {
        assert_eq!(unescape("/mnt/my\\040disk"), "/mnt/my disk");
        assert_eq!(unescape("/media/me/my\\040card"), "/media/me/my card");
        assert_eq!(unescape("/srv/data"), "/srv/data");
        assert_eq!(unescape("/srv\\"), "/srv\\");
        assert_eq!(unescape("/a\\134b\\011c"), "/a\\b\tc");
    }

    #[test]
    fn the_root_disk_is_found() {
        // Whatever this machine boots from, `/` rests on at least one disk.
        let system = SystemUse::read(Path::new("/"));
        let meta = fs::metadata("/").unwrap();
        if libc::major(meta.dev()) != 0 {
            assert!(!system.under_root.is_empty());
        }
    }

    const MOUNTINFO: &str = "\
22 1 179:2 / / rw,noatime shared:1 - ext4 /dev/mmcblk0p2 rw
23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw
30 22 179:1 / /boot/firmware rw,relatime shared:20 - vfat /dev/mmcblk0p1 rw
41 22 8:17 / /media/my\\040disk rw,relatime shared:30 - ext4 /dev/sdb1 rw
not a mountinfo line
";

    #[test]
    fn an_escaped_mount_point_is_mounted_under_its_real_name() {
        let mounts = Mounts::parse(MOUNTINFO);
        assert!(mounts.is_mounted("/media/my disk"));
        assert!(!mounts.is_mounted("/media/my\\040disk"));
        assert!(mounts.is_mounted("/boot/firmware"));
        assert!(!mounts.is_mounted("/srv/data"));
        assert_eq!(mounts.iter().count(), 4);
    }

    #[test]
    fn mounts_are_read_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("proc/self")).unwrap();
        fs::write(root.path().join("proc/self/mountinfo"), MOUNTINFO).unwrap();
        let mounts = Mounts::read(root.path());
        assert!(mounts.is_mounted("/media/my disk"));
        assert!(
            Mounts::read(&root.path().join("missing"))
                .iter()
                .next()
                .is_none()
        );
    }

    /// A fake root: mountinfo, swaps, and sysfs directories for sdb and
    /// its partitions, sdb2 held by md127.
    fn fake_root() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("proc/self")).unwrap();
        fs::write(root.path().join("proc/self/mountinfo"), MOUNTINFO).unwrap();
        fs::write(
            root.path().join("proc/swaps"),
            "Filename\tType\tSize\tUsed\tPriority\n/dev/sdb3 partition 1048572 0 -2\n/swap\\040file file 1024 0 -3\n",
        )
        .unwrap();
        let sdb = root.path().join("sys/block/sdb");
        fs::create_dir_all(sdb.join("sdb2/holders/md127")).unwrap();
        (root, sdb)
    }

    #[test]
    fn a_disk_is_in_use_for_each_mount_holder_and_swap_of_its_devices() {
        let (root, sdb) = fake_root();
        let system = SystemUse::read(root.path());
        let (p1, p2, p3) = (sdb.join("sdb1"), sdb.join("sdb2"), sdb.join("sdb3"));
        let devices = [
            BlockDevice {
                name: "sdb",
                devnum: (8, 16),
                sys: &sdb,
            },
            BlockDevice {
                name: "sdb1",
                devnum: (8, 17),
                sys: &p1,
            },
            BlockDevice {
                name: "sdb2",
                devnum: (8, 18),
                sys: &p2,
            },
            BlockDevice {
                name: "sdb3",
                devnum: (8, 19),
                sys: &p3,
            },
        ];
        let uses = system.uses(&devices);
        assert_eq!(
            uses,
            [
                InUse::Mounted {
                    device: "sdb1".into(),
                    at: "/media/my disk".into()
                },
                InUse::Held {
                    device: "sdb2".into(),
                    by: "md127".into()
                },
                InUse::Swap {
                    device: "sdb3".into()
                },
            ]
        );
        assert_eq!(uses[0].to_string(), "sdb1 is mounted at /media/my disk");
        assert_eq!(
            uses[1].by_path().to_string(),
            "/dev/sdb2 is in use by md127"
        );
        assert_eq!(system.swaps, ["/dev/sdb3", "/swap file"]);
    }

    #[test]
    fn the_disk_under_the_root_mount_holds_the_system() {
        let (root, _) = fake_root();
        let system = SystemUse::read(root.path());
        let sys = root.path().join("sys/block/mmcblk0");
        let p2 = sys.join("mmcblk0p2");
        let uses = system.uses(&[
            BlockDevice {
                name: "mmcblk0",
                devnum: (179, 0),
                sys: &sys,
            },
            BlockDevice {
                name: "mmcblk0p2",
                devnum: (179, 2),
                sys: &p2,
            },
        ]);
        assert_eq!(
            uses,
            [
                InUse::Boot,
                InUse::Mounted {
                    device: "mmcblk0p2".into(),
                    at: "/".into()
                }
            ]
        );
        assert_eq!(
            InUse::Boot.by_path().to_string(),
            "it holds the running system's root filesystem"
        );
    }

    #[test]
    fn the_root_is_found_through_md_and_dm_devices() {
        // `/` on dm-0, a LUKS or LVM volume on md0, a mirror of sda2 and sdb2.
        let root = tempfile::tempdir().unwrap();
        let devices = root.path().join("sys/devices");
        let virt = devices.join("virtual/block");
        for (dir, slaves) in [
            (virt.join("dm-0"), vec!["md0"]),
            (virt.join("md0"), vec!["sda2", "sdb2"]),
        ] {
            fs::create_dir_all(dir.join("slaves")).unwrap();
            for s in slaves {
                let target = match s {
                    "md0" => virt.join("md0"),
                    p => devices.join(&p[..3]).join(p),
                };
                fs::create_dir_all(&target).unwrap();
                std::os::unix::fs::symlink(&target, dir.join("slaves").join(s)).unwrap();
            }
        }
        for p in ["sda/sda2", "sdb/sdb2"] {
            fs::write(devices.join(p).join("partition"), "2\n").unwrap();
        }
        fs::create_dir_all(root.path().join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(virt.join("dm-0"), root.path().join("sys/dev/block/253:0"))
            .unwrap();
        fs::create_dir_all(root.path().join("proc/self")).unwrap();
        fs::write(
            root.path().join("proc/self/mountinfo"),
            "22 1 253:0 / / rw shared:1 - ext4 /dev/mapper/root rw\n",
        )
        .unwrap();
        let system = SystemUse::read(root.path());
        assert_eq!(
            system.under_root.iter().collect::<Vec<_>>(),
            ["sda2", "sdb2"]
        );
    }
}
