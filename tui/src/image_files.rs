//! Files the image builder installs so that a recipe with
//! `storage.mode = "wizard"` gets the wizard: on tty1 at boot, and as a
//! one-line hint for anyone who logs in over SSH. The texts live in
//! `tui/files/`; the builder links this library and copies them from here.

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

/// The unit that shows the wizard on tty1.
pub const WIZARD_SERVICE: &str = "nasforge-wizard.service";

pub struct ImageFile {
    pub path: &'static str,
    pub contents: &'static str,
    pub mode: u32,
}

/// Installed for wizard mode (harmless otherwise: the setup unit only runs
/// with a wizard recipe, and the hint only shows while the wizard unit is
/// enabled).
pub const FILES: [ImageFile; 3] = [
    ImageFile {
        path: "/etc/systemd/system/nasforge-wizard.service",
        contents: include_str!("../files/nasforge-wizard.service"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/systemd/system/nasforge-setup.service",
        contents: include_str!("../files/nasforge-setup.service"),
        mode: 0o644,
    },
    ImageFile {
        path: "/etc/profile.d/nasforge-setup.sh",
        contents: include_str!("../files/nasforge-setup-hint.sh"),
        mode: 0o644,
    },
];

/// The symlink that enables the wizard at boot, as `systemctl enable`
/// makes it: (link, target). Only for wizard mode; the setup unit is
/// enabled by the wizard when the user starts setup.
pub const ENABLE_WIZARD: (&str, &str) = (
    "/etc/systemd/system/multi-user.target.wants/nasforge-wizard.service",
    "/etc/systemd/system/nasforge-wizard.service",
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

    /// The unit texts are plain files; these are the facts in them the
    /// code relies on.
    #[test]
    fn the_units_name_the_paths_the_code_uses() {
        let setup = file(SETUP_SERVICE);
        assert!(
            setup.contains(&format!(
                "ExecStart={SETUP_BINARY} --unattended --recipe {WIZARD_RECIPE}\n"
            )),
            "{setup}"
        );
        assert!(setup.contains(&format!("ConditionPathExists={WIZARD_RECIPE}\n")));
        assert!(setup.contains(&format!(
            "ExecStartPost=/bin/systemctl disable {SETUP_SERVICE} {WIZARD_SERVICE}\n"
        )));
        let wizard = file(WIZARD_SERVICE);
        assert!(
            wizard.contains(&format!("ExecStart={SETUP_BINARY}\n")),
            "{wizard}"
        );
        assert!(wizard.contains("TTYPath=/dev/tty1\n"));
        assert_eq!(ENABLE_WIZARD.1, FILES[0].path);
        assert!(ENABLE_WIZARD.0.ends_with(WIZARD_SERVICE));
        let hint = file("nasforge-setup.sh");
        assert!(
            hint.contains(&format!("[ -e {} ]", ENABLE_WIZARD.0)),
            "{hint}"
        );
    }

    #[test]
    fn the_login_hint_is_one_line_and_only_while_the_wizard_is_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("hint.sh");
        let enabled = dir.path().join("enabled");
        let text = file("nasforge-setup.sh").replace(ENABLE_WIZARD.0, enabled.to_str().unwrap());
        std::fs::write(&script, text).unwrap();
        let login = || {
            let out = std::process::Command::new("sh")
                .arg("-ic")
                .arg(format!(". {}", script.display()))
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(login(), "", "nothing once the wizard is disabled");
        std::fs::write(&enabled, "").unwrap();
        let shown = login();
        assert_eq!(shown.lines().count(), 1, "{shown}");
        assert!(shown.contains("sudo nasforge-setup"), "{shown}");
    }
}
