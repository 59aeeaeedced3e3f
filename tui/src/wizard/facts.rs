//! Everything the wizard reads from the machine before it draws: disks,
//! their SMART health, the hardware summary, the accounts that may use
//! shares, whether ZFS can be used. Gathered once at start; the screens
//! only read it.

use super::hardware::{self, Hardware};
use nasforge_engine::machine::disks::{self, DiscoveryError, Host, Inventory};
use nasforge_engine::machine::power;
use nasforge_engine::machine::smart::{self, Verdict};
use nasforge_engine::machine::zfs::{self, ZfsSupport};
use nasforge_engine::runner::Runner;
use nasforge_engine::steps::Cmd;
use nasforge_engine::{shares::samba, shares::smbpasswd, status};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub hardware: Hardware,
    pub inventory: Inventory,
    /// SMART's overall verdict per disk name; None where smartctl could not
    /// tell (not installed, a USB bridge without SMART passthrough, SD cards).
    pub health: BTreeMap<String, Option<bool>>,
    pub hostname: String,
    pub accounts: Vec<Account>,
    /// Users the image builder already staged a Samba password for: the
    /// wizard may keep it instead of asking.
    pub staged_smb_users: Vec<String>,
    /// The status file as the board names it, for the done screen.
    pub status_file: String,
    /// Not root on the real system: disks cannot be read or changed.
    pub not_root: bool,
    /// Why setup cannot start: first boot did not install the packages.
    pub packages_missing: Option<String>,
    /// Bus-powered USB disks and under-voltage, for the disks screen.
    pub power_warnings: Vec<String>,
    /// ZFS's module and zpool are here, or why not: the layout screen
    /// offers ZFS pools only when they are, and says why otherwise.
    pub zfs: Result<ZfsSupport, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
}

pub fn gather(host: &Host, runner: &mut dyn Runner) -> Result<Facts, DiscoveryError> {
    let mut inventory = disks::discover(host)?;
    // What the disks screen offers to adopt; a pool is looked into
    // read-only, which writes nothing to its disks.
    nasforge_engine::machine::old_nas::find(host, &mut inventory, runner);
    let health = inventory
        .disks
        .iter()
        .map(|d| {
            // The rules unattended setup refuses a disk by, so that the disk
            // the wizard asked about is the one the run accepts by serial.
            let verdict = runner
                .query(&Cmd::new(&[
                    "smartctl",
                    "--json",
                    "-H",
                    "-A",
                    &d.dev_path(),
                ]))
                .ok()
                .and_then(|q| match smart::verdict(&q.stdout) {
                    Verdict::Healthy => Some(true),
                    Verdict::Failing(_) => Some(false),
                    Verdict::Unknown => None,
                });
            (d.name.clone(), verdict)
        })
        .collect();
    let staged = std::fs::read_to_string(host.path(samba::STAGED_PASSWORDS)).unwrap_or_default();
    let status_file = nasforge_engine::machine::boot_dir(host).join(status::FILE_NAME);
    let status_file = status_file
        .strip_prefix(&host.root)
        .map(|rel| format!("/{}", rel.display()))
        .unwrap_or_else(|_| status_file.display().to_string());
    let power_warnings = power::warnings(&inventory, power::throttled(host, runner));
    Ok(Facts {
        hardware: hardware::collect(host, &inventory),
        inventory,
        health,
        hostname: nasforge_engine::machine::hostname(host),
        accounts: accounts(&std::fs::read_to_string(host.path("/etc/passwd")).unwrap_or_default()),
        staged_smb_users: smbpasswd::users(&staged),
        status_file,
        // SAFETY: geteuid has no preconditions and cannot fail.
        not_root: host.root == std::path::Path::new("/") && unsafe { libc::geteuid() } != 0,
        packages_missing: super::service::packages_missing(host),
        power_warnings,
        zfs: zfs::support(host),
    })
}

/// People's accounts in /etc/passwd: uid 1000 up to the nobody range, with
/// a login shell. System accounts cannot be share users.
pub fn accounts(passwd: &str) -> Vec<Account> {
    passwd
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            let uid: u32 = f.get(2)?.parse().ok()?;
            let shell = f.get(6).copied().unwrap_or_default();
            ((1000..60000).contains(&uid)
                && !shell.ends_with("nologin")
                && !shell.ends_with("false"))
            .then(|| Account {
                name: f[0].to_string(),
                uid,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_users_are_people_not_system_accounts() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      admin:x:1000:1000:,,,:/home/admin:/bin/bash\n\
                      backup-bot:x:1001:1001::/home/bot:/usr/sbin/nologin\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                      alice:x:1002:1002::/home/alice:/bin/sh\n";
        let names: Vec<(String, u32)> = accounts(passwd)
            .into_iter()
            .map(|a| (a.name, a.uid))
            .collect();
        assert_eq!(names, [("admin".into(), 1000), ("alice".into(), 1002)]);
    }
}
