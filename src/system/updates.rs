//! `[system] updates = "security"`: a NAS left alone for a year still gets
//! Debian's security fixes. apt's daily jobs refresh the lists and run
//! unattended-upgrades (staged for the offline first boot), which takes
//! only packages from Debian's security archive, never one that is held
//! (setup holds the kernel when a ZFS pool needs its modules), and reboots
//! at `updates_reboot` when an update asks for it.

use super::Applied;
use crate::image::ext4::Ext4;
use anyhow::{Result, bail};
use serde::Deserialize;

pub use nasforge_engine::paths::UPDATES_CONF;

/// The package that applies them.
pub const PACKAGE: &str = "unattended-upgrades";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Updates {
    /// Nothing is updated unless someone runs apt.
    #[default]
    Off,
    /// Debian's security archive, daily.
    Security,
}

/// When a security update that needs a restart (a kernel, the C library)
/// may reboot the NAS: an hour of the day, or never.
pub const DEFAULT_REBOOT: &str = "04:00";

/// `updates_reboot`'s problem, when it has one: "HH:MM" on the 24-hour
/// clock (unattended-upgrades hands it to `shutdown -r`), or "never".
pub fn reboot_problem(value: &str) -> Option<String> {
    if value == "never" {
        return None;
    }
    let ok = value.len() == 5
        && value.split_once(':').is_some_and(|(h, m)| {
            h.parse::<u8>().is_ok_and(|h| h < 24) && m.parse::<u8>().is_ok_and(|m| m < 60)
        })
        && value.chars().all(|c| c.is_ascii_digit() || c == ':');
    (!ok).then(|| {
        format!("`{value}` is not a time of day: write it as \"04:00\" (24-hour clock, the board's time zone), or \"never\" to reboot by hand")
    })
}

/// apt's settings: read after unattended-upgrades' own 50unattended-upgrades,
/// whose origins (Debian's point releases too) are cleared first.
pub fn conf(reboot: &str) -> String {
    let reboot = match reboot {
        "never" => "Unattended-Upgrade::Automatic-Reboot \"false\";\n".to_string(),
        at => format!(
            "Unattended-Upgrade::Automatic-Reboot \"true\";\nUnattended-Upgrade::Automatic-Reboot-Time \"{at}\";\n"
        ),
    };
    format!(
        "// Written by nasforge for `[system] updates = \"security\"` in the recipe.\n\
         // apt's daily jobs refresh the package lists and run unattended-upgrade.\n\
         APT::Periodic::Update-Package-Lists \"1\";\n\
         APT::Periodic::Unattended-Upgrade \"1\";\n\
         // Debian's security archive only; held packages (the kernel, when a\n\
         // ZFS pool needs the modules built for it) are never upgraded.\n\
         #clear Unattended-Upgrade::Origins-Pattern;\n\
         Unattended-Upgrade::Origins-Pattern {{\n\
         \x20 \"origin=Debian,codename=${{distro_codename}}-security,label=Debian-Security\";\n\
         \x20 \"origin=Debian,codename=${{distro_codename}},label=Debian-Security\";\n\
         }};\n\
         {reboot}"
    )
}

/// Writes apt's settings into the image; the image must be Debian's (or
/// built on it), whose security archive the origins name.
pub fn apply(root: &Ext4, reboot: &str, out: &mut Applied) -> Result<()> {
    let userland = crate::distro::Userland::of(root)?;
    if userland.id != "debian" {
        bail!(
            "`[system] updates = \"security\"` takes Debian's security archive, and this image is {} (os-release ID `{}`): leave `updates` out and update it by hand",
            userland.pretty,
            userland.id
        );
    }
    if userland.debian_release().is_none() {
        bail!(
            "`[system] updates = \"security\"`: the image's os-release names no VERSION_CODENAME, and unattended-upgrades finds Debian's security suite (<release>-security) by it; leave `updates` out for this image"
        );
    }
    out.ops.extend(root.missing_dirs(&["/etc/apt/apt.conf.d"])?);
    let before = root.read(UPDATES_CONF)?;
    super::replace(
        root,
        out,
        UPDATES_CONF,
        before.as_deref(),
        conf(reboot).as_bytes(),
        0o644,
        "[system] updates",
    )?;
    out.needs_unattended_upgrades = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_time_is_a_time_of_day_or_never() {
        for ok in ["04:00", "23:59", "00:00", "never"] {
            assert_eq!(reboot_problem(ok), None, "{ok}");
        }
        for bad in ["4:00", "24:00", "12:60", "noon", "04:00:00", "+4:00", ""] {
            assert!(reboot_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn only_debians_security_archive_is_allowed_and_the_reboot_is_said() {
        let c = conf("03:30");
        assert!(c.contains("#clear Unattended-Upgrade::Origins-Pattern;\n"));
        assert!(c.contains(
            "\"origin=Debian,codename=${distro_codename}-security,label=Debian-Security\";"
        ));
        assert!(!c.contains("label=Debian\""), "no point releases: {c}");
        assert!(c.contains("Unattended-Upgrade::Automatic-Reboot-Time \"03:30\";"));
        assert!(conf("never").contains("Unattended-Upgrade::Automatic-Reboot \"false\";"));
        assert!(!conf("never").contains("Reboot-Time"));
    }
}
