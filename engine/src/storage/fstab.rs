//! /etc/fstab lines for the arrays: by filesystem UUID (md device names move,
//! UUIDs do not) and `nofail`, so a missing disk never stops the board from
//! booting to a console where it can be fixed.

use crate::spec::Filesystem;

pub fn line(uuid: &str, mount: &str, fs: Filesystem) -> String {
    // Only ext4 wants a boot-time fsck; xfs and btrfs check themselves on mount.
    let pass = if fs == Filesystem::Ext4 { 2 } else { 0 };
    format!("UUID={uuid}  {mount}  {fs}  defaults,nofail  0  {pass}")
}

/// A kept disk's line: never checked at boot (`0` pass), because a repair
/// of someone's own disk is not nasforge's to start, and an exfat or ntfs
/// disk may have no fsck on the board at all.
pub fn kept_line(uuid: &str, mount: &str, mount_type: &str) -> String {
    format!("UUID={uuid}  {mount}  {mount_type}  defaults,nofail  0  0")
}

/// An adopted md array's line: by its md name, and, as a kept disk's,
/// never checked at boot: a repair of the old machine's filesystem is its
/// owner's to start.
pub fn adopted_line(device: &str, mount: &str, fs: Filesystem) -> String {
    format!("{device}  {mount}  {fs}  defaults,nofail  0  0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_disk_is_never_checked_at_boot() {
        assert_eq!(
            kept_line("1234-ABCD", "/srv/media", "exfat"),
            "UUID=1234-ABCD  /srv/media  exfat  defaults,nofail  0  0"
        );
    }

    #[test]
    fn mounts_by_uuid_with_nofail() {
        assert_eq!(
            line(
                "0b6d3c9e-1111-4222-8333-444455556666",
                "/srv/data",
                Filesystem::Xfs
            ),
            "UUID=0b6d3c9e-1111-4222-8333-444455556666  /srv/data  xfs  defaults,nofail  0  0"
        );
        assert!(line("u", "/srv/x", Filesystem::Ext4).ends_with("0  2"));
    }
}
