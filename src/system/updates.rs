//! `[system] updates = "security"`: a NAS left alone for a year still gets
//! Debian's security fixes. apt's daily jobs refresh the lists and run
//! unattended-upgrades (staged for the offline first boot), which takes
//! only packages from Debian's security archive, never one that is held
//! (setup holds the kernel when a ZFS pool needs its modules), and reboots
//! at `updates_reboot` when an update asks for it. An image whose apt
//! sources name no security suite gets one, or unattended-upgrades would
//! find nothing to take.

use super::Applied;
use crate::image::ext4::Ext4;
use crate::packages::sources::AptSource;
use anyhow::{Context, Result, bail};
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

/// What `updates_mirror` must be.
pub const MIRROR_HELP: &str = "Debian's security archive or a mirror of it, such as `http://mirror.example/debian-security`, as the `-security` line of your own /etc/apt/sources.list names it";

/// The apt source nasforge adds when the image lists no security suite.
pub const SECURITY_SOURCE: &str = "/etc/apt/sources.list.d/nasforge-security.list";

/// Writes apt's settings into the image; the image must be Debian's (or
/// built on it), whose security archive the origins name. An image whose
/// sources have no `<release>-security` (mmdebstrap, given a mirror, lists
/// the release alone) gets one: from `mirror` (the recipe's
/// `updates_mirror`), else from this machine's apt sources.
pub fn apply(root: &Ext4, reboot: &str, mirror: Option<&str>, out: &mut Applied) -> Result<()> {
    let userland = crate::distro::Userland::of(root)?;
    if userland.id != "debian" {
        bail!(
            "`[system] updates = \"security\"` takes Debian's security archive, and this image is {} (os-release ID `{}`): leave `updates` out and update it by hand",
            userland.pretty,
            userland.id
        );
    }
    let Some(codename) = userland.debian_release() else {
        bail!(
            "`[system] updates = \"security\"`: the image's os-release names no VERSION_CODENAME, and unattended-upgrades finds Debian's security suite (<release>-security) by it; leave `updates` out for this image"
        );
    };
    list_security_suite(root, codename, mirror, out)?;
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

/// Lists `<codename>-security` in the image's apt sources unless it is
/// there.
fn list_security_suite(
    root: &Ext4,
    codename: &str,
    mirror: Option<&str>,
    out: &mut Applied,
) -> Result<()> {
    let listed = crate::packages::listed_sources(root)?;
    let text = match security_source(
        &listed,
        codename,
        mirror,
        crate::packages::sources::host_security_mirror,
    )? {
        Listing::There(warning) => {
            out.warnings.extend(warning);
            return Ok(());
        }
        Listing::Add(text) => text,
    };
    out.ops
        .extend(root.missing_dirs(&["/etc/apt/sources.list.d"])?);
    let before = root.read(SECURITY_SOURCE)?;
    super::replace(
        root,
        out,
        SECURITY_SOURCE,
        before.as_deref(),
        text.as_bytes(),
        0o644,
        "[system] updates: the image listed no security suite",
    )
}

#[derive(Debug, PartialEq)]
enum Listing {
    /// The image lists the suite; a warning when the recipe's archive goes
    /// unused.
    There(Option<String>),
    /// The list file to add.
    Add(String),
}

/// Whether the image (`listed`) needs `<codename>-security` added, and from
/// where: the recipe's `mirror`, else `host` (this machine's apt).
fn security_source(
    listed: &[AptSource],
    codename: &str,
    mirror: Option<&str>,
    host: impl FnOnce() -> Option<String>,
) -> Result<Listing> {
    let suite = format!("{codename}-security");
    if let Some(there) = listed.iter().find(|s| s.suites.contains(&suite)) {
        return Ok(Listing::There(mirror.map(|_| {
            format!(
                "`[system] updates_mirror` is not used: the image lists {suite} already ({}), and its security updates come from there",
                there.origin
            )
        })));
    }
    let uri = match mirror {
        Some(m) => m.to_string(),
        None => host().with_context(|| {
            format!(
                "`[system] updates = \"security\"`: the image's apt sources list no {suite}, the suite Debian's security fixes are published in, and this machine's apt lists no security archive to copy; set `updates_mirror` in [system] ({MIRROR_HELP})"
            )
        })?,
    };
    Ok(Listing::Add(security_list(listed, codename, &uri)))
}

/// The list file naming `uri`'s `<codename>-security`, with the components
/// and keyring of the image's entry for the release itself (`listed`):
/// Debian signs both suites with the keys of debian-archive-keyring.
fn security_list(listed: &[AptSource], codename: &str, uri: &str) -> String {
    let release = listed
        .iter()
        .find(|s| s.suites.iter().any(|x| x == codename));
    let components = release
        .map(|s| s.components.join(" "))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "main".into());
    let options = match release.map(|s| &s.signed_by[..]) {
        Some(keys) if !keys.is_empty() && keys.iter().all(|k| !k.starts_with("inline:")) => {
            format!("[signed-by={}] ", keys.join(","))
        }
        _ => String::new(),
    };
    format!(
        "# Written by nasforge for `[system] updates = \"security\"`: the image listed\n\
         # no {codename}-security, where Debian publishes its security fixes.\n\
         deb {options}{uri} {codename}-security {components}\n"
    )
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

    #[test]
    fn a_security_suite_is_added_only_when_the_image_lists_none() {
        let parse = |t| crate::packages::sources::parse_list(t, "sources.list").unwrap();
        let own = parse(
            "deb http://m.example/debian trixie main\ndeb http://own.example/debian-security trixie-security main\n",
        );
        let host = || Some("http://host.example/debian-security".to_string());
        assert_eq!(
            security_source(&own, "trixie", None, host).unwrap(),
            Listing::There(None)
        );
        let Listing::There(Some(w)) =
            security_source(&own, "trixie", Some("http://r.example/ds"), host).unwrap()
        else {
            panic!("the recipe's archive goes unused, and is said so")
        };
        assert!(
            w.contains("lists trixie-security already (sources.list:2)"),
            "{w}"
        );

        let bare = parse("deb http://m.example/debian trixie main\n");
        let from =
            |mirror, host: Option<&str>| match security_source(&bare, "trixie", mirror, || {
                host.map(String::from)
            }) {
                Ok(Listing::Add(text)) => text.lines().last().unwrap().to_string(),
                other => format!("{other:?}"),
            };
        assert_eq!(
            from(Some("http://r.example/ds"), Some("http://h.example/ds")),
            "deb http://r.example/ds trixie-security main"
        );
        assert_eq!(
            from(None, Some("http://h.example/ds")),
            "deb http://h.example/ds trixie-security main"
        );
        let e = format!(
            "{:#}",
            security_source(&bare, "trixie", None, || None).unwrap_err()
        );
        assert!(
            e.contains("list no trixie-security") && e.contains("set `updates_mirror` in [system]"),
            "{e}"
        );
    }

    #[test]
    fn the_security_suite_takes_the_releases_components_and_keyring() {
        let parse = |t| crate::packages::sources::parse_list(t, "sources.list").unwrap();
        let mmdebstrap =
            parse("deb http://m.example/debian trixie main contrib non-free-firmware\n");
        assert!(
            security_list(&mmdebstrap, "trixie", "http://s.example/debian-security").ends_with(
                "\ndeb http://s.example/debian-security trixie-security main contrib non-free-firmware\n"
            )
        );
        let signed = parse(
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://m.example/debian bookworm main\ndeb http://other.example/x y z\n",
        );
        assert!(
            security_list(&signed, "bookworm", "file:///srv/sec").ends_with(
                "\ndeb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] file:///srv/sec bookworm-security main\n"
            )
        );
        let other = parse("deb http://other.example/x y\n");
        assert!(
            security_list(&other, "trixie", "http://s.example/ds")
                .ends_with("\ndeb http://s.example/ds trixie-security main\n")
        );
    }
}
