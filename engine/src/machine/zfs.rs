//! Whether this board can run ZFS: the kernel has the `zfs` module (staged
//! by the image builder, built on the workstation for this kernel) and
//! zfsutils-linux's `zpool` is installed. The planner refuses ZFS levels and
//! the wizard leaves them out, with this reason, when either is missing.

use crate::machine::disks::Host;
use crate::machine::filesystems::{kernel_has, release};
use std::fs;

/// What the board has of ZFS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZfsSupport {
    /// The loaded module's version (`/sys/module/zfs/version`); None until
    /// the module is loaded.
    pub version: Option<String>,
}

/// ZFS can be used on this board, or why not.
pub fn support(host: &Host) -> Result<ZfsSupport, String> {
    let kernel = release(host).unwrap_or_else(|| "the running kernel".into());
    let module = host.path("/sys/module/zfs").exists() || kernel_has(host, "zfs");
    let zpool = ["/sbin/zpool", "/usr/sbin/zpool"]
        .iter()
        .any(|p| host.path(p).exists());
    match (module, zpool) {
        (true, true) => Ok(ZfsSupport {
            version: fs::read_to_string(host.path("/sys/module/zfs/version"))
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
        }),
        (false, _) => Err(format!(
            "kernel {kernel} has no zfs module; build the image with a ZFS pool in the recipe (or \"zfs\" in [kernel] require) so nasforge builds the modules for this kernel"
        )),
        (true, false) => Err(
            "zfsutils-linux is not installed (no zpool); build the image with a ZFS pool in the recipe (or \"zfs\" in [kernel] require), which stages it".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fake_host;

    const RELEASE: &str = "6.1.0-50-arm64";

    #[test]
    fn the_staged_module_and_zpool_make_zfs_available() {
        let (_d, host) = fake_host(&[
            ("/proc/sys/kernel/osrelease", RELEASE),
            (
                &format!("/lib/modules/{RELEASE}/modules.dep"),
                "updates/zfs/zfs.ko: updates/zfs/spl.ko\nupdates/zfs/spl.ko:\n",
            ),
            ("/usr/sbin/zpool", ""),
        ]);
        assert_eq!(support(&host), Ok(ZfsSupport { version: None }));
        let (_d, host) = fake_host(&[
            ("/sys/module/zfs/version", "2.1.11-1+deb12u1\n"),
            ("/sbin/zpool", ""),
        ]);
        assert_eq!(
            support(&host).unwrap().version.as_deref(),
            Some("2.1.11-1+deb12u1")
        );
    }

    #[test]
    fn a_missing_module_or_zpool_is_named() {
        let (_d, host) = fake_host(&[
            ("/proc/sys/kernel/osrelease", RELEASE),
            (
                &format!("/lib/modules/{RELEASE}/modules.dep"),
                "kernel/md/raid456.ko.xz:\n",
            ),
            ("/usr/sbin/zpool", ""),
        ]);
        let why = support(&host).unwrap_err();
        assert!(
            why.contains(RELEASE) && why.contains("no zfs module"),
            "{why}"
        );
        let (_d, host) = fake_host(&[
            ("/proc/sys/kernel/osrelease", RELEASE),
            (
                &format!("/lib/modules/{RELEASE}/modules.dep"),
                "updates/zfs/zfs.ko:\n",
            ),
        ]);
        assert!(support(&host).unwrap_err().contains("zfsutils-linux"));
    }
}
