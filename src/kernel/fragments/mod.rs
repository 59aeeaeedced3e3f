//! Kconfig fragments (`kernel-configs/*.config`): parsed, merged into a base
//! `.config` the way `scripts/kconfig/merge_config.sh` merges (a later
//! setting of a symbol replaces the earlier one, base included), and checked
//! after `make olddefconfig`: every value a fragment asked for must be in the
//! final `.config`, and each one Kconfig dropped is reported with the
//! dependency that was not met.
//!
//! Pure: text in, text and reports out.

mod merge;
mod verify;

pub use merge::{Merged, Redefinition, Requested, merge};
pub use verify::{Dropped, UnmetDep, Why, report, verify};

use anyhow::{Result, bail};

/// The fragments that ship with nasforge, by the name a recipe uses.
pub const BUNDLED: &[(&str, &str)] = &[
    ("sata", include_str!("../../../kernel-configs/sata.config")),
    (
        "md-raid",
        include_str!("../../../kernel-configs/md-raid.config"),
    ),
    ("nas", include_str!("../../../kernel-configs/nas.config")),
    (
        "rockchip-sata",
        include_str!("../../../kernel-configs/rockchip-sata.config"),
    ),
    (
        "qemu-virt",
        include_str!("../../../kernel-configs/qemu-virt.config"),
    ),
    ("zfs", include_str!("../../../kernel-configs/zfs.config")),
];

pub fn bundled(name: &str) -> Option<&'static str> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// One `CONFIG_X=v` or `# CONFIG_X is not set` line of a fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Without the `CONFIG_` prefix.
    pub symbol: String,
    /// `y`, `m`, `n` (for "is not set"), a number or a quoted string.
    pub value: String,
    pub line: usize,
}

impl Setting {
    /// The line as it appears in a `.config`.
    pub fn render(&self) -> String {
        if self.value == "n" {
            format!("# CONFIG_{} is not set", self.symbol)
        } else {
            format!("CONFIG_{}={}", self.symbol, self.value)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// `sata.config`, or the path a recipe gave.
    pub name: String,
    pub settings: Vec<Setting>,
}

fn valid_symbol(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_value(v: &str) -> bool {
    matches!(v, "y" | "m" | "n")
        || (v.len() >= 2 && v.starts_with('"') && v.ends_with('"'))
        || v.parse::<i64>().is_ok()
        || v.strip_prefix("0x")
            .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
}

impl Fragment {
    /// Parses fragment text. Anything that is neither a setting, a comment
    /// nor blank is an error naming the line, as is a symbol set twice.
    pub fn parse(name: &str, text: &str) -> Result<Fragment> {
        let mut settings: Vec<Setting> = Vec::new();
        let mut errors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let l = raw.trim();
            let parsed = if let Some(sym) = l
                .strip_prefix("# CONFIG_")
                .and_then(|r| r.strip_suffix(" is not set"))
            {
                Some((sym, "n"))
            } else if l.is_empty() || l.starts_with('#') {
                None
            } else if let Some((k, v)) = l.strip_prefix("CONFIG_").and_then(|r| r.split_once('=')) {
                Some((k, v))
            } else {
                errors.push(format!("{name}:{n}: `{l}` is not a Kconfig setting (expected CONFIG_NAME=value or `# CONFIG_NAME is not set`)"));
                None
            };
            let Some((sym, value)) = parsed else { continue };
            if !valid_symbol(sym) {
                errors.push(format!("{name}:{n}: `{sym}` is not a Kconfig symbol name"));
                continue;
            }
            if !valid_value(value) {
                errors.push(format!("{name}:{n}: `{value}` is not a Kconfig value (y, m, a number, 0x-hex or a \"quoted string\")"));
                continue;
            }
            if let Some(prev) = settings.iter().find(|s| s.symbol == sym) {
                errors.push(format!(
                    "{name}:{n}: CONFIG_{sym} is already set on line {}",
                    prev.line
                ));
                continue;
            }
            settings.push(Setting {
                symbol: sym.to_string(),
                value: value.to_string(),
                line: n,
            });
        }
        if !errors.is_empty() {
            bail!("{}", errors.join("\n"));
        }
        if settings.is_empty() {
            bail!("{name} sets no options");
        }
        Ok(Fragment {
            name: name.to_string(),
            settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::kconfig::{Config, Kconfig};
    use std::collections::BTreeMap;

    #[test]
    fn bundled_fragments_parse_and_say_why_for_every_option() {
        for (name, text) in BUNDLED {
            let f = Fragment::parse(name, text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let lines: Vec<&str> = text.lines().collect();
            for s in &f.settings {
                // The line above each setting is a comment (its reason), or a
                // setting that shares the comment above it.
                let above = lines[s.line - 2].trim();
                assert!(
                    above.starts_with('#') || above.starts_with("CONFIG_"),
                    "{name}:{}: CONFIG_{} has no comment saying why",
                    s.line,
                    s.symbol
                );
            }
            // merge_config.sh greps every line for CONFIG_ names, comments
            // included, so prose must not name them.
            for (i, l) in lines.iter().enumerate() {
                if l.starts_with('#') && l.contains("CONFIG_") && !l.ends_with("is not set") {
                    panic!(
                        "{name}:{}: a comment names a CONFIG_ symbol, which merge_config.sh would misread",
                        i + 1
                    );
                }
            }
        }
    }

    #[test]
    fn the_production_fragments_carry_what_the_capability_check_looks_for() {
        let all: Vec<String> = ["sata", "md-raid", "nas"]
            .iter()
            .flat_map(|n| Fragment::parse(n, bundled(n).unwrap()).unwrap().settings)
            .map(|s| format!("CONFIG_{}", s.symbol))
            .collect();
        for cap in crate::kernel::Capability::ALL {
            for group in cap.modules() {
                let syms: Vec<&str> = group
                    .iter()
                    .filter_map(|m| crate::kernel::caps::config_symbol(m))
                    .collect();
                assert!(
                    syms.iter().any(|s| all.iter().any(|a| a == s)),
                    "{cap}: none of {syms:?} is in sata/md-raid/nas"
                );
            }
        }
    }

    #[test]
    fn parse_errors_name_the_line() {
        let e = Fragment::parse(
            "x.config",
            "# ok\nCONFIG_A=y\nATA=y\nCONFIG_B=maybe\nCONFIG_A=m\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("x.config:3: `ATA=y` is not a Kconfig setting"),
            "{e}"
        );
        assert!(
            e.contains("x.config:4: `maybe` is not a Kconfig value"),
            "{e}"
        );
        assert!(
            e.contains("x.config:5: CONFIG_A is already set on line 2"),
            "{e}"
        );
        let f = Fragment::parse(
            "y",
            "# CONFIG_X is not set\nCONFIG_S=\"a b\"\nCONFIG_H=0x1f\nCONFIG_N=-3\n",
        )
        .unwrap();
        assert_eq!(f.settings[0].value, "n");
        assert_eq!(f.settings[0].render(), "# CONFIG_X is not set");
        assert_eq!(f.settings[1].render(), "CONFIG_S=\"a b\"");
    }

    #[test]
    fn merge_replaces_earlier_values_like_merge_config_sh() {
        let base = "CONFIG_A=y\n# CONFIG_ATA is not set\nCONFIG_ATA_X=y\nCONFIG_C=m\n";
        let f1 = Fragment::parse("sata.config", "CONFIG_ATA=m\nCONFIG_C=m\n").unwrap();
        let f2 = Fragment::parse("qemu-virt.config", "CONFIG_ATA=y\n").unwrap();
        let m = merge(base, &[f1, f2]);
        // ATA_X is another symbol: a prefix match must not remove it.
        assert_eq!(
            m.text,
            "CONFIG_A=y\nCONFIG_ATA_X=y\nCONFIG_C=m\nCONFIG_ATA=y\n"
        );
        assert_eq!(
            m.requested["ATA"],
            Requested {
                value: "y".into(),
                fragment: "qemu-virt.config".into(),
                line: 1
            }
        );
        assert_eq!(m.redefinitions.len(), 2, "{:?}", m.redefinitions);
        assert_eq!(m.redefinitions[0].previous_from, None);
        assert_eq!(
            m.redefinitions[1].previous_from.as_deref(),
            Some("sata.config")
        );
    }

    fn synthetic_tree() -> Kconfig {
        let files: BTreeMap<&str, &str> = BTreeMap::from([
            (
                "Kconfig",
                "source \"drivers/ata/Kconfig\"\nsource \"drivers/md/Kconfig\"\nconfig PCI\n\tbool \"PCI\"\nconfig BLOCK\n\tbool \"block\"\n",
            ),
            (
                "drivers/ata/Kconfig",
                "menuconfig ATA\n\ttristate \"ATA\"\n\tdepends on BLOCK\n\tselect SCSI\nif ATA\nconfig SATA_AHCI\n\ttristate \"AHCI\"\n\tdepends on PCI\n\tselect SATA_HOST\nconfig SATA_HOST\n\tbool\nendif\nconfig SCSI\n\ttristate \"SCSI\"\n",
            ),
            (
                "drivers/md/Kconfig",
                "menuconfig MD\n\tbool \"md\"\nif MD\nconfig BLK_DEV_MD\n\ttristate \"md core\"\nconfig MD_RAID456\n\ttristate \"raid456\"\n\tdepends on BLK_DEV_MD\nendif\n",
            ),
        ]);
        Kconfig::load(
            &|p: &str| files.get(p).map(|s| s.to_string()),
            "Kconfig",
            "arm64",
        )
    }

    #[test]
    fn a_fragment_option_whose_dependency_is_off_is_reported_by_name() {
        let k = synthetic_tree();
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);
        let frag = Fragment::parse(
            "sata.config",
            "CONFIG_ATA=m\nCONFIG_SATA_AHCI=m\nCONFIG_MD_RAID456=m\nCONFIG_NOT_A_THING=y\n",
        )
        .unwrap();
        let merged = merge("CONFIG_BLOCK=y\n# CONFIG_PCI is not set\n", &[frag]);
        // What olddefconfig leaves: AHCI dropped (no PCI), RAID456 dropped
        // (no BLK_DEV_MD, and MD off around it), the unknown one ignored.
        let after = Config::parse(
            "CONFIG_BLOCK=y\n# CONFIG_PCI is not set\nCONFIG_ATA=m\nCONFIG_SCSI=m\n# CONFIG_MD is not set\n",
        );
        let dropped = verify(&merged.requested, &after, &k);
        let names: Vec<&str> = dropped.iter().map(|d| d.symbol.as_str()).collect();
        assert_eq!(names, vec!["MD_RAID456", "NOT_A_THING", "SATA_AHCI"]);
        let text = report(&dropped);
        assert!(
            text.starts_with("3 kernel options from the fragments did not survive"),
            "{text}"
        );
        assert!(
            text.contains("CONFIG_SATA_AHCI=m (sata.config:2) was dropped (final value: off): it depends on PCI [its own `depends on`] (PCI=n)"),
            "{text}"
        );
        assert!(text.contains("CONFIG_MD_RAID456=m (sata.config:3) was dropped (final value: off): it depends on MD [inside `if` at drivers/md/Kconfig:3] (MD=n) and BLK_DEV_MD [its own `depends on`] (BLK_DEV_MD=n)"), "{text}");
        assert!(
            text.contains("CONFIG_NOT_A_THING=y (sata.config:4) does not exist in this kernel"),
            "{text}"
        );
    }

    #[test]
    fn a_tristate_asked_for_y_under_a_module_dependency_names_it() {
        let k = synthetic_tree();
        let frag = Fragment::parse("f", "CONFIG_SATA_AHCI=y\n").unwrap();
        let merged = merge("", &[frag]);
        let after =
            Config::parse("CONFIG_BLOCK=y\nCONFIG_PCI=y\nCONFIG_ATA=m\nCONFIG_SATA_AHCI=m\n");
        let d = verify(&merged.requested, &after, &k);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].to_string()
                .contains("was dropped (final value: m): it depends on ATA [inside `if`"),
            "{}",
            d[0]
        );
    }

    #[test]
    fn selected_and_promptless_options_are_explained() {
        let k = synthetic_tree();
        let frag = Fragment::parse("f", "# CONFIG_SCSI is not set\nCONFIG_SATA_HOST=y\n").unwrap();
        let merged = merge("", &[frag]);
        let after = Config::parse("CONFIG_BLOCK=y\nCONFIG_ATA=y\nCONFIG_SCSI=y\n");
        let d = verify(&merged.requested, &after, &k);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[1].to_string().contains("CONFIG_SCSI is not set (f:1) was overridden (final value: y): it is selected by ATA=y"), "{}", d[1]);
        assert!(
            d[0].to_string()
                .contains("CONFIG_SATA_HOST=y (f:2) cannot be set directly"),
            "{}",
            d[0]
        );
        assert!(d[0].to_string().contains("from SATA_AHCI"), "{}", d[0]);
    }

    #[test]
    fn values_that_made_it_are_not_reported() {
        let k = synthetic_tree();
        let frag = Fragment::parse("f", "CONFIG_ATA=m\n# CONFIG_PCI is not set\n").unwrap();
        let merged = merge("", &[frag]);
        // An unset option may be absent from the final .config altogether.
        let after = Config::parse("CONFIG_BLOCK=y\nCONFIG_ATA=m\n");
        assert!(verify(&merged.requested, &after, &k).is_empty());
    }
}
