//! The hourly check (`alert --check`): each array's filesystem over
//! [`FULL_PERCENT`] raises `filesystem-full` once, and again only after it
//! dropped below and filled up anew, so a full disk is not an hourly mail.

use super::spool::{Delivery, raise};
use super::{Event, Kind};
use crate::machine::disks::Host;
use crate::machine::mounts::Mounts;
use crate::runner::Runner;
use std::path::Path;

pub const FULL_PERCENT: u64 = 90;

/// The mounts found full at the last check.
const STATE: &str = "/var/lib/nasforge/alerts-full.json";

/// How full a mounted filesystem is.
pub trait Usage {
    /// Bytes used and bytes still available to users, or None when
    /// nothing is mounted there.
    fn usage(&self, mount: &str) -> Option<(u64, u64)>;
}

/// statvfs(3) of the real mounts under `host`.
pub struct Statvfs<'a>(pub &'a Host);

impl Usage for Statvfs<'_> {
    fn usage(&self, mount: &str) -> Option<(u64, u64)> {
        if !Mounts::read(&self.0.root).is_mounted(mount) {
            return None;
        }
        let c = std::ffi::CString::new(self.0.path(mount).as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: statvfs writes into the zeroed struct we own.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let block = st.f_frsize as u64;
        let used = (st.f_blocks as u64).saturating_sub(st.f_bfree as u64) * block;
        Some((used, st.f_bavail as u64 * block))
    }
}

/// Percent full as df counts it: used / (used + available to users).
fn percent(used: u64, available: u64) -> u64 {
    let total = used + available;
    if total == 0 {
        0
    } else {
        (used as u128 * 100 / total as u128) as u64
    }
}

/// Where the arrays set up (by the setup journal) are mounted.
pub fn array_mounts(host: &Host) -> Vec<String> {
    crate::journal::Journal::load(&host.path(crate::journal::PATH))
        .ok()
        .flatten()
        .map(|j| j.plan.arrays.iter().map(|a| a.spec.mount.clone()).collect())
        .unwrap_or_default()
}

/// Checks `mounts` and raises an event for each newly full one.
pub fn check(
    host: &Host,
    mounts: &[String],
    usage: &dyn Usage,
    runner: &mut dyn Runner,
) -> std::io::Result<Vec<Delivery>> {
    let state = host.path(STATE);
    let before: Vec<String> = std::fs::read(&state)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let hostname = crate::machine::hostname(host);
    let mut full = Vec::new();
    let mut out = Vec::new();
    for mount in mounts {
        let Some((used, available)) = usage.usage(mount) else {
            continue;
        };
        let pct = percent(used, available);
        if pct < FULL_PERCENT {
            continue;
        }
        full.push(mount.clone());
        if !before.contains(mount) {
            let event = Event::new(
                Kind::FilesystemFull,
                &hostname,
                &format!("{mount} is {pct} % full"),
                &format!(
                    "{mount} is {pct} % full ({} free). Delete or move files, or grow the array with `sudo nasforge-setup grow`.",
                    crate::size::Size(available)
                ),
            );
            out.extend(raise(host, &event, runner)?);
        }
    }
    if full != before {
        write_state(&state, &full)?;
    }
    Ok(out)
}

/// The kernel updates alerted already, as `package version`.
const KERNEL_STATE: &str = "/var/lib/nasforge/alerts-kernel.json";

/// Raises `kernel-update-held` once for each new version of a held kernel
/// package that apt's lists offer (apt's daily job refreshes them).
pub fn check_kernel(host: &Host, runner: &mut dyn Runner) -> std::io::Result<Vec<Delivery>> {
    use crate::machine::updates;
    let state = host.path(KERNEL_STATE);
    let before: Vec<String> = std::fs::read(&state)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let held = updates::installed_kernel_packages(host);
    let waiting = updates::waiting_kernel_updates(&held, runner);
    let kernel = updates::running_kernel(host).unwrap_or_else(|| "this kernel".into());
    let hostname = crate::machine::hostname(host);
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for w in &waiting {
        let key = format!("{} {}", w.package, w.candidate);
        if !before.contains(&key) {
            let event = Event::new(
                Kind::KernelUpdateHeld,
                &hostname,
                &format!("{} {} is held back for ZFS", w.package, w.candidate),
                &w.describe(&kernel),
            );
            out.extend(raise(host, &event, runner)?);
        }
        seen.push(key);
    }
    if seen != before {
        write_state(&state, &seen)?;
    }
    Ok(out)
}

fn write_state(path: &Path, full: &[String]) -> std::io::Result<()> {
    let json = serde_json::to_vec(full).map_err(std::io::Error::other)?;
    crate::atomic_file::write(path, &json, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, (u64, u64)>);

    impl Usage for Fake {
        fn usage(&self, mount: &str) -> Option<(u64, u64)> {
            self.0.get(mount).copied()
        }
    }

    #[test]
    fn percent_is_used_over_what_users_can_have() {
        assert_eq!(percent(90, 10), 90);
        assert_eq!(percent(899, 101), 89);
        assert_eq!(percent(0, 0), 0);
        assert_eq!(percent(u64::MAX / 2, u64::MAX / 2), 50);
    }

    #[test]
    fn a_full_filesystem_is_reported_once_until_it_empties_and_fills_again() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let mounts = ["/srv/data", "/srv/media", "/srv/gone"].map(String::from);
        let fake = |data: (u64, u64)| {
            Fake(HashMap::from([
                ("/srv/data", data),
                ("/srv/media", (50, 50)),
            ]))
        };
        let log = |host: &Host| crate::machine::recent_alerts(host, 100).join("\n");
        // No channel is set up: only the log hears of it.
        let mut runner = crate::runner::RecordingRunner::default();
        check(&host, &mounts, &fake((95, 5)), &mut runner).unwrap();
        assert!(log(&host).contains("filesystem-full on "), "{}", log(&host));
        assert!(
            log(&host).contains(": /srv/data is 95 % full"),
            "{}",
            log(&host)
        );
        assert!(!log(&host).contains("/srv/media is"), "{}", log(&host));
        let lines = log(&host).lines().count();
        check(&host, &mounts, &fake((96, 4)), &mut runner).unwrap();
        assert_eq!(
            log(&host).lines().count(),
            lines,
            "still full: no new alert"
        );
        check(&host, &mounts, &fake((50, 50)), &mut runner).unwrap();
        check(&host, &mounts, &fake((91, 9)), &mut runner).unwrap();
        assert!(
            log(&host).contains(": /srv/data is 91 % full"),
            "{}",
            log(&host)
        );
        assert!(runner.lines.is_empty(), "{:?}", runner.lines);
    }

    #[test]
    fn a_held_back_kernel_update_is_reported_once_per_version() {
        let (_dir, host) = crate::machine::fake_host(&[
            ("/proc/sys/kernel/osrelease", "6.12.57+deb13-arm64\n"),
            (
                crate::machine::updates::DPKG_STATUS,
                "Package: linux-image-arm64\nStatus: hold ok installed\nVersion: 6.12.57-1\n",
            ),
        ]);
        let log = |host: &Host| crate::machine::recent_alerts(host, 100).join("\n");
        let offered = |candidate: &str| {
            crate::runner::RecordingRunner::answering(vec![(
                "apt-cache policy".into(),
                format!("linux-image-arm64:\n  Installed: 6.12.57-1\n  Candidate: {candidate}\n"),
            )])
        };
        check_kernel(&host, &mut offered("6.12.57-1")).unwrap();
        assert_eq!(log(&host), "", "nothing newer: no alert");
        check_kernel(&host, &mut offered("6.12.63-1")).unwrap();
        assert!(
            log(&host).contains("kernel-update-held on ")
                && log(&host).contains("linux-image-arm64 6.12.63-1 is held back for ZFS"),
            "{}",
            log(&host)
        );
        let lines = log(&host).lines().count();
        check_kernel(&host, &mut offered("6.12.63-1")).unwrap();
        assert_eq!(log(&host).lines().count(), lines, "the same version: once");
        check_kernel(&host, &mut offered("6.12.69-1")).unwrap();
        assert!(
            log(&host).contains("linux-image-arm64 6.12.69-1 is held back for ZFS"),
            "a newer one: again\n{}",
            log(&host)
        );
    }
}
