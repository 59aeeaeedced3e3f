//! Reading the machine: block devices from sysfs and udev's database, what a
//! disk already holds, which storage controller or USB bridge it hangs off,
//! how the running system uses it (mounts, swap, holders, the root
//! filesystem), and whether the board's power can carry its USB disks.

pub mod armbian_env;
pub mod controllers;
pub mod disks;
pub mod existing;
pub mod existing_pool;
pub mod filesystems;
pub mod hardware;
pub mod host;
pub mod md;
pub mod md_contents;
pub mod mounts;
pub mod old_nas;
pub mod parity_record;
pub mod power;
pub mod resilver;
pub mod resync;
pub mod signature;
pub mod smart;
pub mod sysfs;
pub mod uas_quirks;
pub mod udev;
pub mod updates;
pub mod usb;
pub mod usb_quirk;
pub mod zfs;
pub mod zfs_report;

/// Text a disk carries about itself (a filesystem label, an md name, a
/// model or serial) with its control characters escaped (`\n`,
/// `\u{1b}`): whoever formatted the disk chose it, and a newline or a
/// terminal escape in it must not fake a line in an erase plan or move the
/// cursor on a review screen.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The board's name, as md records it for the arrays' home host and the
/// alerts sign their messages.
pub fn hostname(host: &disks::Host) -> String {
    std::fs::read_to_string(host.path("/etc/hostname"))
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "nasforge".to_string())
}

/// The partition the firmware reads, where the builder put the recipe and
/// the status file goes: /boot/firmware on Raspberry Pi OS and Debian's
/// raspi images, else /boot (Armbian).
pub fn boot_dir(host: &disks::Host) -> std::path::PathBuf {
    let firmware = host.path("/boot/firmware");
    if firmware.is_dir() {
        firmware
    } else {
        host.path("/boot")
    }
}

/// The last `count` lines of the alert log, oldest first.
pub fn recent_alerts(host: &disks::Host, count: usize) -> Vec<String> {
    let text = std::fs::read_to_string(host.path(crate::paths::ALERTS_LOG)).unwrap_or_default();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[lines.len().saturating_sub(count)..].to_vec()
}

/// A fake root holding `files` (absolute path, text), for unit tests of
/// readers that go through [`disks::Host`].
#[cfg(test)]
pub(crate) fn fake_host(files: &[(&str, &str)]) -> (tempfile::TempDir, disks::Host) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let host = disks::Host::new(dir.path());
    (dir, host)
}
