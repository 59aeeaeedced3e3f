//! The kernels in an image, what each can do, and which one the board will
//! actually boot. The CM4 seed could not see its SATA card until the kernel
//! was rebuilt, so this is checked, never assumed.

mod booted;
pub mod build;
pub mod caps;
pub mod filesystems;
pub mod firmware;
pub mod fragments;
pub mod install;
pub mod kconfig;
pub mod section;

pub use crate::capability::Capability;
pub use crate::manifest::Booted;
pub use booted::{booted, version_in};
pub use caps::{KernelFiles, KernelReport, Presence};

use crate::board::Model;
use crate::image::Image;
use anyhow::{Result, bail};

/// Every installed kernel (`/lib/modules/<version>`), read in one debugfs run.
pub fn installed(image: &Image) -> Result<Vec<KernelFiles>> {
    let Some(root) = image.ext4() else {
        return Ok(vec![]);
    };
    let mut base = "/lib/modules";
    let mut dirs = root.list(base)?;
    if dirs.is_none() {
        base = "/usr/lib/modules";
        dirs = root.list(base)?;
    }
    let mut versions: Vec<String> = dirs
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == crate::image::ext4::Kind::Dir)
        .map(|e| e.name)
        .collect();
    versions.sort();
    let mut paths = Vec::new();
    for v in &versions {
        paths.push(format!("{base}/{v}/modules.builtin"));
        paths.push(format!("{base}/{v}/modules.dep"));
        paths.push(format!("/boot/config-{v}"));
    }
    let mut contents = root.read_many(&paths)?.into_iter();
    let text = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok(versions
        .into_iter()
        .map(|version| KernelFiles {
            version,
            modules_builtin: text(contents.next().flatten()),
            modules_dep: text(contents.next().flatten()),
            config: text(contents.next().flatten()),
        })
        .collect())
}

/// Module alternatives a board adds to capabilities (from overlays/<board>.toml).
pub fn board_extras(board: Model) -> Vec<(Capability, Vec<String>)> {
    board
        .info()
        .sata_modules
        .into_iter()
        .map(|g| (Capability::Sata, g))
        .collect()
}

/// Fails unless the kernel the board boots has every required capability.
pub fn require(
    board: Model,
    booted: &Booted,
    kernels: &[KernelFiles],
    required: &[Capability],
) -> Result<KernelReport> {
    let Some(version) = &booted.version else {
        bail!(
            "cannot tell which kernel {board} boots from this image ({}), so `[kernel] require` cannot be checked",
            booted.reason
        );
    };
    let Some(files) = kernels.iter().find(|k| &k.version == version) else {
        bail!(
            "{board} boots kernel {version} ({}), but the image has no /lib/modules/{version}; installed: {}",
            booted.reason,
            kernels
                .iter()
                .map(|k| k.version.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let extras = board_extras(board);
    let report = files.report(&extras);
    let missing = report.missing(required);
    if !missing.is_empty() {
        bail!(
            "the kernel {board} boots, {version} ({}), lacks {}.\nThis image cannot run the NAS as it is: pick a base image whose kernel has these drivers (Raspberry Pi OS kernels since 2021 carry SATA and md as modules), or drop the capability from `[kernel] require` if the board does not need it.\n{}",
            booted.reason,
            missing.join(" and "),
            build::remedy(board, required)
        );
    }
    Ok(report)
}
