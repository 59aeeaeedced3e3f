//! `[board]`: which board the image is for, and the two settings that
//! depend on it: the PCIe generation of a Pi 5 and Armbian's overlays.

use crate::board::{Family, Model};
use crate::section::{Checked, RecipeText, checked};
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BoardFile {
    pub(super) model: Model,
    pcie_gen: Option<Spanned<u8>>,
    overlays: Option<Spanned<Vec<String>>>,
}

pub(super) struct Board {
    pub(super) pcie_gen: Option<u8>,
    pub(super) overlays: Vec<Vec<String>>,
}

pub(super) fn parse(raw: &BoardFile, at: &RecipeText) -> Checked<Board> {
    let model = raw.model;
    let info = model.info();
    let mut errs = Vec::new();
    let pcie_gen = raw.pcie_gen.as_ref().map(|g| {
        if info.pcie_gen.is_none() {
            errs.push(
                at.at(
                    g.span(),
                    format!("board `{model}` has no configurable PCIe generation"),
                )
                .with_help("`pcie_gen` applies to pi5 and cm5"),
            );
        } else if !(1..=3).contains(g.get_ref()) {
            errs.push(
                at.at(
                    g.span(),
                    format!("PCIe generation {} does not exist here", g.get_ref()),
                )
                .with_help("use 1, 2 or 3 (3 is uncertified but works with the JMB585)"),
            );
        }
        *g.get_ref()
    });
    let Some(o) = &raw.overlays else {
        let overlays = info.overlays.clone();
        return checked(Board { pcie_gen, overlays }, errs);
    };
    if info.family != Family::Armbian {
        errs.push(
            at.at(
                o.span(),
                format!(
                    "`overlays` are Armbian device-tree overlays; board `{model}` does not use them"
                ),
            )
            .with_help("on a Raspberry Pi, put `dtoverlay=` lines in `[boot] config`"),
        );
    }
    // Each name becomes a word of armbianEnv.txt's `overlays=` line.
    for name in o.get_ref() {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c));
        if !ok {
            errs.push(
                at.at(
                    o.span(),
                    format!("`{}` is not a device-tree overlay name", name.escape_debug()),
                )
                .with_help("letters, digits, `-`, `_`, `.` and `+`, as in /boot/dtb/*/overlay/<prefix>-<name>.dtbo"),
            );
        }
    }
    let overlays = o.get_ref().iter().map(|name| vec![name.clone()]).collect();
    checked(Board { pcie_gen, overlays }, errs)
}
