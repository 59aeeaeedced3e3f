//! Whether the board can boot what the image holds: the device tree its
//! firmware loads, and the drivers its storage path and network need (the
//! board's facts, with their sources, are in `overlays/<board>.toml`). A
//! kernel file on the boot partition is not enough: Debian's bookworm
//! kernel ships no Pi 5 device tree, and trixie's has one without PCIe or
//! RP1, so a Pi 5 with either has no Ethernet, no USB and no SATA card.

use crate::board::{Family, Model};
use crate::image::Image;
use crate::manifest::Booted;
use anyhow::Result;

use super::KernelFiles;

/// Why `board` cannot boot the image as a NAS; empty when it can.
pub fn problems(
    image: &Image,
    board: Model,
    booted: &Booted,
    kernels: &[KernelFiles],
) -> Result<Vec<String>> {
    let info = board.info();
    let mut problems = Vec::new();
    if !info.device_trees.is_empty()
        && !has_device_tree(image, info.family, booted, &info.device_trees)?
    {
        problems.push(format!(
            "the image has no {}, the device tree the {} firmware loads",
            info.device_trees.join(" or "),
            info.description
        ));
    }
    let files = booted
        .version
        .as_ref()
        .and_then(|v| kernels.iter().find(|k| &k.version == v));
    if let Some(files) = files {
        for d in &info.drivers {
            if !files.has_driver(&d.modules, &d.symbols) {
                problems.push(format!(
                    "kernel {} has no driver for {}: none of {}",
                    files.version,
                    d.what,
                    d.modules.join(", ")
                ));
            }
        }
    }
    Ok(problems)
}

/// The Raspberry Pi firmware reads device trees from the boot partition's
/// top (raspberrypi/documentation, configuration/device-tree.adoc), where
/// Raspberry Pi OS and Debian's raspi-firmware put them; Armbian's boot
/// script loads /boot/dtb/<fdtfile>, /boot/dtb linking to the kernel's own
/// dtb-<version>/.
fn has_device_tree(
    image: &Image,
    family: Family,
    booted: &Booted,
    names: &[String],
) -> Result<bool> {
    match family {
        Family::Rpi => {
            let Some(fat) = image.fat(false)? else {
                return Ok(false);
            };
            let top = fat.list_root()?;
            Ok(names
                .iter()
                .any(|n| top.iter().any(|t| t.eq_ignore_ascii_case(n))))
        }
        Family::Armbian => {
            let Some(root) = image.ext4() else {
                return Ok(false);
            };
            let mut dirs = vec!["/boot/dtb".to_string()];
            if let Some(v) = &booted.version {
                dirs.push(format!("/boot/dtb-{v}"));
            }
            for dir in &dirs {
                for n in names {
                    if root.owner(&format!("{dir}/{n}"))?.is_some() {
                        return Ok(true);
                    }
                }
            }
            Ok(false)
        }
        Family::Generic | Family::Uefi => Ok(true),
    }
}
