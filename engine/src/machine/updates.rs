//! The system's updates as dpkg and apt keep them: the kernel's packages
//! (installed, held) from dpkg's status file, the versions apt would install
//! instead (`apt-cache policy`), and when unattended-upgrades last ran.
//!
//! A board with a ZFS pool boots modules built on the workstation for one
//! kernel; setup holds the kernel's packages so that no upgrade can boot
//! another kernel without them, and status and the hourly check read here
//! what is held and what waits.

use crate::command::{Ask, Cmd};
use crate::machine::host::Host;

/// dpkg's database of what is installed, and its selections (`hold`).
pub const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// Touched by apt's daily job (`apt.systemd.daily install`, which
/// apt-daily-upgrade.service runs) each time `unattended-upgrade` has run
/// and succeeded.
pub const UPGRADE_STAMP: &str = "/var/lib/apt/periodic/upgrade-stamp";

/// A package that installs a kernel: Debian's and Armbian's
/// `linux-image-*` (the versioned image and the metapackage that pulls in
/// the next one), Raspberry Pi OS's `linux-image-rpi-*`, and its older
/// `raspberrypi-kernel`, which replaces the kernel in place.
pub fn is_kernel(package: &str) -> bool {
    package.starts_with("linux-image-") || package == "raspberrypi-kernel"
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KernelPackage {
    pub name: String,
    pub version: String,
    /// `apt-mark hold`: no upgrade changes it.
    pub held: bool,
}

/// The installed kernel packages in dpkg's status file, in its order.
pub fn kernel_packages(status: &str) -> Vec<KernelPackage> {
    status
        .split("\n\n")
        .filter_map(|stanza| {
            let field = |name: &str| {
                stanza.lines().find_map(|l| {
                    l.strip_prefix(name)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .map(str::trim)
                })
            };
            let name = field("Package")?;
            // "hold ok installed": what is wanted, its flag, its state.
            let words: Vec<&str> = field("Status")?.split_whitespace().collect();
            (is_kernel(name) && words.last() == Some(&"installed")).then(|| KernelPackage {
                name: name.to_string(),
                version: field("Version").unwrap_or("").to_string(),
                held: words.first() == Some(&"hold"),
            })
        })
        .collect()
}

/// The installed kernel packages of the machine at `host`.
pub fn installed_kernel_packages(host: &Host) -> Vec<KernelPackage> {
    std::fs::read_to_string(host.path(DPKG_STATUS))
        .map(|s| kernel_packages(&s))
        .unwrap_or_default()
}

/// A held package with a newer version in apt's lists.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    pub package: String,
    pub installed: String,
    pub candidate: String,
}

impl Waiting {
    /// What is held back and why, for status and the alert; `kernel` is the
    /// one running.
    pub fn describe(&self, kernel: &str) -> String {
        format!(
            "{} {} (installed {}) is held back: a new kernel would boot without the ZFS modules built for {kernel}, and the pools would not be imported. The NAS stays on {kernel}; its other updates go on (README: \"Kernel updates and ZFS\").",
            self.package, self.candidate, self.installed
        )
    }
}

/// The packages of `apt-cache policy`'s answer whose candidate is not the
/// installed version. A hold does not change the candidate, only keeps
/// apt from installing it.
pub fn parse_policy(text: &str) -> Vec<Waiting> {
    let mut out = Vec::new();
    let mut package: Option<&str> = None;
    let mut installed: Option<&str> = None;
    for line in text.lines() {
        if !line.starts_with(' ') {
            package = line.strip_suffix(':');
            installed = None;
            continue;
        }
        let line = line.trim();
        if let Some(v) = line.strip_prefix("Installed:") {
            installed = Some(v.trim());
        } else if let Some(v) = line.strip_prefix("Candidate:") {
            let candidate = v.trim();
            if let (Some(p), Some(i)) = (package, installed)
                && i != "(none)"
                && candidate != "(none)"
                && candidate != i
            {
                out.push(Waiting {
                    package: p.to_string(),
                    installed: i.to_string(),
                    candidate: candidate.to_string(),
                });
            }
        }
    }
    out
}

/// The held kernel packages that apt has a newer version of: an update
/// setup's hold keeps back.
pub fn waiting_kernel_updates(held: &[KernelPackage], ask: &mut dyn Ask) -> Vec<Waiting> {
    let names: Vec<&str> = held
        .iter()
        .filter(|p| p.held)
        .map(|p| p.name.as_str())
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let mut argv = vec!["apt-cache", "policy"];
    argv.extend(&names);
    match ask.query(&Cmd::new(&argv)) {
        Ok(q) if q.status == 0 => parse_policy(&q.stdout),
        _ => Vec::new(),
    }
}

/// The kernel running now (`uname -r`).
pub fn running_kernel(host: &Host) -> Option<String> {
    std::fs::read_to_string(host.path("/proc/sys/kernel/osrelease"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// When unattended-upgrades last ran to its end, in seconds since the epoch.
pub fn last_upgrade(host: &Host) -> Option<u64> {
    std::fs::metadata(host.path(UPGRADE_STAMP))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Package: base-files\nStatus: install ok installed\nVersion: 13.8\n\nPackage: linux-image-amd64\nStatus: hold ok installed\nPriority: optional\nVersion: 6.12.57-1\nDepends: linux-image-6.12.57+deb13-amd64 (= 6.12.57-1)\n\nPackage: linux-image-6.12.57+deb13-amd64\nStatus: install ok installed\nVersion: 6.12.57-1\n\nPackage: linux-image-6.1.0-9-amd64\nStatus: deinstall ok config-files\nVersion: 6.1.27-1\n\nPackage: raspberrypi-kernel\nStatus: hold ok installed\nVersion: 1:1.20240529-1\n";

    #[test]
    fn kernel_packages_are_read_with_their_holds_and_removed_ones_left_out() {
        assert_eq!(
            kernel_packages(STATUS),
            vec![
                KernelPackage {
                    name: "linux-image-amd64".into(),
                    version: "6.12.57-1".into(),
                    held: true
                },
                KernelPackage {
                    name: "linux-image-6.12.57+deb13-amd64".into(),
                    version: "6.12.57-1".into(),
                    held: false
                },
                KernelPackage {
                    name: "raspberrypi-kernel".into(),
                    version: "1:1.20240529-1".into(),
                    held: true
                },
            ]
        );
    }

    #[test]
    fn apt_cache_policy_names_only_what_has_a_newer_candidate() {
        let policy = "linux-image-amd64:\n  Installed: 6.12.57-1\n  Candidate: 6.12.57-1+nasforge1\n  Version table:\n     6.12.57-1+nasforge1 500\n        500 file:/var/tmp/update ./ Packages\n *** 6.12.57-1 100\n        100 /var/lib/dpkg/status\nlinux-image-6.12.57+deb13-amd64:\n  Installed: 6.12.57-1\n  Candidate: 6.12.57-1\n  Version table:\n *** 6.12.57-1 100\n        100 /var/lib/dpkg/status\nlinux-image-rpi-2712:\n  Installed: (none)\n  Candidate: 1:6.12.47-1+rpt1\n";
        assert_eq!(
            parse_policy(policy),
            vec![Waiting {
                package: "linux-image-amd64".into(),
                installed: "6.12.57-1".into(),
                candidate: "6.12.57-1+nasforge1".into(),
            }]
        );
    }

    #[test]
    fn only_held_packages_are_asked_about() {
        let mut ask = crate::runner::RecordingRunner::answering(vec![(
            "apt-cache policy linux-image-amd64".into(),
            "linux-image-amd64:\n  Installed: 1\n  Candidate: 2\n".into(),
        )]);
        let held = kernel_packages(STATUS);
        let waiting = waiting_kernel_updates(&held, &mut ask);
        assert_eq!(waiting.len(), 1);
        assert_eq!(
            ask.lines,
            vec!["apt-cache policy linux-image-amd64 raspberrypi-kernel"]
        );
        let none: Vec<KernelPackage> = held.into_iter().filter(|p| !p.held).collect();
        assert!(waiting_kernel_updates(&none, &mut ask).is_empty());
        assert_eq!(ask.lines.len(), 1, "nothing held, nothing asked");
    }
}
