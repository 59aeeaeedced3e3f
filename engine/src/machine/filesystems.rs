//! Whether the running board can mount a kept disk's filesystem: the
//! kernel knows it (/proc/filesystems), or has it as a module
//! (modules.builtin / modules.dep of the running kernel), or a FUSE helper
//! is installed. Asked before anything is written, so a disk the board
//! cannot read is refused with what is missing rather than left unmounted.

use crate::machine::host::Host;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;

/// The kernel's name for `fs` and its module, and a FUSE helper with the
/// Debian package that ships it, where one exists.
pub fn drivers(
    fs: KeptFilesystem,
) -> (
    &'static str,
    Option<(&'static str, &'static str, &'static str)>,
) {
    match fs {
        KeptFilesystem::Ext4 => ("ext4", None),
        KeptFilesystem::Xfs => ("xfs", None),
        KeptFilesystem::Btrfs => ("btrfs", None),
        KeptFilesystem::Exfat => (
            "exfat",
            Some(("/sbin/mount.exfat-fuse", "exfat-fuse", "exfat-fuse")),
        ),
        KeptFilesystem::Ntfs => ("ntfs3", Some(("/sbin/mount.ntfs-3g", "ntfs-3g", "ntfs-3g"))),
    }
}

/// The type to mount `fs` with on this board, or why it cannot be mounted
/// (naming the kernel module and the package that would do).
pub fn mount_type(host: &Host, fs: KeptFilesystem) -> Result<String, String> {
    let (kernel, fuse) = drivers(fs);
    if kernel_has(host, kernel) {
        return Ok(kernel.to_string());
    }
    if let Some((helper, fstype, _)) = fuse
        && (host.path(helper).exists() || host.path(&format!("/usr{helper}")).exists())
    {
        return Ok(fstype.to_string());
    }
    let release = release(host).unwrap_or_else(|| "the running kernel".into());
    Err(match fuse {
        Some((_, _, package)) => {
            let staged = if fs == KeptFilesystem::Ntfs {
                format!(", or set filesystem = \"{fs}\" in the kept disk's entry, which stages it")
            } else {
                String::new()
            };
            format!(
                "the board cannot mount {fs}: kernel {release} has no `{kernel}` module and the `{package}` package is not installed; rebuild the image with \"{package}\" in [packages] install{staged}"
            )
        }
        None => format!(
            "the board cannot mount {fs}: kernel {release} has no `{kernel}` module (nothing in /proc/filesystems, modules.builtin or modules.dep); a kernel built with it (`[kernel] build`) is needed"
        ),
    })
}

pub(crate) fn release(host: &Host) -> Option<String> {
    fs::read_to_string(host.path("/proc/sys/kernel/osrelease"))
        .ok()
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
}

/// Registered (/proc/filesystems) or loadable: `kernel/.../<name>.ko[.xz|
/// .zst|.gz]` in modules.builtin or modules.dep.
pub(crate) fn kernel_has(host: &Host, name: &str) -> bool {
    let registered = fs::read_to_string(host.path("/proc/filesystems"))
        .is_ok_and(|t| t.lines().any(|l| l.split_whitespace().last() == Some(name)));
    if registered {
        return true;
    }
    let Some(release) = release(host) else {
        return false;
    };
    let dir = format!("/lib/modules/{release}");
    ["modules.builtin", "modules.dep"].iter().any(|file| {
        fs::read_to_string(host.path(&format!("{dir}/{file}"))).is_ok_and(|t| {
            t.lines().any(|l| {
                let path = l.split(':').next().unwrap_or("");
                let base = path.rsplit('/').next().unwrap_or("");
                [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
                    .iter()
                    .any(|ext| base.strip_suffix(ext) == Some(name))
            })
        })
    })
}

/// Filesystems a disk that already holds files may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeptFilesystem {
    Ext4,
    Xfs,
    Btrfs,
    Exfat,
    Ntfs,
}

impl KeptFilesystem {
    pub const ALL: [KeptFilesystem; 5] = [
        KeptFilesystem::Ext4,
        KeptFilesystem::Xfs,
        KeptFilesystem::Btrfs,
        KeptFilesystem::Exfat,
        KeptFilesystem::Ntfs,
    ];

    /// A filesystem type as the probe (or libblkid) names it, when it can
    /// be kept: ext2 and ext3 are mounted by the ext4 driver.
    pub fn from_fstype(fstype: &str) -> Option<KeptFilesystem> {
        Some(match fstype {
            "ext2" | "ext3" | "ext4" => KeptFilesystem::Ext4,
            "xfs" => KeptFilesystem::Xfs,
            "btrfs" => KeptFilesystem::Btrfs,
            "exfat" => KeptFilesystem::Exfat,
            "ntfs" | "ntfs3" => KeptFilesystem::Ntfs,
            _ => return None,
        })
    }
}

impl fmt::Display for KeptFilesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeptFilesystem::Ext4 => "ext4",
            KeptFilesystem::Xfs => "xfs",
            KeptFilesystem::Btrfs => "btrfs",
            KeptFilesystem::Exfat => "exfat",
            KeptFilesystem::Ntfs => "ntfs",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::machine::fake_host as host_with;

    const RELEASE: &str = "6.12.47+rpt-rpi-v8";

    #[test]
    fn a_module_or_a_registered_filesystem_mounts_with_the_kernel() {
        let (_d, host) = host_with(&[
            ("/proc/sys/kernel/osrelease", &format!("{RELEASE}\n")),
            ("/proc/filesystems", "nodev\tsysfs\n\text4\n"),
            (
                &format!("/lib/modules/{RELEASE}/modules.dep"),
                "kernel/fs/exfat/exfat.ko.xz:\nkernel/fs/ntfs3/ntfs3.ko.xz:\n",
            ),
        ]);
        assert_eq!(mount_type(&host, KeptFilesystem::Ext4).unwrap(), "ext4");
        assert_eq!(mount_type(&host, KeptFilesystem::Exfat).unwrap(), "exfat");
        assert_eq!(mount_type(&host, KeptFilesystem::Ntfs).unwrap(), "ntfs3");
    }

    #[test]
    fn without_the_module_a_fuse_helper_does() {
        let (_d, host) = host_with(&[
            ("/proc/sys/kernel/osrelease", RELEASE),
            (&format!("/lib/modules/{RELEASE}/modules.dep"), ""),
            ("/usr/sbin/mount.ntfs-3g", ""),
        ]);
        assert_eq!(mount_type(&host, KeptFilesystem::Ntfs).unwrap(), "ntfs-3g");
    }

    #[test]
    fn what_cannot_be_mounted_is_refused_naming_the_module_and_the_package() {
        let (_d, host) = host_with(&[
            ("/proc/sys/kernel/osrelease", RELEASE),
            ("/proc/filesystems", "\text4\n"),
            (
                &format!("/lib/modules/{RELEASE}/modules.dep"),
                "kernel/fs/ntfs/ntfs.ko.xz:\n",
            ),
        ]);
        let why = mount_type(&host, KeptFilesystem::Ntfs).unwrap_err();
        assert!(
            why.contains("`ntfs3` module") && why.contains("`ntfs-3g` package"),
            "{why}"
        );
        assert!(why.contains(RELEASE), "{why}");
        let why = mount_type(&host, KeptFilesystem::Xfs).unwrap_err();
        assert!(why.contains("`xfs` module"), "{why}");
    }
}
