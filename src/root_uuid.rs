//! Each built image's root filesystem gets a UUID of its own. Every image
//! built from one base (a cached Debian base, one vendor download) would
//! otherwise carry the same one, and a second disk with that UUID (another
//! nasforge card in a USB reader, a cloned disk) can be mounted or booted
//! in place of the root by whatever names it by UUID. The files that name
//! the root by UUID follow: fstab, GRUB's configuration on the PC and in
//! Debian's images, Armbian's armbianEnv.txt. Raspberry Pi OS names its
//! root by PARTUUID and Debian's raspi images by label; they need nothing.

use crate::image::Image;
use crate::io::hash::sha256_hex;
use crate::manifest::Change;
use anyhow::{Context, Result};

/// In the root filesystem.
const ROOT_FILES: [&str; 3] = ["/etc/fstab", "/boot/grub/grub.cfg", "/boot/armbianEnv.txt"];
/// On the boot (FAT) partition: the PC's GRUB beside its loader, Debian's
/// shim-booted GRUB, the Pi's kernel command line.
const BOOT_FILES: [&str; 3] = ["EFI/BOOT/grub.cfg", "EFI/debian/grub.cfg", "cmdline.txt"];

/// The new UUID set and written wherever the old one was named.
pub fn renew(image: &Image) -> Result<Vec<Change>> {
    let Some(root) = image.ext4() else {
        return Ok(Vec::new());
    };
    let (old, new) = root
        .renew_uuid()
        .context("giving the root filesystem a UUID of its own")?;
    let mut changes = vec![Change {
        file: "root filesystem".into(),
        before_sha256: None,
        after_sha256: None,
        why: "a UUID of this build's own: images built from one base would otherwise share it"
            .into(),
        details: vec![format!("UUID {old} -> {new}")],
    }];
    let paths: Vec<String> = ROOT_FILES.iter().map(|p| p.to_string()).collect();
    for (path, data) in paths.iter().zip(root.read_many(&paths)?) {
        if let Some((before, after)) = data.and_then(|d| renamed(&d, &old, &new)) {
            root.replace(path, &after, 0o644)?;
            changes.push(change(&format!("root:{path}"), &before, &after));
        }
    }
    if let Some(fat) = image.fat(true)? {
        for path in BOOT_FILES {
            if let Some((before, after)) = fat.read(path)?.and_then(|d| renamed(&d, &old, &new)) {
                fat.write(path, &after)?;
                changes.push(change(&format!("boot:{path}"), &before, &after));
            }
        }
        fat.close()?;
    }
    Ok(changes)
}

/// The text with every mention of `old` (as blkid prints it, or in the
/// upper case some tools write) replaced by `new`; None when it has none.
fn renamed(data: &[u8], old: &str, new: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = String::from_utf8_lossy(data);
    let upper = old.to_uppercase();
    if !text.contains(old) && !text.contains(&upper) {
        return None;
    }
    let after = text.replace(old, new).replace(&upper, &new.to_uppercase());
    Some((data.to_vec(), after.into_bytes()))
}

fn change(file: &str, before: &[u8], after: &[u8]) -> Change {
    Change {
        file: file.into(),
        before_sha256: Some(sha256_hex(before)),
        after_sha256: Some(sha256_hex(after)),
        why: "names the root filesystem by its new UUID".into(),
        details: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_the_old_uuid_is_replaced_and_nothing_else() {
        let old = "0b8f5c1e-1d2a-4c3b-9e8f-7a6b5c4d3e2f";
        let new = "11111111-2222-4333-8444-555555555555";
        let fstab =
            format!("UUID={old} / ext4 rw 0 1\nUUID=ABCD-1234 /boot/efi vfat umask=0077 0 2\n");
        let (_, after) = renamed(fstab.as_bytes(), old, new).unwrap();
        assert_eq!(
            String::from_utf8(after).unwrap(),
            format!("UUID={new} / ext4 rw 0 1\nUUID=ABCD-1234 /boot/efi vfat umask=0077 0 2\n")
        );
        let grub = format!("search.fs_uuid {} root\n", old.to_uppercase());
        let (_, after) = renamed(grub.as_bytes(), old, new).unwrap();
        assert_eq!(
            String::from_utf8(after).unwrap(),
            format!("search.fs_uuid {} root\n", new.to_uppercase())
        );
        assert_eq!(
            renamed(b"root=PARTUUID=1234abcd-02 rootwait\n", old, new),
            None
        );
    }
}
