//! Raspberry Pi: the kernel, device trees and overlays on the FAT boot
//! partition (stock files that differ kept first), and `kernel=` in the
//! board's config.txt section.

use super::files::{root_files, walk};
use super::{Installed, RPI_KERNEL, RPI_STOCK_DIR, partition_name};
use crate::board::{BoardInfo, Model};
use crate::boot::config_txt::ConfigTxt;
use crate::image::fat::Fat;
use crate::image::{Image, Partition};
use crate::io::hash::sha256_hex;
use crate::kernel::build::Built;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// A file for the boot partition: its path there, and the built file.
type BootFile = (String, PathBuf);
/// A stock file on the boot partition the build replaces, with its content.
type Replaced = (String, Vec<u8>);

pub(super) fn install(image: &Image, board: Model, built: &Built) -> Result<Installed> {
    let info = board.info();
    let section = info
        .section
        .clone()
        .context("board data without a config.txt section")?;
    let boot = image.boot().context("no boot partition")?.clone();
    let bootfs = partition_name(Some(&boot), "boot");
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem for the kernel's modules")?;
    let rootfs = partition_name(image.root(), "root");
    let mut out = Installed::default();

    let kernel =
        fs::read(built.image()).with_context(|| format!("reading {}", built.image().display()))?;
    let files = boot_files(built)?;
    if files.is_empty() {
        out.warnings.push(format!(
            "the built kernel has no Raspberry Pi device trees (broadcom/*.dtb); {board} keeps the boot partition's, which must suit kernel {}",
            built.info.release
        ));
    }

    // Modules first: the root filesystem is the likelier to be full, and a
    // failure there leaves the boot partition as it was.
    let (ops, changes) = root_files(&root, built, &rootfs)?;
    root.apply(&ops).map_err(|e| e.context("installing the kernel's modules (is the root filesystem full? `[output] grow` adds room)"))?;
    out.changes.extend(changes);

    let replaced = check_room(image, &kernel, &files, &bootfs, &mut out)?;
    make_dirs(image, &boot, &files, &replaced)?;
    let fat = image.fat(true)?.context("no FAT boot partition")?;
    write_boot(&fat, built, &kernel, &files, &replaced, &bootfs, &mut out)?;
    set_kernel_line(&fat, board, &info, &section, &bootfs, &mut out)?;
    fat.close()?;
    Ok(out)
}

/// What goes to the boot partition besides the kernel: broadcom/*.dtb to
/// the top, overlays/* to overlays/.
fn boot_files(built: &Built) -> Result<Vec<BootFile>> {
    let dtbs = built.dtbs();
    let mut files: Vec<BootFile> = Vec::new();
    for (rel, full) in walk(&dtbs.join("broadcom"))? {
        if !rel.contains('/') && rel.ends_with(".dtb") {
            files.push((rel, full));
        }
    }
    for (rel, full) in walk(&dtbs.join("overlays"))? {
        if !rel.contains('/') {
            files.push((format!("overlays/{rel}"), full));
        }
    }
    Ok(files)
}

/// The stock files the build replaces (kept before they are overwritten),
/// once the boot partition is known to have room for them and the new ones.
fn check_room(
    image: &Image,
    kernel: &[u8],
    files: &[BootFile],
    bootfs: &str,
    out: &mut Installed,
) -> Result<Vec<Replaced>> {
    let fat = image.fat(false)?.context("no FAT boot partition")?;
    let names = fat.list_root()?;
    let has_dir = |d: &str| names.iter().any(|n| n.eq_ignore_ascii_case(d));
    let mut need = kernel.len() as u64;
    let mut replaced = Vec::new();
    for (rel, full) in files {
        let new = fs::read(full)?;
        need += new.len() as u64;
        if let Some(old) = if rel.starts_with("overlays/") && !has_dir("overlays") {
            None
        } else {
            fat.read(rel)?
        } && old != new
        {
            need += old.len() as u64;
            replaced.push((rel.clone(), old));
        }
    }
    if let Some(old) = fat.read(RPI_KERNEL)?
        && old != kernel
    {
        out.warnings.push(format!(
            "{bootfs}:/{RPI_KERNEL} from an earlier nasforge kernel is replaced"
        ));
    }
    let free = fat.free_bytes()?;
    if need > free {
        bail!(
            "the boot partition has {} free, and the kernel, device trees and kept stock copies need {}",
            crate::size::human(free),
            crate::size::human(need)
        );
    }
    Ok(replaced)
}

/// The directories the files go into: overlays/ and the stock copies'.
fn make_dirs(
    image: &Image,
    boot: &Partition,
    files: &[BootFile],
    replaced: &[Replaced],
) -> Result<()> {
    let mut dirs = Vec::new();
    if files.iter().any(|(r, _)| r.starts_with("overlays/")) {
        dirs.push("overlays".to_string());
    }
    if !replaced.is_empty() {
        dirs.push(RPI_STOCK_DIR.to_string());
    }
    if replaced.iter().any(|(r, _)| r.starts_with("overlays/")) {
        dirs.push(format!("{RPI_STOCK_DIR}/overlays"));
    }
    // fatfs cannot create directories cleanly (rust-fatfs #117): mtools does.
    let mtools = |tool: &str, d: &str| {
        Command::new(tool)
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-i")
            .arg(format!("{}@@{}", image.path.display(), boot.start))
            .arg(format!("::{d}"))
            .output()
            .with_context(|| format!("running {tool} (mtools; scripts/setup installs it)"))
    };
    for d in &dirs {
        if mtools("mdir", d)?.status.success() {
            continue;
        }
        let out = mtools("mmd", d)?;
        if !out.status.success() {
            bail!(
                "creating {d}/ on the boot partition failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Keeps the replaced stock files, then writes the kernel and device trees.
fn write_boot(
    fat: &Fat,
    built: &Built,
    kernel: &[u8],
    files: &[BootFile],
    replaced: &[Replaced],
    bootfs: &str,
    out: &mut Installed,
) -> Result<()> {
    for (rel, old) in replaced {
        fat.write(&format!("{RPI_STOCK_DIR}/{rel}"), old)?;
    }
    fat.write(RPI_KERNEL, kernel)?;
    out.changes.push(Change {
        file: format!("{bootfs}:/{RPI_KERNEL}"),
        before_sha256: None,
        after_sha256: Some(sha256_hex(kernel)),
        why: format!(
            "[kernel] build: kernel {} ({})",
            built.info.release, built.info.defconfig
        ),
        details: vec![],
    });
    let mut written = 0;
    for (rel, full) in files {
        fat.write(rel, &fs::read(full)?)?;
        written += 1;
    }
    if written > 0 {
        let mut details = vec![format!(
            "{written} device trees and overlays from the build"
        )];
        if !replaced.is_empty() {
            details.push(format!(
                "{} stock files that differed are kept in {RPI_STOCK_DIR}/",
                replaced.len()
            ));
        }
        out.changes.push(Change {
            file: format!("{bootfs}:/*.dtb, overlays/"),
            before_sha256: None,
            after_sha256: None,
            why: "[kernel] build: device trees matching the built kernel".into(),
            details,
        });
    }
    Ok(())
}

/// `kernel=kernel-nasforge.img` in the board's config.txt section.
fn set_kernel_line(
    fat: &Fat,
    board: Model,
    info: &BoardInfo,
    section: &str,
    bootfs: &str,
    out: &mut Installed,
) -> Result<()> {
    let before = fat
        .read("config.txt")?
        .context("the boot partition has no config.txt")?;
    let mut config = ConfigTxt::parse(
        &String::from_utf8(before.clone()).context("config.txt is not UTF-8 text")?,
    );
    let edits = config.set(&format!("kernel={RPI_KERNEL}"), &info.filters, section);
    let after = config.render();
    if after.as_bytes() != before.as_slice() {
        fat.write("config.txt", after.as_bytes())?;
        out.changes.push(Change {
            file: format!("{bootfs}:/config.txt"),
            before_sha256: Some(sha256_hex(&before)),
            after_sha256: Some(sha256_hex(after.as_bytes())),
            why: format!("[kernel] build: {board} boots the built kernel; remove the line to boot the stock one"),
            details: edits.iter().map(|e| e.to_string()).collect(),
        });
    }
    Ok(())
}
