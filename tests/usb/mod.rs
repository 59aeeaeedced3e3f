//! USB disks on the emulated board, sharing the first boots of the main
//! scenario: qemu's `qemu-xhci` with two blank disks for a raid1 (one
//! bulk-only `usb-storage`, one `usb-uas`) and a third, `usb-storage`, that
//! already holds someone's files and is kept (`keep = true`). The recipe
//! names a UAS quirk for qemu's usb-storage id (46f4:0001), which must be on
//! the kernel command line and active on the board. Three more, of 1, 2
//! and 3 GiB, make a pool (mergerfs and SnapRAID) that the kept disk joins
//! as it is: files written over SMB spread over its disks, and with one
//! disk lost the pool serves the others' files and status names the lost
//! disk's.

use super::{Board, smbclient};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

/// qemu's usb-storage device (hw/usb/dev-storage.c: 0x46f4, "CRC16() of
/// QEMU", product 0x0001).
pub const QUIRK: &str = "46f4:0001";

/// The files on the kept disk, by name, with their sha256.
pub struct Usb {
    pub disks: Vec<PathBuf>,
    pub media: PathBuf,
    files: Vec<(String, String)>,
    /// The pool's blank disks, 1, 2 and 3 GiB: d1, d2 and the parity.
    pub pool: Vec<PathBuf>,
    /// A blank 1 GiB disk, attached when d1 is gone, to replace it.
    pub spare: PathBuf,
}

/// Files written to the pool over SMB, by the disk each landed on (its
/// SnapRAID name), with their sha256.
pub struct PoolFiles(Vec<(String, String, String)>);

/// The recipe's lines for `[storage]` (before its first array).
pub fn storage_keys() -> String {
    format!("usb_quirks = [\"{QUIRK}\"]\n")
}

/// The recipe's arrays, kept disks and shares for the USB disks.
pub fn recipe_tables() -> &'static str {
    r#"[[storage.arrays]]
name = "docs"
level = "raid1"
# The two 512 MiB USB disks; the 1 GiB one holds photos and is kept.
disks = { transport = "usb", max_size = "600MiB", count = 2 }
filesystem = "ext4"
mount = "/srv/docs"
[[storage.disks]]
name = "photos"
match = { transport = "usb", serial = "usb-photos" }
keep = true
filesystem = "ext4"
mount = "/srv/photos"
[[storage.arrays]]
name = "pool"
level = "pool"
parity = 1
# The 1, 2 and 3 GiB disks usb-pool*: the 3 GiB one holds the parity, the
# kept photos disk joins as it is.
disks = { transport = "usb", serial = "usb-pool*" }
filesystem = "ext4"
mount = "/srv/pool"
keep = ["photos"]
[[shares]]
name = "pool"
path = "/srv/pool"
smb = { users = ["admin"] }
[[shares]]
name = "docs"
path = "/srv/docs"
smb = { users = ["admin"] }
nfs = { clients = "10.0.2.0/24" }
[[shares]]
name = "photos"
path = "/srv/photos"
smb = { guest = true, readonly = true }
"#
}

impl Usb {
    /// Two blank disks and one ext4 disk holding files, in `dir`. The file
    /// names say how `nasforge emulate` attaches them (see Board::boot).
    pub fn create(dir: &Path) -> Usb {
        let mut disks = Vec::new();
        for name in ["usb-docs0.img", "uas-docs1.img"] {
            let p = dir.join(name);
            std::fs::File::create(&p)
                .unwrap()
                .set_len(512 * MIB)
                .unwrap();
            disks.push(p);
        }
        let tree = dir.join("photos-tree");
        std::fs::create_dir_all(tree.join("2024 summer")).unwrap();
        let mut files = Vec::new();
        let mut x = 0x9E3779B97F4A7C15u64;
        for (name, len) in [("2024 summer/beach.jpg", 3 * MIB), ("notes.txt", 100)] {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(tree.join(name), &data).unwrap();
            files.push((name.to_string(), sha256_bytes(&data)));
        }
        let media = dir.join("usb-photos.img");
        std::fs::File::create(&media)
            .unwrap()
            .set_len(1024 * MIB)
            .unwrap();
        run(Command::new("mkfs.ext4")
            .args(["-q", "-L", "photos", "-d"])
            .arg(&tree)
            .arg(&media));
        disks.push(media.clone());
        let pool: Vec<PathBuf> = [1, 2, 3]
            .iter()
            .map(|gib| {
                let p = dir.join(format!("usb-pool{gib}.img"));
                std::fs::File::create(&p)
                    .unwrap()
                    .set_len(gib * 1024 * MIB)
                    .unwrap();
                p
            })
            .collect();
        disks.extend(pool.iter().cloned());
        let spare = dir.join("usb-spare1.img");
        std::fs::File::create(&spare)
            .unwrap()
            .set_len(1024 * MIB)
            .unwrap();
        Usb {
            disks,
            media,
            files,
            pool,
            spare,
        }
    }

    /// On the running board after setup: the disks are on USB, the quirk is
    /// active, one disk is driven by `uas`, the raid1 is built, the kept
    /// disk is mounted by UUID with nofail and its files reach a guest
    /// over SMB unchanged.
    pub fn check_board(&self, board: &Board, key: &Path, dir: &Path) {
        let (ok, tran) = board.ssh(key, "lsblk -dno NAME,TRAN,SIZE");
        assert!(ok && tran.matches(" usb ").count() >= 3, "{tran}");
        self.quirk_active(board, key);
        let (ok, uas) = board.ssh(key, "ls /sys/bus/usb/drivers/uas/");
        assert!(
            ok && uas.lines().any(|l| l.contains(':')),
            "the usb-uas disk is driven by uas:\n{uas}"
        );
        let (ok, md) = board.ssh(key, "cat /proc/mdstat");
        assert!(ok && md.contains(": active raid1"), "{md}");
        self.kept_disk_mounted(board, key);
        let (_, fstab) = board.ssh(key, "cat /etc/fstab");
        assert!(
            fstab.lines().any(|l| l.starts_with("UUID=")
                && l.contains(" /srv/photos ")
                && l.contains("nofail")),
            "{fstab}"
        );
        self.served_unchanged(board, dir);
    }

    pub fn quirk_active(&self, board: &Board, key: &Path) {
        let (ok, quirks) = board.ssh(
            key,
            "cat /proc/cmdline; cat /sys/module/usb_storage/parameters/quirks",
        );
        assert!(
            ok && quirks.contains(&format!("usb-storage.quirks={QUIRK}:u"))
                && quirks
                    .lines()
                    .last()
                    .is_some_and(|l| l.contains(&format!("{QUIRK}:u"))),
            "the recipe's quirk on the command line and active:\n{quirks}"
        );
    }

    pub fn kept_disk_mounted(&self, board: &Board, key: &Path) {
        let (ok, mnt) = board.ssh(key, "findmnt -no FSTYPE /srv/photos");
        assert!(
            ok && mnt.contains("ext4"),
            "the kept disk is mounted:\n{mnt}"
        );
    }

    /// Each file, read by a guest over SMB, has its sha256.
    pub fn served_unchanged(&self, board: &Board, dir: &Path) {
        for (name, sha) in &self.files {
            let back = dir.join("photos.get");
            let _ = std::fs::remove_file(&back);
            let out = Command::new("smbclient")
                .arg("//127.0.0.1/photos")
                .args(["-p", &board.smb.to_string(), "-N", "-c"])
                .arg(format!("get \"{name}\" {}", back.display()))
                .output()
                .unwrap();
            assert!(out.status.success(), "guest get {name}:\n{}", printed(&out));
            assert_eq!(&sha256_file(&back), sha, "{name} over SMB");
        }
        let note = dir.join("guest-note.txt");
        std::fs::write(&note, "no\n").unwrap();
        let out = smbclient(board, "photos", &format!("put {} note.txt", note.display()));
        assert!(
            !out.status.success(),
            "the kept disk is shared read-only:\n{}",
            printed(&out)
        );
    }

    /// With the board off: the kept disk's filesystem is clean and every
    /// file on it is byte-identical.
    pub fn files_identical(&self) {
        e2fsck(&self.media, 0);
        for (name, sha) in &self.files {
            let out = run(Command::new("debugfs")
                .arg("-R")
                .arg(format!("cat \"/{name}\""))
                .arg(&self.media));
            assert_eq!(&sha256_bytes(&out.stdout), sha, "{name} on the kept disk");
        }
    }

    /// The pool after setup: mergerfs at /srv/pool over d1, d2 and the kept
    /// disk, SnapRAID's configuration and timers. Its disks are filled to
    /// just below the kept disk's free space (in /tmp/, which SnapRAID
    /// leaves out), so that six 4 MiB files put over SMB land on each disk
    /// in turn, as mergerfs's most-free-space policy puts them; then the
    /// nightly sync's service runs and status records it.
    pub fn check_pool(&self, board: &Board, key: &Path, dir: &Path) -> PoolFiles {
        let (ok, mnt) = board.ssh(key, "findmnt -no FSTYPE /srv/pool; systemctl is-enabled nasforge-pool-sync.timer nasforge-pool-scrub.timer; cat /etc/snapraid.conf");
        assert!(
            ok && mnt.contains("fuse.mergerfs")
                && mnt.contains("data d1 /mnt/pool/d1/")
                && mnt.contains("data photos /srv/photos/")
                && mnt.contains("parity /mnt/pool/parity1/snapraid.parity"),
            "{mnt}"
        );
        // The slots follow size, whatever order the disks enumerated in:
        // the boot without d1 leaves out usb-pool1.
        let (ok, d1) = board.ssh(
            key,
            "findmnt -no SOURCE /mnt/pool/d1; readlink -f /dev/disk/by-id/*usb-pool1*-part1",
        );
        let d1: Vec<&str> = d1.lines().filter(|l| l.starts_with("/dev/")).collect();
        assert!(
            ok && d1.len() == 2 && d1[0] == d1[1],
            "d1 is the 1 GiB disk usb-pool1 (mounted source, then usb-pool1's partition):\n{d1:?}"
        );
        let (ok, df) = board.ssh(
            key,
            "sudo -S sh -c 'p=$(df --output=avail -BM /srv/photos | tail -1 | tr -dc 0-9); \
             for d in d1 d2; do a=$(df --output=avail -BM /mnt/pool/$d | tail -1 | tr -dc 0-9); \
             mkdir -p /mnt/pool/$d/tmp; fallocate -l $((a - p + 2))M /mnt/pool/$d/tmp/filler || exit 1; done; \
             df -BM /mnt/pool/d1 /mnt/pool/d2 /srv/photos'",
        );
        assert!(ok, "filling the pool's disks:\n{df}");
        let mut files = Vec::new();
        for i in 0..6u64 {
            let name = format!("pooled-{i}.bin");
            let local = dir.join(&name);
            let mut x = 0x2545F4914F6CDD1Du64 ^ (i + 1);
            let data: Vec<u8> = (0..4 * MIB)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(&local, &data).unwrap();
            let out = smbclient(board, "pool", &format!("put {} {name}", local.display()));
            assert!(
                out.status.success(),
                "put {name} to the pool:\n{}",
                printed(&out)
            );
            files.push((name, sha256_bytes(&data)));
        }
        let (ok, listing) = board.ssh(
            key,
            "for b in /mnt/pool/d1 /mnt/pool/d2 /srv/photos; do for f in $b/pooled-*; do echo \"$b $f\"; done; done",
        );
        assert!(ok, "{listing}");
        let mut placed = Vec::new();
        for (name, sha) in files {
            let on: Vec<&str> = listing
                .lines()
                .filter(|l| l.ends_with(&format!("/{name}")))
                .collect();
            assert_eq!(on.len(), 1, "{name} is on one disk:\n{listing}\n{df}");
            let disk = match on.first() {
                Some(l) if l.starts_with("/mnt/pool/d1 ") => "d1",
                Some(l) if l.starts_with("/mnt/pool/d2 ") => "d2",
                Some(l) if l.starts_with("/srv/photos ") => "photos",
                _ => panic!("{name} is on none of the pool's disks:\n{listing}\n{df}"),
            };
            placed.push((disk.to_string(), name, sha));
        }
        for disk in ["d1", "d2", "photos"] {
            assert!(
                placed.iter().any(|(d, _, _)| d == disk),
                "no file landed on {disk}: the most-free-space policy spreads them:\n{listing}\n{df}"
            );
        }
        let (ok, sync) = board.ssh(
            key,
            "sudo -S sh -c 'systemctl start nasforge-pool-sync.service && nasforge-setup status'",
        );
        assert!(
            ok && sync.contains("Pools of disks:")
                && sync.contains(" ok: synced: 8 added, 0 removed"),
            "the nightly sync's service, run now:\n{sync}"
        );
        PoolFiles(placed)
    }

    /// The board without d1's disk: the pool is still mounted and serves
    /// the other disks' files unchanged, d1's are gone from it, and status
    /// names the disk and each of its files. Then `replace` restores d1
    /// onto the spare and every file is served again, byte for byte.
    pub fn pool_without_d1(&self, board: &Board, key: &Path, dir: &Path, files: &PoolFiles) {
        let start = std::time::Instant::now();
        loop {
            let (_, mnt) = board.ssh(key, "findmnt -no FSTYPE /srv/pool");
            if mnt.contains("fuse.mergerfs") {
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(300),
                "the pool was not mounted without d1:\n{mnt}"
            );
            std::thread::sleep(std::time::Duration::from_secs(5));
        }
        for (disk, name, sha) in &files.0 {
            match (disk == "d1", pool_sha(board, dir, name)) {
                (true, Ok(_)) => {
                    let (_, board_state) = board.ssh(
                        key,
                        "sudo -S sh -c 'findmnt -o TARGET,SOURCE,FSTYPE,OPTIONS /srv/pool /mnt/pool/d1 /mnt/pool/d2 /srv/photos; \
                         ls -la /mnt/pool/d1 /mnt/pool/d2 /srv/photos; \
                         journalctl -b --no-pager -u nasforge-pool-pool -u mnt-pool-d1.mount | tail -30'",
                    );
                    panic!(
                        "{name} was on the lost disk d1 but is served; on the board:\n{board_state}"
                    );
                }
                (true, Err(_)) => {}
                (false, got) => assert_eq!(
                    got.as_deref(),
                    Ok(sha.as_str()),
                    "{name} from the pool without d1"
                ),
            }
        }
        let (ok, status) = board.ssh(
            key,
            "sudo -S sh -c 'nasforge-setup status; journalctl -b -u nasforge-pool-pool --no-pager | tail -5'",
        );
        assert!(
            ok && status.contains("at /mnt/pool/d1: NOT MOUNTED")
                && status.contains("/mnt/pool/d1 is not mounted (its disk is missing"),
            "{status}"
        );
        for (disk, name, _) in &files.0 {
            assert_eq!(
                status.contains(name.as_str()),
                disk == "d1",
                "status names exactly the lost disk's files:\n{status}"
            );
        }
        // The blank spare takes d1's place: partitioned, formatted, its
        // files restored from parity and checked, joined to the pool. The
        // SATA blanks kept for the array's care fit too, so the spare is
        // named by the serial on its label, as a person would.
        let (ok, replaced) = board.ssh(
            key,
            "sudo -S nasforge-setup replace --array pool --disk usb-spare1 --yes",
        );
        assert!(
            ok && replaced.contains("Replace the lost data disk 'd1' of the pool 'pool'")
                && replaced.contains("snapraid -d d1 fix"),
            "{replaced}"
        );
        for (_, name, sha) in &files.0 {
            assert_eq!(
                pool_sha(board, dir, name).as_deref(),
                Ok(sha.as_str()),
                "{name} after replace"
            );
        }
        let (ok, status) = board.ssh(key, "sudo -S nasforge-setup status");
        let d1 = status
            .lines()
            .find(|l| l.trim_start().starts_with("d1 (data, "));
        assert!(
            ok && d1.is_some_and(|l| l.contains(" used of ")),
            "d1 is mounted again:\n{status}"
        );
    }
}

/// The sha256 of `name` as the pool's share serves it, or what smbclient
/// said when it could not get it.
fn pool_sha(board: &Board, dir: &Path, name: &str) -> Result<String, String> {
    let back = dir.join(format!("{name}.get"));
    let _ = std::fs::remove_file(&back);
    let out = smbclient(board, "pool", &format!("get {name} {}", back.display()));
    if out.status.success() {
        Ok(sha256_file(&back))
    } else {
        Err(printed(&out))
    }
}
