//! What status says of updates: the kernel setup held for ZFS's modules,
//! an update waiting behind that hold, and whether and when the NAS last
//! took security updates on its own (`[system] updates`).

use crate::clock::utc;
use crate::command::Ask;
use crate::machine::host::Host;
use crate::machine::updates::{self, KernelPackage, Waiting};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpdatesStatus {
    /// The kernel running now.
    pub kernel: Option<String>,
    /// The kernel's packages setup held (ZFS's modules are built for it).
    pub held: Vec<KernelPackage>,
    /// The guard that refuses a kernel without its ZFS modules is there.
    pub guarded: bool,
    /// Newer versions of those the hold keeps back.
    pub waiting: Vec<Waiting>,
    /// unattended-upgrades is set up by the image (`[system] updates`).
    pub automatic: bool,
    /// When it last ran to its end, seconds since the epoch.
    pub last_upgrade: Option<u64>,
}

pub fn read(host: &Host, ask: &mut dyn Ask) -> UpdatesStatus {
    let held: Vec<KernelPackage> = updates::installed_kernel_packages(host)
        .into_iter()
        .filter(|p| p.held)
        .collect();
    UpdatesStatus {
        kernel: updates::running_kernel(host),
        waiting: updates::waiting_kernel_updates(&held, ask),
        held,
        guarded: host.path(crate::paths::KERNEL_GUARD).is_file(),
        automatic: host.path(crate::paths::UPDATES_CONF).is_file(),
        last_upgrade: updates::last_upgrade(host),
    }
}

impl UpdatesStatus {
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let kernel = self.kernel.as_deref().unwrap_or("running now");
        if !self.held.is_empty() {
            let names: Vec<&str> = self.held.iter().map(|p| p.name.as_str()).collect();
            out.push(format!(
                "  kernel {kernel}: held ({}), since the ZFS modules are built for it\n",
                names.join(", ")
            ));
        }
        if self.guarded {
            out.push(format!(
                "  kernel installs: refused without their ZFS modules ({})\n",
                crate::paths::KERNEL_GUARD
            ));
        }
        for w in &self.waiting {
            out.push(format!("  WAITING: {}\n", w.describe(kernel)));
        }
        out.push(if self.automatic {
            match self.last_upgrade {
                Some(t) => format!(
                    "  security updates: automatic (unattended-upgrades), last run {}\n",
                    utc(t)
                ),
                None => "  security updates: automatic (unattended-upgrades), not run yet\n"
                    .to_string(),
            }
        } else {
            "  security updates: not automatic; `[system] updates = \"security\"` in the recipe turns them on\n".to_string()
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_kernel_with_an_update_waiting_says_both() {
        let (_dir, host) = crate::machine::fake_host(&[
            ("/proc/sys/kernel/osrelease", "6.12.57+deb13-amd64\n"),
            (
                crate::machine::updates::DPKG_STATUS,
                "Package: linux-image-amd64\nStatus: hold ok installed\nVersion: 6.12.57-1\n\nPackage: linux-image-6.12.57+deb13-amd64\nStatus: hold ok installed\nVersion: 6.12.57-1\n",
            ),
        ]);
        let mut ask = crate::runner::RecordingRunner::answering(vec![(
                "apt-cache policy".into(),
                "linux-image-amd64:\n  Installed: 6.12.57-1\n  Candidate: 6.12.63-1\nlinux-image-6.12.57+deb13-amd64:\n  Installed: 6.12.57-1\n  Candidate: 6.12.57-1\n".into(),
            )]);
        let s = read(&host, &mut ask);
        let text = s.lines().concat();
        assert!(
            text.contains("kernel 6.12.57+deb13-amd64: held (linux-image-amd64, linux-image-6.12.57+deb13-amd64)"),
            "{text}"
        );
        assert!(
            text.contains(
                "WAITING: linux-image-amd64 6.12.63-1 (installed 6.12.57-1) is held back"
            ),
            "{text}"
        );
        assert!(text.contains("security updates: not automatic"), "{text}");
        assert!(
            !text.contains("kernel installs"),
            "no guard written: {text}"
        );
        std::fs::create_dir_all(host.path("/etc/kernel/preinst.d")).unwrap();
        std::fs::write(host.path(crate::paths::KERNEL_GUARD), "").unwrap();
        let text = read(&host, &mut ask).lines().concat();
        assert!(
            text.contains("kernel installs: refused without their ZFS modules (/etc/kernel/preinst.d/nasforge-zfs)"),
            "{text}"
        );
    }

    #[test]
    fn automatic_updates_say_when_they_last_ran() {
        let (_dir, host) = crate::machine::fake_host(&[(crate::paths::UPDATES_CONF, "")]);
        let mut ask = crate::runner::RecordingRunner::default();
        let text = read(&host, &mut ask).lines().concat();
        assert!(
            text.contains("automatic (unattended-upgrades), not run yet"),
            "{text}"
        );
        assert!(!text.contains("held"), "no pool, no hold: {text}");
        assert!(ask.lines.is_empty(), "nothing held, apt not asked");
        let stamp = host.path(crate::machine::updates::UPGRADE_STAMP);
        std::fs::create_dir_all(stamp.parent().unwrap()).unwrap();
        std::fs::File::create(&stamp)
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_000_000))
            .unwrap();
        let text = read(&host, &mut ask).lines().concat();
        assert!(
            text.contains(&format!("last run {}", utc(1_796_000_000))),
            "{text}"
        );
    }
}
