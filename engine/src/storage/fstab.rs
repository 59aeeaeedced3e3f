//! /etc/fstab lines for the arrays: by filesystem UUID (md device names move,
//! UUIDs do not) and `nofail`, so a missing disk never stops the board from
//! booting to a console where it can be fixed.

use crate::spec::Filesystem;

pub fn line(uuid: &str, mount: &str, fs: Filesystem) -> String {
    // Only ext4 wants a boot-time fsck; xfs and btrfs check themselves on mount.
    let pass = if fs == Filesystem::Ext4 { 2 } else { 0 };
    format!("UUID={uuid}  {mount}  {fs}  defaults,nofail  0  {pass}")
}

#[cfg(test)]
mod tests {
    use super::*;

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
