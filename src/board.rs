//! What nasforge knows about each board. The facts live in `overlays/<board>.toml`
//! (data a contributor can correct without reading Rust): how it boots, and
//! the defaults `[kernel] build` uses for it. This module only loads them.

use crate::capability::Capability;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    Pi4,
    Cm4,
    Pi5,
    Cm5,
    Rock3a,
    Rock4b,
    Rock5b,
    #[serde(rename = "generic-arm64")]
    GenericArm64,
    #[serde(rename = "x86-64")]
    X86_64,
}

impl Model {
    pub const ALL: [Model; 9] = [
        Model::Pi4,
        Model::Cm4,
        Model::Pi5,
        Model::Cm5,
        Model::Rock3a,
        Model::Rock4b,
        Model::Rock5b,
        Model::GenericArm64,
        Model::X86_64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Model::Pi4 => "pi4",
            Model::Cm4 => "cm4",
            Model::Pi5 => "pi5",
            Model::Cm5 => "cm5",
            Model::Rock3a => "rock3a",
            Model::Rock4b => "rock4b",
            Model::Rock5b => "rock5b",
            Model::GenericArm64 => "generic-arm64",
            Model::X86_64 => "x86-64",
        }
    }

    fn data(self) -> &'static str {
        match self {
            Model::Pi4 => include_str!("../overlays/pi4.toml"),
            Model::Cm4 => include_str!("../overlays/cm4.toml"),
            Model::Pi5 => include_str!("../overlays/pi5.toml"),
            Model::Cm5 => include_str!("../overlays/cm5.toml"),
            Model::Rock3a => include_str!("../overlays/rock3a.toml"),
            Model::Rock4b => include_str!("../overlays/rock4b.toml"),
            Model::Rock5b => include_str!("../overlays/rock5b.toml"),
            Model::GenericArm64 => include_str!("../overlays/generic-arm64.toml"),
            Model::X86_64 => include_str!("../overlays/x86-64.toml"),
        }
    }

    pub fn info(self) -> BoardInfo {
        toml::from_str(self.data())
            .unwrap_or_else(|e| panic!("overlays/{}.toml is invalid: {e}", self.name()))
    }

    /// The Raspberry Pi boards, whose config.txt sections `inspect` reports.
    pub fn raspberry_pis() -> impl Iterator<Item = Model> {
        Model::ALL
            .into_iter()
            .filter(|m| m.info().family == Family::Rpi)
    }
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a board boots, which decides where its settings and kernel live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Raspberry Pi firmware: FAT boot partition with config.txt and cmdline.txt.
    Rpi,
    /// Armbian: U-Boot, /boot/armbianEnv.txt on the ext4 root.
    Armbian,
    /// Nothing board-specific is touched.
    Generic,
    /// A PC's UEFI firmware: an EFI system partition holding the boot loader,
    /// which loads the kernel from the ext4 root.
    Uefi,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardInfo {
    pub family: Family,
    pub description: String,
    /// The Debian architecture of the programs the board runs.
    #[serde(default = "arm64")]
    pub arch: String,
    /// config.txt conditional filters that select this board, besides `[all]`.
    #[serde(default)]
    pub filters: Vec<String>,
    /// The config.txt section nasforge adds this board's lines to.
    pub section: Option<String>,
    #[serde(default)]
    pub kernels: Vec<DefaultKernel>,
    /// config.txt lines every NAS on this board needs.
    #[serde(default)]
    pub config: Vec<String>,
    /// Template for `[board] pcie_gen`; boards without it reject the option.
    pub pcie_gen: Option<String>,
    /// Armbian device-tree overlays a NAS on this board needs; each entry
    /// lists alternative names (mainline and vendor kernels differ), and the
    /// first one the image carries is used.
    #[serde(default)]
    pub overlays: Vec<Vec<String>>,
    /// Extra module alternatives the `sata` capability needs on this board.
    #[serde(default)]
    pub sata_modules: Vec<Vec<String>>,
    /// What `inspect` reports for the kernel this board boots.
    #[serde(default = "single_board_capabilities")]
    pub capabilities: Vec<Capability>,
    /// The device tree the board's firmware loads, as alternative names
    /// (relative to the boot partition on a Raspberry Pi, to /boot/dtb on
    /// Armbian); empty where the firmware needs none (a PC).
    #[serde(default)]
    pub device_trees: Vec<String>,
    /// What the board's storage path and network need of the kernel,
    /// beyond the capabilities.
    #[serde(default)]
    pub drivers: Vec<BoardDriver>,
    /// What `[kernel] build` uses for this board when the recipe does not
    /// say, and what the "kernel lacks sata/md" error offers as the fix.
    #[serde(default)]
    pub kernel: BoardKernel,
}

fn arm64() -> String {
    "arm64".into()
}

fn single_board_capabilities() -> Vec<Capability> {
    Capability::ALL.to_vec()
}

/// A board's `[kernel]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardKernel {
    pub defconfig: Option<String>,
    /// Why there is no defconfig for this board.
    pub unverified: Option<String>,
    #[serde(default)]
    pub fragments: Vec<String>,
    /// A source URL pattern for the remedy text.
    pub source: Option<String>,
    /// Which tree that is, in words.
    pub tree: Option<String>,
}

/// One driver a board needs: its module names, or for a kernel known only
/// by its config file its Kconfig symbols, each list alternatives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardDriver {
    /// What it drives, for messages ("its Ethernet (GENET)").
    pub what: String,
    pub modules: Vec<String>,
    pub symbols: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultKernel {
    pub image: String,
    pub module_suffix: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_board_data_file_loads() {
        for m in Model::ALL {
            let info = m.info();
            assert!(!info.description.is_empty());
            if info.family == Family::Rpi {
                assert!(info.section.is_some(), "{m} needs a config.txt section");
                assert!(
                    !info.kernels.is_empty(),
                    "{m} needs its default kernel images"
                );
            }
        }
    }

    #[test]
    fn every_board_has_kernel_data_and_named_fragments_exist() {
        for m in Model::ALL {
            let b = m.info().kernel;
            assert!(
                b.defconfig.is_some() != b.unverified.is_some(),
                "{m}: exactly one of defconfig/unverified"
            );
            for f in &b.fragments {
                assert!(
                    crate::kernel::fragments::bundled(f).is_some(),
                    "{m}: unknown fragment {f}"
                );
            }
        }
        assert_eq!(
            Model::Pi5.info().kernel.defconfig.as_deref(),
            Some("bcm2712_defconfig")
        );
        assert_eq!(
            Model::Cm4.info().kernel.defconfig.as_deref(),
            Some("bcm2711_defconfig")
        );
    }

    #[test]
    fn names_round_trip_through_serde() {
        for m in Model::ALL {
            let parsed: Model =
                serde_json::from_value(serde_json::Value::String(m.name().into())).unwrap();
            assert_eq!(parsed, m);
        }
    }
}
