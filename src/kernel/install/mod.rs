//! Installs a built kernel into an image beside the stock one.
//!
//! Raspberry Pi: the Image goes to the boot partition as
//! `kernel-nasforge.img` and `kernel=kernel-nasforge.img` goes into the
//! board's config.txt section (Raspberry Pi's documented way to keep a custom
//! kernel apart from the stock one: delete the line to boot the stock kernel
//! again). Device trees and overlays are copied to the boot partition as the
//! Raspberry Pi kernel documentation does; a stock file that differs is kept
//! in `nasforge-stock/` first.
//!
//! Armbian: `/boot/vmlinuz-<release>`, `/boot/dtb-<release>/`, and the
//! `/boot/Image` and `/boot/dtb` links U-Boot's boot script loads are pointed
//! at them; the stock kernel and its device trees stay where they were.
//!
//! Both: modules to `/lib/modules/<release>` (already depmod'ed on the host),
//! `/boot/config-<release>` and `/boot/System.map-<release>`, through debugfs.
//! Nothing is removed; a release directory that already exists is an error.

mod armbian;
mod files;
mod raspberry_pi;

use super::build::Built;
use crate::board::{Family, Model};
use crate::image::Image;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};

/// The Raspberry Pi boot partition name of a nasforge-built kernel.
pub const RPI_KERNEL: &str = "kernel-nasforge.img";
/// Where replaced stock device trees are kept on the boot partition.
pub const RPI_STOCK_DIR: &str = "nasforge-stock";

#[derive(Debug, Default)]
pub struct Installed {
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
}

fn partition_name(p: Option<&crate::image::Partition>, role: &str) -> String {
    p.and_then(|p| p.label.clone())
        .unwrap_or_else(|| role.to_string())
}

/// Installs `built` into `image` for `board`. Call `super::installed` and
/// `super::booted` afterwards to see what the board boots now.
pub fn install(image: &Image, board: Model, built: &Built) -> Result<Installed> {
    match board.info().family {
        Family::Rpi => raspberry_pi::install(image, board, built),
        Family::Armbian => armbian::install(image, board, built),
        Family::Generic | Family::Uefi => bail!("{}", super::build::remedy(board, &[])),
    }
}

/// Installs `built`, then reads the image again the way `inspect` does and
/// fails unless `board` now boots the built kernel with every `require`d
/// capability. Returns what changed, the kernel the board boots, and a
/// one-line summary (`pi5 boots 6.1.192-nasforge: sata ✓ (...), md ✓ (...)`).
pub fn install_checked(
    image: &Image,
    board: Model,
    built: &Built,
    require: &[super::Capability],
) -> Result<(Installed, super::Booted, String)> {
    let installed = install(image, board, built)?;
    let kernels = super::installed(image)?;
    let versions: Vec<String> = kernels.iter().map(|k| k.version.clone()).collect();
    let booted = super::booted(image, board, &versions)?;
    if booted.version.as_deref() != Some(built.info.release.as_str()) {
        bail!(
            "after installing kernel {}, {board} would still boot {} ({}); nasforge cannot make this image boot it",
            built.info.release,
            booted.version.as_deref().unwrap_or("an unknown kernel"),
            booted.reason
        );
    }
    let caps: Vec<super::Capability> = if require.is_empty() {
        vec![super::Capability::Sata, super::Capability::Md]
    } else {
        require.to_vec()
    };
    let extras = super::board_extras(board);
    let report = if require.is_empty() {
        kernels
            .iter()
            .find(|k| k.version == built.info.release)
            .map(|k| k.report(&extras))
            .context("the installed kernel's modules are missing")?
    } else {
        super::require(board, &booted, &kernels, require)?
    };
    let summary = format!(
        "{board} boots {}: {}",
        built.info.release,
        caps.iter()
            .map(|c| report.describe(*c, &extras))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((installed, booted, summary))
}
