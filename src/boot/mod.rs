//! Boot settings per board family: config.txt and cmdline.txt on a Raspberry
//! Pi's FAT partition, armbianEnv.txt on an Armbian root filesystem.

pub mod cmdline;
pub mod config_txt;
pub mod section;

pub use section::Boot;

use crate::board::{BoardInfo, Family, Model};
use crate::image::Image;
use crate::image::fat::Fat;
use crate::io::hash::sha256_hex;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
use nasforge_engine::machine::armbian_env::ArmbianEnv;
use nasforge_engine::machine::usb_quirk::{self, UsbQuirk};

#[derive(Debug, Default)]
pub struct Applied {
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
}

/// What a recipe asks of the boot settings, taken out of it so this module
/// needs nothing of the recipe's other sections.
#[derive(Debug, Clone)]
pub struct Asked {
    pub board: Model,
    pub pcie_gen: Option<u8>,
    /// Armbian overlays, each as alternative names.
    pub overlays: Vec<Vec<String>>,
    pub boot: Boot,
    /// `[storage] usb_quirks`, which go on the kernel command line.
    pub usb_quirks: Vec<nasforge_engine::spec::UsbQuirk>,
}

pub fn apply(image: &Image, asked: &Asked) -> Result<Applied> {
    match asked.board.info().family {
        Family::Rpi => raspberry_pi(image, asked),
        Family::Armbian => armbian(image, asked),
        Family::Generic | Family::Uefi => Ok(Applied::default()),
    }
}

/// The first line of `text` (kernel arguments) with `quirks` merged into
/// its `usb-storage.quirks=` word by the rule setup uses on the board, and
/// the manifest's detail; None when it has them all.
fn with_usb_quirks(text: &str, quirks: &[UsbQuirk]) -> Option<(String, String)> {
    let merged = usb_quirk::merged_first_line(text, quirks)?;
    let first = merged.lines().next().unwrap_or_default();
    let word = first
        .split_whitespace()
        .rfind(|w| w.starts_with(&format!("{}=", usb_quirk::KEY)))
        .unwrap_or_default();
    let detail = format!("added `{word}` ([storage] usb_quirks)");
    Some((merged, detail))
}

/// Refuses an image of the wrong family before anything is done to it.
pub fn check_family(image: &Image, board: Model) -> Result<()> {
    let info = board.info();
    match info.family {
        Family::Rpi => {
            let has_config = match image.fat(false)? {
                Some(fat) => fat.read("config.txt")?.is_some(),
                None => false,
            };
            if !has_config {
                bail!(
                    "{} boots with the Raspberry Pi firmware, but this image has no FAT boot partition with config.txt; is it a Raspberry Pi image?",
                    info.description
                );
            }
        }
        Family::Armbian => {
            let has_env = match image.ext4() {
                Some(root) => root.read(ARMBIAN_ENV)?.is_some(),
                None => false,
            };
            if !has_env {
                bail!(
                    "{} boots Armbian, but this image has no {ARMBIAN_ENV}; is it an Armbian image?",
                    info.description
                );
            }
        }
        Family::Generic => {
            if image.root().is_none() {
                bail!("this image has no ext4 root partition");
            }
        }
        Family::Uefi => {
            if efi_loader(image)?.is_none() {
                bail!(
                    "{} boots through UEFI, but this image has no EFI system partition with {}; is it a PC image? (Debian's `generic` cloud images and images built with `[base] debian` have one)",
                    info.description,
                    EFI_LOADERS.join(" or ")
                );
            }
            if image.root().is_none() {
                bail!("this image has no ext4 root partition");
            }
        }
    }
    Ok(())
}

/// Where a PC's firmware finds a boot loader: the removable-media path every
/// UEFI firmware tries, and Debian's shim and GRUB as `grub-install` places them.
pub const EFI_LOADERS: [&str; 3] = [
    "EFI/BOOT/BOOTX64.EFI",
    "EFI/debian/shimx64.efi",
    "EFI/debian/grubx64.efi",
];

/// The first boot loader of `EFI_LOADERS` on the image's EFI system partition.
pub fn efi_loader(image: &Image) -> Result<Option<&'static str>> {
    let Some(fat) = image.fat(false)? else {
        return Ok(None);
    };
    for l in EFI_LOADERS {
        if fat.reader(l)?.is_some() {
            return Ok(Some(l));
        }
    }
    Ok(None)
}

fn partition_name(label: Option<&str>, role: &str) -> String {
    label.unwrap_or(role).to_string()
}

fn raspberry_pi(image: &Image, asked: &Asked) -> Result<Applied> {
    let board = asked.board;
    let info = board.info();
    let section = info
        .section
        .clone()
        .context("board data without a config.txt section")?;
    let Some(fat) = image.fat(true)? else {
        bail!(
            "board {board} needs a FAT boot partition with config.txt, but the image has none; is this a Raspberry Pi image?"
        );
    };
    let part = partition_name(image.boot().and_then(|p| p.label.as_deref()), "boot");
    let mut out = Applied::default();
    let wanted = wanted_config(asked, &info);
    edit_config(&fat, &part, board, &info, &wanted, &section, &mut out)?;
    if !asked.boot.cmdline_append.is_empty()
        || !asked.boot.cmdline_remove.is_empty()
        || !asked.usb_quirks.is_empty()
    {
        edit_cmdline(&fat, &part, asked, &mut out)?;
    }
    fat.close()?;
    persist_for_raspi_firmware(image, asked, &wanted, &section, &mut out)?;
    Ok(out)
}

/// The config.txt lines the board needs and the recipe asks for, each with
/// the reason the manifest gives.
fn wanted_config(asked: &Asked, info: &BoardInfo) -> Vec<(String, String)> {
    let board = asked.board;
    let mut wanted: Vec<(String, String)> = info
        .config
        .iter()
        .map(|l| {
            (
                l.clone(),
                format!("{board} needs it for its PCIe SATA card"),
            )
        })
        .collect();
    if let (Some(generation), Some(template)) = (asked.pcie_gen, &info.pcie_gen) {
        wanted.push((
            template.replace("{gen}", &generation.to_string()),
            format!("[board] pcie_gen = {generation}"),
        ));
    }
    wanted.extend(
        asked
            .boot
            .config
            .iter()
            .map(|l| (l.clone(), "[boot] config".to_string())),
    );
    wanted
}

/// Sets the `wanted` lines in the board's section of config.txt.
fn edit_config(
    fat: &Fat,
    part: &str,
    board: Model,
    info: &BoardInfo,
    wanted: &[(String, String)],
    section: &str,
    out: &mut Applied,
) -> Result<()> {
    let before = fat.read("config.txt")?.with_context(|| {
        format!(
            "the boot partition has no config.txt; is this a Raspberry Pi image? (board {board})"
        )
    })?;
    let text = String::from_utf8(before.clone()).context("config.txt is not UTF-8 text")?;
    let mut config = config_txt::ConfigTxt::parse(&text);
    let mut details = Vec::new();
    let mut reasons = Vec::new();
    for (line, why) in wanted {
        let edits = config.set(line, &info.filters, section);
        if !edits.is_empty() {
            reasons.push(why.clone());
        }
        details.extend(edits.iter().map(|e| e.to_string()));
    }
    for (n, line) in config.long_lines() {
        out.warnings.push(format!(
            "config.txt line {n} is longer than {} characters; the firmware ignores it: {line}",
            config_txt::MAX_LINE
        ));
    }
    let after = config.render();
    if after.as_bytes() != before.as_slice() {
        fat.write("config.txt", after.as_bytes())?;
        reasons.dedup();
        out.changes.push(Change {
            file: format!("{part}:/config.txt"),
            before_sha256: Some(sha256_hex(&before)),
            after_sha256: Some(sha256_hex(after.as_bytes())),
            why: reasons.join("; "),
            details,
        });
    }
    Ok(())
}

/// `[boot] cmdline_remove` and `cmdline_append`, then `[storage]
/// usb_quirks`, applied to cmdline.txt.
fn edit_cmdline(fat: &Fat, part: &str, asked: &Asked, out: &mut Applied) -> Result<()> {
    let boot = &asked.boot;
    let before = fat
        .read("cmdline.txt")?
        .context("the boot partition has no cmdline.txt to edit")?;
    let mut cmdline = cmdline::Cmdline::parse(&String::from_utf8_lossy(&before));
    if cmdline.ignored_lines() > 0 {
        out.warnings
            .push("cmdline.txt has more than one line; the firmware reads only the first".into());
    }
    let mut details = Vec::new();
    for r in &boot.cmdline_remove {
        if cmdline.remove(r) {
            details.push(format!("removed `{r}`"));
        }
    }
    for a in &boot.cmdline_append {
        if cmdline.append(a) {
            details.push(format!("added `{a}`"));
        }
    }
    let mut after = cmdline.render();
    if let Some((merged, detail)) = with_usb_quirks(&after, &asked.usb_quirks) {
        after = merged;
        details.push(detail);
    }
    if after.as_bytes() != before.as_slice() {
        fat.write("cmdline.txt", after.as_bytes())?;
        out.changes.push(Change {
            file: format!("{part}:/cmdline.txt"),
            before_sha256: Some(sha256_hex(&before)),
            after_sha256: Some(sha256_hex(after.as_bytes())),
            why: "[boot] cmdline_append / cmdline_remove, [storage] usb_quirks".into(),
            details,
        });
    }
    Ok(())
}

const RASPI_FIRMWARE_HOOK: &str = "/etc/kernel/postinst.d/z50-raspi-firmware";
const RASPI_FIRMWARE_CUSTOM: &str = "/etc/default/raspi-firmware-custom";
const RASPI_EXTRA_CMDLINE: &str = "/etc/default/raspi-extra-cmdline";

/// Debian's raspi-firmware rewrites config.txt and cmdline.txt on every
/// kernel or initramfs update (its z50-raspi-firmware hook) — on the board's
/// first boot too, when mdadm.conf is added. What it keeps is what
/// /etc/default/raspi-firmware-custom and raspi-extra-cmdline say, so the
/// board's settings go there as well.
fn persist_for_raspi_firmware(
    image: &Image,
    asked: &Asked,
    wanted: &[(String, String)],
    section: &str,
    out: &mut Applied,
) -> Result<()> {
    let Some(root) = image.ext4() else {
        return Ok(());
    };
    if root.owner(RASPI_FIRMWARE_HOOK)?.is_none() || !hook_rewrites_config(&root)? {
        return Ok(());
    }
    let info = asked.board.info();
    let part = partition_name(image.root().and_then(|p| p.label.as_deref()), "root");
    let before = root.read(RASPI_FIRMWARE_CUSTOM)?;
    let mut custom = config_txt::ConfigTxt::parse(&String::from_utf8_lossy(
        before.as_deref().unwrap_or_default(),
    ));
    let mut details = Vec::new();
    for (line, _) in wanted {
        details.extend(
            custom
                .set(line, &info.filters, section)
                .iter()
                .map(|e| e.to_string()),
        );
    }
    if !details.is_empty() {
        let after = custom.render();
        root.replace(RASPI_FIRMWARE_CUSTOM, after.as_bytes(), 0o644)?;
        out.changes.push(Change {
            file: format!("{part}:{RASPI_FIRMWARE_CUSTOM}"),
            before_sha256: before.as_deref().map(sha256_hex),
            after_sha256: Some(sha256_hex(after.as_bytes())),
            why: "raspi-firmware regenerates config.txt on kernel updates and appends this file"
                .into(),
            details,
        });
    }
    if !asked.boot.cmdline_append.is_empty() || !asked.usb_quirks.is_empty() {
        let before = root.read(RASPI_EXTRA_CMDLINE)?;
        let mut extra = cmdline::Cmdline::parse(&String::from_utf8_lossy(
            before.as_deref().unwrap_or_default(),
        ));
        let mut added: Vec<String> = asked
            .boot
            .cmdline_append
            .iter()
            .filter(|w| extra.append(w))
            .map(|w| format!("added `{w}`"))
            .collect();
        let mut after = extra.render();
        if let Some((merged, detail)) = with_usb_quirks(&after, &asked.usb_quirks) {
            after = merged;
            added.push(detail);
        }
        if !added.is_empty() {
            root.replace(RASPI_EXTRA_CMDLINE, after.as_bytes(), 0o644)?;
            out.changes.push(Change {
                file: format!("{part}:{RASPI_EXTRA_CMDLINE}"),
                before_sha256: before.as_deref().map(sha256_hex),
                after_sha256: Some(sha256_hex(after.as_bytes())),
                why:
                    "raspi-firmware regenerates cmdline.txt on kernel updates and appends this file"
                        .into(),
                details: added,
            });
        }
    }
    if !asked.boot.cmdline_remove.is_empty() {
        out.warnings.push(format!(
            "this image's raspi-firmware rewrites cmdline.txt on every kernel update, which brings back what `cmdline_remove` took out ({}); change /etc/default/raspi-firmware on the board to make it stick",
            asked.boot.cmdline_remove.join(", ")
        ));
    }
    Ok(())
}

/// Whether the z50 hook is Debian's, which rewrites config.txt and
/// cmdline.txt. Raspberry Pi OS ships a package of the same name
/// (raspi-firmware, from RPi-Distro/firmware, Maintainer at
/// raspberrypi.com) whose hook only copies kernels and DTBs. The owner is
/// the package whose dpkg file list holds the hook; without one the hook is
/// taken for Debian's, whose settings files are harmless elsewhere.
fn hook_rewrites_config(root: &crate::image::ext4::Ext4) -> Result<bool> {
    const INFO: &str = "/var/lib/dpkg/info";
    let lists: Vec<String> = root
        .list(INFO)?
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.name.ends_with(".list"))
        .map(|e| format!("{INFO}/{}", e.name))
        .collect();
    let owner = lists
        .iter()
        .zip(root.read_many(&lists)?)
        .find(|(_, text)| {
            text.as_deref().is_some_and(|t| {
                String::from_utf8_lossy(t)
                    .lines()
                    .any(|l| l == RASPI_FIRMWARE_HOOK)
            })
        })
        .map(|(path, _)| {
            let name = path.rsplit('/').next().unwrap_or_default();
            let name = name.trim_end_matches(".list");
            name.split(':').next().unwrap_or(name).to_string()
        });
    let Some(owner) = owner else {
        return Ok(true);
    };
    let status = root.read("/var/lib/dpkg/status")?.unwrap_or_default();
    let status = String::from_utf8_lossy(&status);
    let maintainer = status
        .split("\n\n")
        .find(|s| s.lines().any(|l| l == format!("Package: {owner}")))
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Maintainer: ")))
        .unwrap_or("");
    Ok(!maintainer.contains("@raspberrypi.com"))
}

const ARMBIAN_ENV: &str = "/boot/armbianEnv.txt";

fn armbian(image: &Image, asked: &Asked) -> Result<Applied> {
    let board = asked.board;
    let root = image.ext4().with_context(|| {
        format!("board {board} needs an ext4 root filesystem, but the image has none")
    })?;
    let part = partition_name(image.root().and_then(|p| p.label.as_deref()), "root");
    let before = root.read(ARMBIAN_ENV)?.with_context(|| {
        format!(
            "the root filesystem has no {ARMBIAN_ENV}; is this an Armbian image? (board {board})"
        )
    })?;
    let mut env = ArmbianEnv::parse(&String::from_utf8_lossy(&before));
    let names = overlay_names(&root, &env, &asked.overlays)?;
    let added = env.add_overlays(&names);
    let mut out = Applied::default();
    if let Some(extraargs) = env.add_usb_quirks(&asked.usb_quirks) {
        root.replace(ARMBIAN_ENV, env.render().as_bytes(), 0o644)?;
        out.changes.push(Change {
            file: format!("{part}:{ARMBIAN_ENV}"),
            before_sha256: Some(sha256_hex(&before)),
            after_sha256: Some(sha256_hex(env.render().as_bytes())),
            why: "[storage] usb_quirks: these USB bridges are kept off the uas driver".into(),
            details: vec![format!("extraargs now `{extraargs}`")],
        });
    }
    if !added.is_empty() {
        root.replace(ARMBIAN_ENV, env.render().as_bytes(), 0o644)?;
        out.changes.push(Change {
            file: format!("{part}:{ARMBIAN_ENV}"),
            before_sha256: Some(sha256_hex(&before)),
            after_sha256: Some(sha256_hex(env.render().as_bytes())),
            why: format!("{board} needs these device-tree overlays for SATA"),
            details: added
                .iter()
                .map(|o| format!("added overlay `{o}`"))
                .collect(),
        });
    }
    Ok(out)
}

/// For each wanted overlay, the first alternative whose .dtbo the image
/// carries, so a name that would silently do nothing at boot is an error now.
fn overlay_names(
    root: &crate::image::ext4::Ext4,
    env: &ArmbianEnv,
    wanted: &[Vec<String>],
) -> Result<Vec<String>> {
    if wanted.is_empty() {
        return Ok(vec![]);
    }
    let vendor = env
        .get("fdtfile")
        .and_then(|f| f.split_once('/'))
        .map(|(v, _)| v.to_string())
        .unwrap_or_else(|| "rockchip".into());
    let dir = format!("/boot/dtb/{vendor}/overlay");
    let available: Vec<String> = root
        .list(&dir)?
        .with_context(|| {
            format!("{dir} does not exist, so the image's kernel carries no overlays to enable")
        })?
        .into_iter()
        .map(|e| e.name)
        .collect();
    let prefix = env.get("overlay_prefix").unwrap_or("");
    let mut names = Vec::new();
    for alternatives in wanted {
        let found = alternatives.iter().find(|name| {
            available
                .iter()
                .any(|f| *f == format!("{prefix}-{name}.dtbo") || *f == format!("{name}.dtbo"))
        });
        match found {
            Some(n) => names.push(n.clone()),
            None => {
                let sata: Vec<&str> = available
                    .iter()
                    .filter(|f| f.contains("sata"))
                    .map(String::as_str)
                    .collect();
                bail!(
                    "none of the overlays {} exists in {dir} (overlay_prefix={prefix}); SATA overlays in this image: {}. Name the right one in `[board] overlays`, or set `overlays = []` if your SATA card is on PCIe",
                    alternatives.join(", "),
                    if sata.is_empty() {
                        "none".to_string()
                    } else {
                        sata.join(", ")
                    }
                );
            }
        }
    }
    Ok(names)
}
