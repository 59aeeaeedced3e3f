//! USB disks on the emulated board, sharing the first boots of the main
//! scenario: qemu's `qemu-xhci` with two blank disks for a raid1 (one
//! bulk-only `usb-storage`, one `usb-uas`) and a third, `usb-storage`, that
//! already holds someone's files and is kept (`keep = true`). The recipe
//! names a UAS quirk for qemu's usb-storage id (46f4:0001), which must be on
//! the kernel command line and active on the board.

use super::{Board, PASSWORD};
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
}

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
match = { transport = "usb", min_size = "900MiB" }
keep = true
filesystem = "ext4"
mount = "/srv/photos"
[[shares]]
name = "docs"
path = "/srv/docs"
smb = { users = ["admin"] }
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
        Usb {
            disks,
            media,
            files,
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
        let out = Command::new("smbclient")
            .arg("//127.0.0.1/photos")
            .args([
                "-p",
                &board.smb.to_string(),
                "-U",
                &format!("admin%{PASSWORD}"),
                "-c",
            ])
            .arg(format!("put {} note.txt", note.display()))
            .output()
            .unwrap();
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
}
