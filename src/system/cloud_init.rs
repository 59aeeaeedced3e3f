//! cloud-init on the image (Raspberry Pi OS since trixie): Raspberry Pi
//! Imager's OS customisation writes `user-data` onto the boot partition
//! after nasforge built the image, with a `hostname:` and a `user:` of its
//! own. cloud-init merges user-data over the system's configuration, so a
//! setting in /etc/cloud cannot outvote it; but the lists of modules that
//! run are the system's. nasforge's drop-in runs the image's own lists
//! without the modules that would change what the recipe set: the
//! hostname and /etc/hosts, the users (a second account beside the
//! recipe's, or its password changed behind Samba's back), and the
//! timezone when the recipe names one. Imager's other settings (Wi-Fi,
//! keyboard, SSH) still apply, and the first boot says what was left out.

pub const CLOUD_CFG: &str = "/etc/cloud/cloud.cfg";
/// Read by cloud-init after cloud.cfg.
pub const DROP_IN: &str = "/etc/cloud/cloud.cfg.d/99-nasforge.cfg";

/// Modules that would change the hostname, /etc/hosts or the accounts.
const IDENTITY: &[&str] = &[
    "set_hostname",
    "update_hostname",
    "update_etc_hosts",
    "users_groups",
];

/// The drop-in for an image whose cloud.cfg is `cloud_cfg`; warnings when
/// its module lists cannot be read (then only the hostname is kept).
pub fn drop_in(cloud_cfg: &str, recipe_timezone: bool) -> (String, Vec<String>) {
    let mut text = String::from(
        "# Written by nasforge: the recipe sets this NAS's hostname and users.\n\
         # user-data on the boot partition (Raspberry Pi Imager's OS customisation)\n\
         # runs without cloud-init's modules that would change them; see\n\
         # nasforge-setup.log on the boot partition after the first boot.\n\
         preserve_hostname: true\n\
         manage_etc_hosts: false\n",
    );
    let mut warnings = Vec::new();
    let mut left_out: Vec<&str> = IDENTITY.to_vec();
    if recipe_timezone {
        left_out.push("timezone");
    }
    for key in [
        "cloud_init_modules",
        "cloud_config_modules",
        "cloud_final_modules",
    ] {
        let Some(items) = module_list(cloud_cfg, key) else {
            if key == "cloud_init_modules" {
                warnings.push(format!(
                    "could not read cloud-init's `{key}` from {CLOUD_CFG}: user-data on the boot partition (Raspberry Pi Imager's OS customisation) could add users beside the recipe's; write the image without Imager's customisation"
                ));
            }
            continue;
        };
        let kept: Vec<&String> = items
            .iter()
            .filter(|item| !left_out.contains(&module_name(item).as_str()))
            .collect();
        if kept.len() == items.len() {
            continue;
        }
        text.push_str(&format!("{key}:\n"));
        for item in kept {
            text.push_str(&format!(" - {item}\n"));
        }
    }
    (text, warnings)
}

/// The items of a top-level YAML block list in cloud.cfg, as written
/// (`migrator`, `[ssh, always]`), or None when the key is not there.
fn module_list(cloud_cfg: &str, key: &str) -> Option<Vec<String>> {
    let mut lines = cloud_cfg.lines();
    lines.find(|l| l.trim_end() == format!("{key}:"))?;
    let mut items = Vec::new();
    for line in lines {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.len() == trimmed.len() {
            break;
        }
        let item = trimmed.strip_prefix("- ")?.trim();
        items.push(item.to_string());
    }
    (!items.is_empty()).then_some(items)
}

/// A list item's module name, as cloud-init normalises it (`users-groups`
/// and `users_groups` are one module; `[ssh, always]` is `ssh`).
fn module_name(item: &str) -> String {
    item.trim_start_matches('[')
        .split(',')
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "users:\n   - default\n\ncloud_init_modules:\n - migrator\n - seed_random\n - bootcmd\n - write-files\n - set_hostname\n - update_hostname\n - update_etc_hosts\n - ca-certs\n - users-groups\n - [ssh, always]\n\n# The modules that run in the 'config' stage\ncloud_config_modules:\n - locale\n - timezone\n - runcmd\n\ncloud_final_modules:\n - scripts-user\n\nsystem_info:\n   distro: debian\n";

    #[test]
    fn the_images_own_lists_run_without_the_modules_that_change_the_recipes_settings() {
        let (text, warnings) = drop_in(DEBIAN, false);
        assert!(warnings.is_empty());
        assert!(text.contains(
            "cloud_init_modules:\n - migrator\n - seed_random\n - bootcmd\n - write-files\n - ca-certs\n - [ssh, always]\n"
        ), "{text}");
        assert!(!text.contains("cloud_config_modules"), "untouched: {text}");
        assert!(text.contains("preserve_hostname: true\n"));

        let (text, _) = drop_in(DEBIAN, true);
        assert!(
            text.contains("cloud_config_modules:\n - locale\n - runcmd\n"),
            "{text}"
        );
    }

    #[test]
    fn an_unreadable_list_keeps_the_hostname_and_says_what_is_not_covered() {
        let (text, warnings) = drop_in("users:\n  - default\n", false);
        assert!(text.contains("preserve_hostname: true"));
        assert!(!text.contains("cloud_init_modules"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("Imager"), "{warnings:?}");
    }
}
