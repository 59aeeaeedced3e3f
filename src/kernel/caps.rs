//! What a kernel can do, read from the files every Debian-style kernel ships:
//! `modules.builtin` (drivers compiled in), `modules.dep` (drivers present as
//! loadable modules) and, where present, `/boot/config-<version>`.
//! Pure: it takes the files' text, so tests feed it fixture strings.

use crate::capability::Capability;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The Kconfig symbol behind each module, for kernels whose only record is
/// their config file.
pub fn config_symbol(module: &str) -> Option<&'static str> {
    Some(match module {
        "libata" => "CONFIG_ATA",
        "ahci" => "CONFIG_SATA_AHCI",
        "ahci_platform" => "CONFIG_SATA_AHCI_PLATFORM",
        "ahci_dwc" => "CONFIG_AHCI_DWC",
        "md_mod" => "CONFIG_BLK_DEV_MD",
        "raid0" => "CONFIG_MD_RAID0",
        "raid1" => "CONFIG_MD_RAID1",
        "raid10" => "CONFIG_MD_RAID10",
        "raid456" => "CONFIG_MD_RAID456",
        "nfsd" => "CONFIG_NFSD",
        "uas" => "CONFIG_USB_UAS",
        "mpt3sas" => "CONFIG_SCSI_MPT3SAS",
        "megaraid_sas" => "CONFIG_MEGARAID_SAS",
        "mptsas" => "CONFIG_FUSION_SAS",
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Presence {
    /// Compiled into the kernel (`=y`).
    Builtin,
    /// A loadable module (`=m`).
    Module,
    Absent,
}

impl Presence {
    pub fn symbol(self) -> &'static str {
        match self {
            Presence::Builtin => "y",
            Presence::Module => "m",
            Presence::Absent => "-",
        }
    }
}

/// The text of the files that describe one installed kernel.
#[derive(Debug, Default, Clone)]
pub struct KernelFiles {
    pub version: String,
    pub modules_builtin: Option<String>,
    pub modules_dep: Option<String>,
    pub config: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelReport {
    pub version: String,
    /// Where the answers came from: "modules" or "config".
    pub evidence: &'static str,
    pub modules: BTreeMap<String, Presence>,
    pub capabilities: BTreeMap<Capability, CapabilityReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CapabilityReport {
    pub ok: bool,
    /// The alternatives that are missing, e.g. `raid456` or `ahci_platform|ahci_dwc`.
    pub missing: Vec<String>,
}

/// `kernel/drivers/ata/ahci.ko.xz` → `ahci`; `md-mod` → `md_mod` (modprobe
/// treats `-` and `_` alike).
fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.split(".ko").next().unwrap_or(base);
    base.replace('-', "_")
}

fn config_values(config: &str) -> BTreeMap<&str, &str> {
    config
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, _)| k.starts_with("CONFIG_"))
        .collect()
}

/// Where each driver is, read from the modules files or else the config.
struct Found<'a> {
    builtin: BTreeSet<String>,
    loadable: BTreeSet<String>,
    config: BTreeMap<&'a str, &'a str>,
    from_modules: bool,
}

impl Found<'_> {
    fn read(files: &KernelFiles) -> Found<'_> {
        let mut builtin = BTreeSet::new();
        let mut loadable = BTreeSet::new();
        if let Some(b) = &files.modules_builtin {
            builtin.extend(
                b.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(module_name),
            );
        }
        if let Some(d) = &files.modules_dep {
            loadable.extend(
                d.lines()
                    .filter_map(|l| l.split_once(':'))
                    .map(|(m, _)| module_name(m)),
            );
        }
        Found {
            builtin,
            loadable,
            config: files
                .config
                .as_deref()
                .map(config_values)
                .unwrap_or_default(),
            from_modules: files.modules_builtin.is_some() || files.modules_dep.is_some(),
        }
    }

    fn presence(&self, module: &str) -> Presence {
        if self.from_modules {
            if self.builtin.contains(module) {
                Presence::Builtin
            } else if self.loadable.contains(module) {
                Presence::Module
            } else {
                Presence::Absent
            }
        } else {
            match config_symbol(module).and_then(|s| self.config.get(s)) {
                Some(&"y") => Presence::Builtin,
                Some(&"m") => Presence::Module,
                _ => Presence::Absent,
            }
        }
    }
}

impl KernelFiles {
    /// Whether any of `modules` is built in or loadable, or any of `symbols`
    /// is `y` or `m` in the kernel's config. Both are asked because a `bool`
    /// driver can be built in without a line in modules.builtin: Debian
    /// trixie's 6.12.117+deb13-arm64 has CONFIG_PCIE_ROCKCHIP_DW_HOST=y and
    /// no pcie-dw-rockchip there, so its config symbol is its evidence.
    pub fn has_driver(&self, modules: &[String], symbols: &[String]) -> bool {
        let found = Found::read(self);
        let in_modules = modules.iter().any(|m| {
            let m = module_name(m);
            found.builtin.contains(&m) || found.loadable.contains(&m)
        });
        in_modules
            || symbols
                .iter()
                .any(|s| matches!(found.config.get(s.as_str()), Some(&"y" | &"m")))
    }

    /// `extra` adds board-specific module alternatives to a capability (Rockchip's
    /// native SATA needs `ahci_platform` or `ahci_dwc`).
    pub fn report(&self, extra: &[(Capability, Vec<String>)]) -> KernelReport {
        let found = Found::read(self);
        let mut modules = BTreeMap::new();
        let mut capabilities = BTreeMap::new();
        for cap in Capability::ALL
            .into_iter()
            .chain([Capability::Sas, Capability::Zfs])
        {
            let mut groups: Vec<Vec<String>> = cap
                .modules()
                .into_iter()
                .map(|g| g.into_iter().map(String::from).collect())
                .collect();
            groups.extend(
                extra
                    .iter()
                    .filter(|(c, _)| *c == cap)
                    .map(|(_, g)| g.clone()),
            );
            let mut missing = Vec::new();
            for group in groups {
                let ok = group.iter().any(|m| found.presence(m) != Presence::Absent);
                for m in &group {
                    modules.insert(m.clone(), found.presence(m));
                }
                if !ok {
                    missing.push(group.join("|"));
                }
            }
            capabilities.insert(
                cap,
                CapabilityReport {
                    ok: missing.is_empty(),
                    missing,
                },
            );
        }
        KernelReport {
            version: self.version.clone(),
            evidence: if found.from_modules {
                "modules"
            } else {
                "config"
            },
            modules,
            capabilities,
        }
    }
}

impl KernelReport {
    /// Each required capability this kernel lacks, with the modules behind
    /// it: `md (missing raid456)`.
    pub fn missing(&self, required: &[Capability]) -> Vec<String> {
        required
            .iter()
            .filter(|c| !self.capabilities[c].ok)
            .map(|c| format!("{c} (missing {})", self.capabilities[c].missing.join(", ")))
            .collect()
    }

    /// `sata ✓ (ahci=m, libata=m)`-style summary of one capability.
    pub fn describe(&self, cap: Capability, extra: &[(Capability, Vec<String>)]) -> String {
        let c = &self.capabilities[&cap];
        let mut names: Vec<String> = cap
            .modules()
            .into_iter()
            .flatten()
            .map(String::from)
            .collect();
        names.extend(
            extra
                .iter()
                .filter(|(x, _)| *x == cap)
                .flat_map(|(_, g)| g.iter().cloned()),
        );
        let detail: Vec<String> = names
            .iter()
            .map(|m| {
                format!(
                    "{}={}",
                    m,
                    self.modules
                        .get(m)
                        .copied()
                        .unwrap_or(Presence::Absent)
                        .symbol()
                )
            })
            .collect();
        let mark = if c.ok { "✓" } else { "✗" };
        format!("{cap} {mark} ({})", detail.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP_RPI: &str = "kernel/drivers/ata/libata.ko.xz:\nkernel/drivers/ata/ahci.ko.xz: kernel/drivers/ata/libahci.ko.xz kernel/drivers/ata/libata.ko.xz\nkernel/drivers/md/raid0.ko.xz: kernel/drivers/md/md-mod.ko.xz\nkernel/drivers/md/raid1.ko.xz:\nkernel/drivers/md/raid10.ko.xz:\nkernel/drivers/md/raid456.ko.xz: kernel/crypto/async_tx/async_pq.ko.xz\nkernel/fs/nfsd/nfsd.ko.xz:\n";

    fn files(builtin: Option<&str>, dep: Option<&str>, config: Option<&str>) -> KernelFiles {
        KernelFiles {
            version: "6.6.51+rpt-rpi-2712".into(),
            modules_builtin: builtin.map(String::from),
            modules_dep: dep.map(String::from),
            config: config.map(String::from),
        }
    }

    #[test]
    fn modules_in_modules_dep_count_as_loadable() {
        let r = files(Some("kernel/drivers/md/md-mod.ko\n"), Some(DEP_RPI), None).report(&[]);
        assert_eq!(r.evidence, "modules");
        assert_eq!(r.modules["ahci"], Presence::Module);
        assert_eq!(r.modules["md_mod"], Presence::Builtin);
        assert!(r.capabilities[&Capability::Sata].ok);
        assert!(r.capabilities[&Capability::Md].ok);
        assert!(!r.capabilities[&Capability::Uas].ok);
        assert_eq!(
            r.describe(Capability::Sata, &[]),
            "sata ✓ (libata=m, ahci=m)"
        );
    }

    #[test]
    fn builtin_drivers_count_as_present() {
        let builtin = "kernel/drivers/ata/libata.ko\nkernel/drivers/ata/ahci.ko\n";
        let r = files(Some(builtin), Some(""), None).report(&[]);
        assert_eq!(r.modules["libata"], Presence::Builtin);
        assert!(r.capabilities[&Capability::Sata].ok);
    }

    #[test]
    fn absent_drivers_are_named() {
        let dep = "kernel/drivers/md/md-mod.ko:\nkernel/drivers/md/raid1.ko:\n";
        let r = files(Some(""), Some(dep), None).report(&[]);
        assert_eq!(
            r.capabilities[&Capability::Sata].missing,
            vec!["libata", "ahci"]
        );
        assert_eq!(
            r.capabilities[&Capability::Md].missing,
            vec!["raid0", "raid10", "raid456"]
        );
    }

    #[test]
    fn a_bool_driver_missing_from_modules_builtin_is_found_by_its_config_symbol() {
        // Debian trixie's 6.12.117+deb13-arm64: CONFIG_PCIE_ROCKCHIP_DW_HOST=y
        // and no pcie-dw-rockchip line in modules.builtin.
        let builtin = "kernel/drivers/ata/libata.ko\n";
        let dep = "kernel/drivers/phy/rockchip/phy-rockchip-snps-pcie3.ko.xz:\n";
        let modules = vec!["pcie-dw-rockchip".to_string()];
        let symbols = vec!["CONFIG_PCIE_ROCKCHIP_DW_HOST".to_string()];
        let config = "CONFIG_PCIE_ROCKCHIP_DW=y\nCONFIG_PCIE_ROCKCHIP_DW_HOST=y\n";
        assert!(files(Some(builtin), Some(dep), Some(config)).has_driver(&modules, &symbols));
        let unset = "# CONFIG_PCIE_ROCKCHIP_DW_HOST is not set\n";
        assert!(!files(Some(builtin), Some(dep), Some(unset)).has_driver(&modules, &symbols));
        assert!(!files(Some(builtin), Some(dep), None).has_driver(&modules, &symbols));
        let pcie3 = vec!["phy-rockchip-snps-pcie3".to_string()];
        assert!(files(Some(builtin), Some(dep), None).has_driver(&pcie3, &[]));
    }

    #[test]
    fn config_only_kernels_are_read_from_their_config() {
        let config = "CONFIG_ATA=m\nCONFIG_SATA_AHCI=m\n# CONFIG_MD_RAID456 is not set\nCONFIG_BLK_DEV_MD=y\nCONFIG_MD_RAID0=m\nCONFIG_MD_RAID1=m\nCONFIG_MD_RAID10=m\n";
        let r = files(None, None, Some(config)).report(&[]);
        assert_eq!(r.evidence, "config");
        assert!(r.capabilities[&Capability::Sata].ok);
        assert_eq!(r.modules["md_mod"], Presence::Builtin);
        assert_eq!(r.capabilities[&Capability::Md].missing, vec!["raid456"]);
    }

    #[test]
    fn board_extras_add_alternatives() {
        let extra = vec![(
            Capability::Sata,
            vec!["ahci_platform".to_string(), "ahci_dwc".to_string()],
        )];
        let r = files(Some(""), Some(DEP_RPI), None).report(&extra);
        assert_eq!(
            r.capabilities[&Capability::Sata].missing,
            vec!["ahci_platform|ahci_dwc"]
        );
        let dep = format!("{DEP_RPI}kernel/drivers/ata/ahci_dwc.ko:\n");
        assert!(
            files(Some(""), Some(&dep), None)
                .report(&extra)
                .capabilities[&Capability::Sata]
                .ok
        );
    }

    // The lines for these drivers in Debian's linux-config-6.1 6.1.192-3
    // (config.amd64_none_amd64.xz and config.amd64_none_cloud-amd64.xz), the
    // configs of the kernels in Debian's `generic` and `genericcloud` images.
    const AMD64: &str = "CONFIG_MEGARAID_SAS=m\nCONFIG_SCSI_MPT3SAS=m\nCONFIG_ATA=m\nCONFIG_SATA_AHCI=m\nCONFIG_BLK_DEV_MD=m\nCONFIG_MD_RAID0=m\nCONFIG_MD_RAID1=m\nCONFIG_MD_RAID10=m\nCONFIG_MD_RAID456=m\nCONFIG_FUSION_SAS=m\nCONFIG_USB_UAS=m\nCONFIG_NFSD=m\n";
    const CLOUD_AMD64: &str = "# CONFIG_MEGARAID_SAS is not set\n# CONFIG_SCSI_MPT3SAS is not set\nCONFIG_ATA=m\n# CONFIG_SATA_AHCI is not set\nCONFIG_BLK_DEV_MD=m\nCONFIG_MD_RAID0=m\nCONFIG_MD_RAID1=m\nCONFIG_MD_RAID10=m\nCONFIG_MD_RAID456=m\nCONFIG_NFSD=m\n";

    #[test]
    fn a_pc_kernel_has_sas_hba_drivers_and_the_cloud_kernel_has_none() {
        let r = files(None, None, Some(AMD64)).report(&[]);
        assert!(r.capabilities[&Capability::Sata].ok);
        assert!(r.capabilities[&Capability::Sas].ok);
        assert_eq!(
            r.describe(Capability::Sas, &[]),
            "sas ✓ (mpt3sas=m, megaraid_sas=m, mptsas=m)"
        );
        let r = files(None, None, Some(CLOUD_AMD64)).report(&[]);
        assert!(r.capabilities[&Capability::Md].ok);
        assert_eq!(
            r.missing(&[Capability::Sata, Capability::Sas, Capability::Md]),
            vec![
                "sata (missing ahci)",
                "sas (missing mpt3sas|megaraid_sas|mptsas)"
            ]
        );
    }

    #[test]
    fn any_one_sas_driver_will_do() {
        let dep = "kernel/drivers/message/fusion/mptsas.ko.xz: kernel/drivers/message/fusion/mptscsih.ko.xz\n";
        let r = files(Some(""), Some(dep), None).report(&[]);
        assert!(r.capabilities[&Capability::Sas].ok);
        assert_eq!(r.modules["mpt3sas"], Presence::Absent);
    }
}
