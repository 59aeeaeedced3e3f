//! Whether this board can run ZFS: the kernel has the `zfs` module (staged
//! by the image builder, built on the workstation for this kernel) and
//! zfsutils-linux's `zpool` is installed. The planner refuses ZFS levels and
//! the wizard leaves them out, with this reason, when either is missing.
//!
//! The pool and dataset guards read the pools' state with `zpool` and `zfs`
//! themselves ([`read`]): ZFS keeps no sysfs tree of its vdevs to read.

use crate::command::{Ask, Cmd, System};
use crate::machine::filesystems::{kernel_has, release};
use crate::machine::host::{Host, kernel_name};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;

/// What the board has of ZFS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZfsSupport {
    /// The loaded module's version (`/sys/module/zfs/version`); None until
    /// the module is loaded.
    pub version: Option<String>,
}

/// [`support`] as discovery records it for the planner, which reads no
/// files itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZfsOnBoard {
    Available(ZfsSupport),
    Unavailable(String),
}

impl Default for ZfsOnBoard {
    /// An inventory that did not look (made by hand, or recorded before
    /// discovery looked) offers no ZFS.
    fn default() -> ZfsOnBoard {
        ZfsOnBoard::Unavailable("discovery did not look for ZFS on this board".into())
    }
}

pub fn on_board(host: &Host) -> ZfsOnBoard {
    match support(host) {
        Ok(s) => ZfsOnBoard::Available(s),
        Err(why) => ZfsOnBoard::Unavailable(why),
    }
}

/// Where zfsutils-linux puts its commands: /sbin on bookworm, /usr/sbin
/// once /sbin is a link to it.
const SBIN: [&str; 2] = ["/sbin", "/usr/sbin"];

/// `zpool` or `zfs` under the host's root, if installed.
pub fn tool(host: &Host, name: &str) -> Option<PathBuf> {
    SBIN.iter()
        .map(|dir| host.path(&format!("{dir}/{name}")))
        .find(|p| p.exists())
}

/// What `zpool`/`zfs` (`name`) prints for `args`, when it exits 0: Ok(None)
/// when the tool is not installed, Err with its message when it fails.
pub fn read(host: &Host, name: &str, args: &[&str]) -> Result<Option<String>, String> {
    let Some(path) = tool(host, name) else {
        return Ok(None);
    };
    let mut argv = vec![path.to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let answer = System
        .query(&Cmd::new(&argv))
        .map_err(|e| format!("{name} could not be started: {}", e.source))?;
    if answer.status == 0 {
        Ok(Some(answer.stdout))
    } else {
        Err(format!(
            "`{name} {}` failed: {}",
            args.join(" "),
            answer.stderr.trim()
        ))
    }
}

/// Whether the pool `pool` is imported, from `zpool list -H -o name`
/// through the board's own zpool: Ok(None) when zpool is not installed.
pub fn imported(host: &Host, pool: &str) -> Result<Option<bool>, String> {
    let listed = read(host, "zpool", &["list", "-H", "-o", "name"])?;
    Ok(listed.map(|text| text.lines().any(|l| l.trim() == pool)))
}

/// The disks of the imported pools, as (kernel name of the device ZFS
/// holds, pool). Only asked while the module is loaded: with none, no pool
/// is imported, and zpool would load the module just to say so.
pub fn imported_devices(host: &Host) -> Vec<(String, String)> {
    if !host.path("/sys/module/zfs").exists() {
        return Vec::new();
    }
    let Ok(Some(text)) = read(host, "zpool", &["status", "-P"]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for report in super::zfs_report::parse_zpool_status_all(&text) {
        for path in report.every_disk().iter().filter_map(|v| v.path()) {
            let device = kernel_name(host, path)
                .or_else(|| kernel_name(host, &super::zfs_report::whole_disk_path(path)));
            if let Some(device) = device {
                out.push((device, report.pool.clone()));
            }
        }
    }
    out
}

/// ZFS can be used on this board, or why not.
pub fn support(host: &Host) -> Result<ZfsSupport, String> {
    let kernel =
        release(host).map_or_else(|| "the running kernel".into(), |r| format!("kernel {r}"));
    let module = host.path("/sys/module/zfs").exists() || kernel_has(host, "zfs");
    let zpool = tool(host, "zpool").is_some();
    match (module, zpool) {
        (true, true) => Ok(ZfsSupport {
            version: fs::read_to_string(host.path("/sys/module/zfs/version"))
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
        }),
        (false, _) => Err(format!(
            "{kernel} has no zfs module; build the image with a ZFS pool in the recipe (or \"zfs\" in [kernel] require) so nasforge builds the modules for this kernel"
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
