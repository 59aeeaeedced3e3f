//! A ZFS pool on the emulated board, sharing the boots of the main scenario:
//! three blank SATA disks of the md members' size become a raidz1 `tank`
//! with two shares as datasets (one with a quota), from modules nasforge
//! built on this machine for the board's kernel and staged in the image.
//! Checked as a user would: the module's version against the tools', an SMB
//! round trip, the pool back after a reboot, a scrub, and a boot with a
//! member missing (DEGRADED, file intact, status says so). Beside the md
//! raid5 of the same disks, the same 64 MiB over SMB is timed both ways.
//! In that boot, `nasforge-setup replace` puts a blank disk in the lost
//! member's place (`zpool replace`, the resilver followed).

use super::{Board, clean_scrub, smbclient, sudo};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

const GIB: u64 = 1 << 30;

/// The recipe's pool and its shares (after the md arrays).
pub fn recipe_tables() -> &'static str {
    r#"[[storage.arrays]]
name = "tank"
level = "raidz1"
# The three disks whose serials (their file names) start with zfs.
disks = { transport = "sata", serial = "zfs*", count = 3 }
filesystem = "zfs"
mount = "/srv/tank"
[[shares]]
name = "projects"
path = "/srv/tank/projects"
quota = "512MiB"
smb = { users = ["admin"] }
[[shares]]
name = "archive"
path = "/srv/tank/archive"
smb = { users = ["admin"] }
nfs = { clients = "10.0.2.0/24" }
"#
}

/// A blank 2 GiB disk for the degraded boot, to replace the lost member:
/// on USB, as the six SATA ports are taken.
pub fn spare(dir: &Path) -> PathBuf {
    let p = dir.join("usb-tankspare.img");
    std::fs::File::create(&p).unwrap().set_len(2 * GIB).unwrap();
    p
}

/// The pool's three 2 GiB disks, as big as the md array's members.
pub fn disks(dir: &Path) -> Vec<PathBuf> {
    (0..3)
        .map(|i| {
            let p = dir.join(format!("zfs{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(2 * GIB).unwrap();
            p
        })
        .collect()
}

/// Puts `payload` on `share` and gets it back: the seconds each way and
/// the sha256 of what came back.
fn timed_roundtrip(board: &Board, dir: &Path, share: &str, payload: &Path) -> (f64, f64, String) {
    let back = dir.join(format!("{share}.back"));
    let _ = std::fs::remove_file(&back);
    let t = Instant::now();
    let put = smbclient(
        board,
        share,
        &format!("put {} payload.bin", payload.display()),
    );
    let write = t.elapsed().as_secs_f64();
    assert!(put.status.success(), "put to {share}:\n{}", printed(&put));
    let t = Instant::now();
    let get = smbclient(board, share, &format!("get payload.bin {}", back.display()));
    let read = t.elapsed().as_secs_f64();
    assert!(get.status.success(), "get from {share}:\n{}", printed(&get));
    (write, read, sha256_file(&back))
}

/// After setup: the staged modules are the tools' version, the pool is
/// ONLINE over stable disk ids with the chosen properties, the datasets
/// carry the shares and the quota, a 64 MiB round trip keeps its sha256,
/// and its speed beside the md raid5's.
pub fn check_after_setup(board: &Board, key: &Path, dir: &Path, payload: &Path, want: &str) {
    let version = sudo(board, key, "modinfo -F version zfs");
    let version = version.trim().to_string();
    let tools = sudo(board, key, "zpool version");
    assert!(
        !version.is_empty()
            && tools.contains(&format!("zfs-{version}"))
            && tools.contains(&format!("zfs-kmod-{version}")),
        "modinfo zfs says {version:?}; zpool version:\n{tools}"
    );
    eprintln!(
        "e2e: zfs module {version}; zpool version: {}",
        tools.trim().replace('\n', ", ")
    );
    // trixie's zfsutils-linux 2.3.9, as bookworm's 2.1.11 on the PC: its
    // 50-zfs.preset disables the scan, and deb-systemd-helper enables a
    // unit on its first install through `systemctl preset`. Enabled, its
    // `zpool import -a` would take an old NAS's exported pool at boot.
    let units = sudo(
        board,
        key,
        "systemctl is-enabled zfs-import-scan.service zfs-import-cache.service; true",
    );
    assert!(
        units.trim_start().starts_with("disabled\nenabled"),
        "zfs-import-scan.service enabled, or zfs-import-cache.service not: {units}"
    );
    let status = sudo(board, key, "zpool status -P tank");
    assert!(
        status.contains("state: ONLINE")
            && status.contains("raidz1-0")
            && (0..3)
                .all(|i| status.contains(&format!("/dev/disk/by-id/ata-QEMU_HARDDISK_zfs{i}"))),
        "{status}"
    );
    let props = sudo(
        board,
        key,
        "zpool get -H -o value ashift tank; zfs get -H -o property,value compression,atime,xattr,acltype tank; zfs get -H -o name,value quota,mountpoint tank/projects tank/archive",
    );
    // OpenZFS 2.3 made system-attribute xattrs what `on` means, and reports
    // the `sa` nasforge sets as `on`: module/zcommon/zfs_prop.c of 2.3.9
    // lists { "on", ZFS_XATTR_SA } before { "sa", ZFS_XATTR_SA }. 2.1
    // (bookworm) says sa.
    let sa_is_on = version
        .split(['.', '-'])
        .take(2)
        .map(|n| n.parse::<u32>().unwrap_or(0))
        .collect::<Vec<_>>()
        >= vec![2, 3];
    let xattr = if sa_is_on { "xattr\ton" } else { "xattr\tsa" };
    for want_line in [
        "compression\tlz4",
        "atime\toff",
        xattr,
        "acltype\tposix",
        "tank/projects\t512M",
        "tank/projects\t/srv/tank/projects",
        "tank/archive\t/srv/tank/archive",
    ] {
        assert!(props.contains(want_line), "`{want_line}` in:\n{props}");
    }
    assert!(
        props.lines().any(|l| l.trim() == "12"),
        "ashift 12:\n{props}"
    );
    let (zfs_write, zfs_read, got) = timed_roundtrip(board, dir, "projects", payload);
    assert_eq!(got, want, "64 MiB over SMB to the ZFS share");
    let (md_write, md_read, got) = timed_roundtrip(board, dir, "data", payload);
    assert_eq!(got, want, "64 MiB over SMB to the md share");
    eprintln!(
        "e2e: SMB 64 MiB, ZFS raidz1 of 3 disks: write {:.1}s ({:.1} MiB/s), read {:.1}s ({:.1} MiB/s); md raid5 of 3 disks: write {:.1}s ({:.1} MiB/s), read {:.1}s ({:.1} MiB/s)",
        zfs_write,
        64.0 / zfs_write,
        zfs_read,
        64.0 / zfs_read,
        md_write,
        64.0 / md_write,
        md_read,
        64.0 / md_read
    );
    let status = sudo(board, key, "nasforge-setup status");
    eprintln!("e2e: nasforge-setup status after setup:\n{status}");
    assert!(
        status.contains("tank") && status.to_lowercase().contains("healthy"),
        "{status}"
    );
}

/// The next boot, with one member gone: the pool was imported from its
/// cache file and mounted, DEGRADED, the file is intact, a scrub finishes
/// with no errors, and status says degraded and names the scrub.
pub fn check_degraded(board: &Board, key: &Path, dir: &Path, want: &str) {
    let mounted = sudo(
        board,
        key,
        "zpool list -H -o name,health tank; zfs get -H -o value mounted tank/projects",
    );
    assert!(
        mounted.contains("tank\tDEGRADED") && mounted.contains("yes"),
        "{mounted}"
    );
    assert_eq!(
        projects_sha(board, dir, "degraded"),
        want,
        "the file on the degraded pool"
    );
    clean_scrub(board, key, "tank", "DEGRADED");
    let status = sudo(board, key, "nasforge-setup status");
    eprintln!("e2e: nasforge-setup status with a pool member missing:\n{status}");
    let tank = status
        .lines()
        .skip_while(|l| !l.contains("tank"))
        .take(6)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        tank.to_lowercase().contains("degraded") && status.contains("scrub"),
        "status says the pool is degraded and names its last scrub:\n{status}"
    );
}

/// `replace` puts the blank spare in the lost member's place: zpool
/// replace by the GUID zpool shows for the gone disk, the resilver
/// followed to its end, the pool ONLINE with the spare in it, the file
/// intact, and status healthy for the pool.
pub fn replace_lost(board: &Board, key: &Path, dir: &Path, want: &str) {
    let out = sudo(
        board,
        key,
        "nasforge-setup replace --array tank --disk usb-tankspare --yes",
    );
    eprintln!("e2e: nasforge-setup replace of the pool's lost disk:\n{out}");
    assert!(
        out.contains("Replace the missing member of 'tank'")
            && out.contains("in the pool 'tank' with ")
            && out.contains("resilver finished")
            && out.contains("replace complete"),
        "{out}"
    );
    let zpool = sudo(board, key, "zpool status -P tank");
    assert!(
        zpool.contains("state: ONLINE")
            && zpool.contains("usb-tankspare")
            && !zpool.contains("replacing-")
            && zpool.contains("errors: No known data errors"),
        "{zpool}"
    );
    assert_eq!(
        projects_sha(board, dir, "replaced"),
        want,
        "the file after the pool's replace"
    );
    let status = sudo(board, key, "nasforge-setup status");
    let mut tank = status
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("tank (/srv/tank): "));
    assert!(
        tank.next().is_some_and(|l| l.contains("): healthy"))
            && tank.next().is_some_and(|l| l.contains("last resilver: ")),
        "status says the pool is healthy again, resilvered:\n{status}"
    );
}

/// The sha256 of the 64 MiB file as the `projects` share serves it now.
fn projects_sha(board: &Board, dir: &Path, when: &str) -> String {
    let back = dir.join(format!("projects.{when}"));
    let _ = std::fs::remove_file(&back);
    let get = smbclient(
        board,
        "projects",
        &format!("get payload.bin {}", back.display()),
    );
    assert!(
        get.status.success(),
        "get payload.bin ({when}):\n{}",
        printed(&get)
    );
    sha256_file(&back)
}
