//! ZFS pools: the `zpool create` and `zfs` command lines, the datasets that
//! hold the shares, and the units that import, mount and scrub the pools.
//! Every property named here exists in OpenZFS 2.1 (Debian bookworm), the
//! oldest release the image stages.

use crate::machine::disks::Disk;
use crate::planner::{ArrayPlan, Plan};
use crate::size::Size;
use crate::spec::{Level, Share};

/// Where the pools are recorded for `zfs-import-cache.service`, which
/// imports them at boot from this file alone (no scan of every disk).
pub const CACHEFILE: &str = "/etc/zfs/zpool.cache";

/// What imports and mounts the pools at boot (Debian's zfsutils-linux).
/// zfs-import-scan.service is left as the package has it: with a cache
/// file it would only import the same pools a second way.
pub const BOOT_UNITS: [&str; 4] = [
    "zfs-import-cache.service",
    "zfs-mount.service",
    "zfs-import.target",
    "zfs.target",
];

pub const ZED_SERVICE: &str = "zfs-zed.service";

/// zfsutils-linux's monthly scrub of one pool (zfs-scrub@.service).
pub fn scrub_timer(pool: &str) -> String {
    format!("zfs-scrub-monthly@{pool}.timer")
}

/// The members in vdev order: the active disks in plan order, cut into
/// `vdevs` groups of equal width (the hot spares are in none).
pub fn vdevs(array: &ArrayPlan) -> Vec<Vec<&Disk>> {
    array
        .groups()
        .into_iter()
        .map(|g| g.into_iter().map(|m| &m.disk).collect())
        .collect()
}

/// `zpool create` for a pool. Whole disks by their stable path: zpool
/// partitions each itself (data in part1, 8 MiB reserved in part9) and
/// records the path, so the pool is found under the same names after the
/// kernel renumbers the disks.
pub fn create(array: &ArrayPlan) -> Vec<String> {
    let spec = &array.spec;
    let mut argv: Vec<String> = vec!["zpool".into(), "create".into()];
    // zpool refuses members whose sizes differ by more than 16 MiB unless
    // forced; the plan has warned of the space lost, and the guard has
    // checked that every member is blank or erased by this setup, which
    // is all the other checks -f skips would have found.
    if !array.equal_members() {
        argv.push("-f".into());
    }
    let mut pool_opt = |o: String| argv.extend(["-o".to_string(), o]);
    // Fixed for the life of each vdev: chosen from the disks' sectors by
    // the planner, never left to disks that may report 512 and write 4096.
    pool_opt(format!("ashift={}", array.ashift.unwrap_or(12)));
    pool_opt(format!("cachefile={CACHEFILE}"));
    // TRIM only where every member is an SSD: a spinning disk has nothing
    // to trim, and a pool that mixes them gains little.
    if array.members.iter().all(|m| !m.disk.rotational) {
        pool_opt("autotrim=on".into());
    }
    for property in DATASET_DEFAULTS {
        argv.extend(["-O".to_string(), property.to_string()]);
    }
    argv.extend(["-O".to_string(), format!("mountpoint={}", spec.mount)]);
    argv.push(spec.name.clone());
    for group in vdevs(array) {
        if let Some(kind) = spec.level.zpool_vdev() {
            argv.push(kind.to_string());
        }
        argv.extend(group.iter().map(|d| d.stable_path()));
    }
    // Hot spares belong to the pool, not to a vdev: ZED resilvers onto one
    // for a faulted disk in any of them.
    let spares: Vec<String> = array.spares().map(|m| m.disk.stable_path()).collect();
    if !spares.is_empty() {
        argv.push("spare".into());
        argv.extend(spares);
    }
    argv
}

/// Whether `zpool create` failed on a device that was there a moment
/// before: zpool partitions each whole disk, and udev's re-read of the new
/// table removes and re-adds the partitions while the kernel opens them
/// (openzfs/zfs#3708, #4077). Seen on the emulated board, whose udev
/// trails the kernel by seconds.
pub fn create_raced_udev(stderr: &str) -> bool {
    stderr.contains("one or more devices is currently unavailable")
        || stderr.contains("Device or resource busy")
}

/// `argv` of [`create`] with `-f`: a second try finds the disks
/// partitioned by the first, which zpool would otherwise call in use.
pub fn create_forced(argv: &[String]) -> Vec<String> {
    let mut forced = argv.to_vec();
    if !forced.iter().any(|a| a == "-f") {
        forced.insert(2, "-f".into());
    }
    forced
}

/// `zpool add` of new vdevs to `pool`, each of `level`'s kind over its
/// disks (by stable path), at the pool's ashift: left to zpool, a new
/// vdev's would follow what its disks report, and a 512-byte one is slow
/// for its whole life on 4 KiB disks.
pub fn add(pool: &str, level: Level, ashift: u8, groups: &[Vec<String>]) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "zpool".into(),
        "add".into(),
        "-o".into(),
        format!("ashift={ashift}"),
        pool.into(),
    ];
    for group in groups {
        if let Some(kind) = level.zpool_vdev() {
            argv.push(kind.to_string());
        }
        argv.extend(group.iter().cloned());
    }
    argv
}

/// The root dataset's properties, inherited by every share's dataset.
pub const DATASET_DEFAULTS: [&str; 5] = [
    // Costs almost no CPU even on a Pi, and gives up at once on data that
    // does not compress (photos, video).
    "compression=lz4",
    // A read writes nothing: no metadata churn for every file opened, and
    // disks that hd-idle spun down stay asleep while clients browse.
    "atime=off",
    // Extended attributes in the dnode instead of hidden directories:
    // Samba's streams_xattr and macOS metadata stay one read away.
    "xattr=sa",
    // POSIX ACLs as on ext4, which Samba maps Windows permissions onto.
    // (2.1 calls it `posix` and still takes `posixacl`, which 0.8 knows.)
    "acltype=posixacl",
    // Room in the dnode for those attributes; it needs the large_dnode
    // feature, which every pool made by 0.8 or newer has.
    "dnodesize=auto",
];

/// The dataset that holds `share` on the pool mounted at `array`'s mount:
/// `tank/media/photos` for `/srv/tank/media/photos`, and the pool's own
/// root dataset (`tank`) for a share at the pool's mount, whose quota is
/// then the root's.
pub fn dataset(array: &ArrayPlan, share: &Share) -> Option<String> {
    let path = share.path.trim_end_matches('/');
    if path == array.spec.mount.trim_end_matches('/') {
        return Some(array.spec.name.clone());
    }
    let rel = path
        .strip_prefix(array.spec.mount.as_str())?
        .strip_prefix('/')?;
    (!rel.is_empty()).then(|| format!("{}/{rel}", array.spec.name))
}

/// Each share on a pool that has a dataset of its own, with the dataset.
pub fn share_datasets(plan: &Plan) -> Vec<(&Share, String)> {
    plan.shares
        .iter()
        .filter_map(|s| {
            let array = plan.array_of(&s.path).filter(|a| a.spec.is_zfs())?;
            Some((s, dataset(array, s)?))
        })
        .collect()
}

/// `zfs create` for a share's dataset; `-p` makes the datasets above it
/// (tank/media for tank/media/photos) so each directory level of the path
/// is a dataset mounted where the path says.
pub fn create_dataset(dataset: &str, quota: Option<Size>) -> Vec<String> {
    let mut argv: Vec<String> = vec!["zfs".into(), "create".into(), "-p".into()];
    if let Some(q) = quota {
        argv.extend(["-o".to_string(), format!("quota={}", q.bytes())]);
    }
    argv.push(dataset.to_string());
    argv
}

/// `zfs set quota=...`: in bytes, as `zfs list -p` reads it back, or
/// `none`.
pub fn set_quota(dataset: &str, quota: Option<Size>) -> Vec<String> {
    vec![
        "zfs".into(),
        "set".into(),
        format!("quota={}", quota_value(quota)),
        dataset.to_string(),
    ]
}

pub fn quota_value(quota: Option<Size>) -> String {
    quota.map_or("none".to_string(), |q| q.bytes().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_written_in_bytes_as_zfs_reads_them_back() {
        assert_eq!(
            create_dataset("tank/media", Some(Size(100 << 30))),
            [
                "zfs",
                "create",
                "-p",
                "-o",
                "quota=107374182400",
                "tank/media"
            ]
        );
        assert_eq!(
            create_dataset("tank/media", None),
            ["zfs", "create", "-p", "tank/media"]
        );
        assert_eq!(
            set_quota("tank/media", None),
            ["zfs", "set", "quota=none", "tank/media"]
        );
    }

    #[test]
    fn only_a_device_gone_for_a_moment_earns_a_second_create() {
        // What zpool 2.3.9 printed on the emulated board, and what it
        // prints when the partition is still held.
        assert!(create_raced_udev(
            "cannot create 'tank': one or more devices is currently unavailable\n"
        ));
        assert!(create_raced_udev(
            "cannot open '/dev/disk/by-id/ata-QEMU_HARDDISK_zfs0-part1': Device or resource busy\n"
        ));
        for other in [
            "cannot create 'tank': pool already exists\n",
            "invalid vdev specification\nuse '-f' to override the following errors:\n/dev/sdb1 contains a filesystem of type 'ext4'\n",
            "cannot create 'tank': permission denied\n",
        ] {
            assert!(!create_raced_udev(other), "{other}");
        }
    }

    #[test]
    fn the_second_create_is_forced_once() {
        let argv: Vec<String> = [
            "zpool",
            "create",
            "-o",
            "ashift=12",
            "tank",
            "mirror",
            "/a",
            "/b",
        ]
        .map(String::from)
        .to_vec();
        let forced = create_forced(&argv);
        assert_eq!(
            forced,
            [
                "zpool",
                "create",
                "-f",
                "-o",
                "ashift=12",
                "tank",
                "mirror",
                "/a",
                "/b"
            ]
        );
        assert_eq!(create_forced(&forced), forced);
    }
}
