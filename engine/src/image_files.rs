//! Files the image builder installs so that a recipe with
//! `storage.mode = "wizard"` gets the wizard, never without a password: the
//! login screen says how to start it, a login on the console starts it
//! through sudo, and a login over SSH prints a one-line hint. Nothing runs
//! it on a terminal before a login. The texts live in `files/board/`; the
//! builder links this library and copies them from here.

/// Where the builder installs the nasforge-setup binary.
pub const SETUP_BINARY: &str = "/usr/local/sbin/nasforge-setup";

/// The wizard's choices as a recipe (storage and shares only), which
/// `nasforge-setup.service` sets up with `--unattended --recipe`.
pub const WIZARD_RECIPE: &str = "/var/lib/nasforge/wizard.toml";

/// The first-boot settings the builder writes; first boot deletes it once
/// it has finished, so while it is there first boot has not succeeded.
pub const FIRSTBOOT_ENV: &str = "/var/lib/nasforge/firstboot.env";

/// Made by first boot once the staged packages are installed.
pub const PACKAGES_INSTALLED: &str = "/var/lib/nasforge/packages-installed";

/// The unit that does the work the wizard planned.
pub const SETUP_SERVICE: &str = "nasforge-setup.service";

pub struct ImageFile {
    pub path: &'static str,
    pub contents: &'static str,
    pub mode: u32,
}

/// Installed for wizard mode (harmless otherwise: the setup unit only runs
/// with a wizard recipe, and the note and the hint need [`ENABLE_WIZARD`]).
pub const FILES: [ImageFile; 3] = [
    ImageFile {
        path: "/usr/lib/nasforge/setup-pending.issue",
        contents: include_str!("../../files/board/nasforge-setup-pending.issue"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-setup.service",
        contents: include_str!("../../files/board/nasforge-setup.service"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/profile.d/nasforge-setup.sh",
        contents: include_str!("../../files/board/nasforge-setup-hint.sh"),
        mode: 0o644,
    },
];

/// Installed with nasforge-setup: the handlers mdadm's monitor and smartd
/// run, and the units that retry undelivered alerts and check how full the
/// arrays are.
pub const ALERT_FILES: [ImageFile; 6] = [
    ImageFile {
        path: crate::paths::MDADM_EVENT,
        contents: include_str!("../../files/board/mdadm-event"),
        mode: 0o755,
    },
    ImageFile {
        path: crate::paths::SMARTD_EVENT,
        contents: include_str!("../../files/board/smartd-event"),
        mode: 0o755,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-alert-retry.service",
        contents: include_str!("../../files/board/nasforge-alert-retry.service"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-alert-retry.timer",
        contents: include_str!("../../files/board/nasforge-alert-retry.timer"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-check.service",
        contents: include_str!("../../files/board/nasforge-check.service"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-check.timer",
        contents: include_str!("../../files/board/nasforge-check.timer"),
        mode: 0o644,
    },
];

/// The alert timers, enabled by the link `systemctl enable` would make:
/// (link, target).
pub const ALERT_TIMERS: [(&str, &str); 2] = [
    (
        "/etc/systemd/system/timers.target.wants/nasforge-alert-retry.timer",
        "/etc/systemd/system/nasforge-alert-retry.timer",
    ),
    (
        "/etc/systemd/system/timers.target.wants/nasforge-check.timer",
        "/etc/systemd/system/nasforge-check.timer",
    ),
];

/// Setup is pending while this link is there: (link, target). agetty
/// prints every `/etc/issue.d/*.issue` after `/etc/issue` on the login
/// screen, the profile snippet shows its hint and starts the wizard only
/// while it exists, and the setup unit removes it once storage is built.
pub const ENABLE_WIZARD: (&str, &str) = (
    "/etc/issue.d/nasforge-setup.issue",
    "/usr/lib/nasforge/setup-pending.issue",
);

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> &'static str {
        FILES
            .iter()
            .find(|f| f.path.ends_with(name))
            .unwrap()
            .contents
    }

    /// The unit and the snippet are plain files; these are the facts in
    /// them the code relies on.
    #[test]
    fn the_files_name_the_paths_the_code_uses() {
        let setup = file(SETUP_SERVICE);
        assert!(
            setup.contains(&format!(
                "ExecStart={SETUP_BINARY} --unattended --recipe {WIZARD_RECIPE}\n"
            )),
            "{setup}"
        );
        assert!(setup.contains(&format!("ConditionPathExists={WIZARD_RECIPE}\n")));
        let unmark = setup
            .find(&format!("ExecStartPost=/bin/rm -f {}\n", ENABLE_WIZARD.0))
            .expect("setup ends the pending state");
        let disable = setup
            .find(&format!(
                "ExecStartPost=/bin/systemctl disable {SETUP_SERVICE}\n"
            ))
            .expect("setup disables itself");
        assert!(
            unmark < disable,
            "a power cut between must leave it enabled"
        );
        assert!(FILES.iter().any(|f| f.path == ENABLE_WIZARD.1));
        assert!(
            ENABLE_WIZARD.0.starts_with("/etc/issue.d/") && ENABLE_WIZARD.0.ends_with(".issue"),
            "agetty reads only *.issue there"
        );
        let hint = file("nasforge-setup.sh");
        assert!(
            hint.contains(&format!("[ -e {} ]", ENABLE_WIZARD.0)),
            "{hint}"
        );
        assert!(hint.contains(&format!("\tsudo {SETUP_BINARY}\n")), "{hint}");
    }

    #[test]
    fn the_alert_files_call_the_commands_that_exist() {
        let text = |path: &str| {
            ALERT_FILES
                .iter()
                .find(|f| f.path == path)
                .unwrap()
                .contents
        };
        assert!(
            text(crate::paths::MDADM_EVENT)
                .contains(&format!("exec {SETUP_BINARY} alert --mdadm \"$@\"\n"))
        );
        assert!(
            text(crate::paths::SMARTD_EVENT)
                .contains(&format!("exec {SETUP_BINARY} alert --smartd\n"))
        );
        for (unit, args) in [
            ("nasforge-alert-retry", "--retry"),
            ("nasforge-check", "--check"),
        ] {
            let service = text(&format!("/etc/systemd/system/{unit}.service"));
            assert!(
                service.contains(&format!("ExecStart={SETUP_BINARY} alert {args}\n")),
                "{service}"
            );
            let timer = format!("/etc/systemd/system/{unit}.timer");
            assert!(text(&timer).contains("WantedBy=timers.target\n"));
            assert!(ALERT_TIMERS.iter().any(|(link, target)| *target == timer
                && link.ends_with(&format!("timers.target.wants/{unit}.timer"))));
        }
        assert!(
            text("/etc/systemd/system/nasforge-alert-retry.service").contains(&format!(
                "ConditionDirectoryNotEmpty={}\n",
                crate::paths::ALERTS_SPOOL
            ))
        );
    }

    /// No file installed for the wizard gives it a terminal of its own: it
    /// runs only from a login shell, through sudo.
    #[test]
    fn no_installed_unit_takes_a_terminal() {
        for f in FILES.iter().filter(|f| f.path.starts_with("/etc/systemd/")) {
            for key in ["TTYPath=", "StandardInput=tty", "StandardInput=tty-"] {
                assert!(!f.contents.contains(key), "{}: {key}", f.path);
            }
        }
    }
}
