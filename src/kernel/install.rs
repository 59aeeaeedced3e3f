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

use super::build::Built;
use crate::board::{Family, Model};
use crate::boot::config_txt::ConfigTxt;
use crate::image::Image;
use crate::image::ext4::{Ext4, Op};
use crate::io::hash::sha256_hex;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Raspberry Pi boot partition name of a nasforge-built kernel.
pub const RPI_KERNEL: &str = "kernel-nasforge.img";
/// Where replaced stock device trees are kept on the boot partition.
pub const RPI_STOCK_DIR: &str = "nasforge-stock";

#[derive(Debug, Default)]
pub struct Installed {
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
}

/// Every file under `dir`, as (relative path, full path), sorted.
fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let rel = p
                    .strip_prefix(dir)
                    .expect("under dir")
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, p));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn check_name(rel: &str) -> Result<()> {
    if rel.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c.is_control()) {
        bail!("cannot install `{rel}`: debugfs cannot take names with spaces or quotes");
    }
    Ok(())
}

/// debugfs ops that copy `src` (a directory) to `dest` on the root
/// filesystem; `dest`'s parent must exist.
fn copy_tree_ops(src: &Path, dest: &str, ops: &mut Vec<Op>) -> Result<usize> {
    ops.push(Op::Mkdir {
        path: dest.to_string(),
        mode: 0o755,
        uid: 0,
        gid: 0,
    });
    let files = walk(src)?;
    let mut dirs = std::collections::BTreeSet::new();
    for (rel, _) in &files {
        let mut acc = String::new();
        let parts: Vec<&str> = rel.split('/').collect();
        for p in &parts[..parts.len() - 1] {
            acc = if acc.is_empty() {
                p.to_string()
            } else {
                format!("{acc}/{p}")
            };
            dirs.insert(acc.clone());
        }
    }
    for d in &dirs {
        check_name(d)?;
        ops.push(Op::Mkdir {
            path: format!("{dest}/{d}"),
            mode: 0o755,
            uid: 0,
            gid: 0,
        });
    }
    for (rel, full) in &files {
        check_name(rel)?;
        ops.push(Op::Copy {
            path: format!("{dest}/{rel}"),
            from: full.clone(),
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
    }
    Ok(files.len())
}

/// `/lib/modules`, or `/usr/lib/modules` when /lib is merged-/usr's link.
fn modules_base(root: &Ext4) -> Result<String> {
    if let Some(target) = root.readlink("/lib")?
        && target.trim_start_matches('/') == "usr/lib"
    {
        return Ok("/usr/lib/modules".into());
    }
    if root.list("/lib/modules")?.is_some() {
        return Ok("/lib/modules".into());
    }
    if root.list("/usr/lib/modules")?.is_some() {
        return Ok("/usr/lib/modules".into());
    }
    bail!(
        "the root filesystem has neither /lib/modules nor /usr/lib/modules; is it a Debian-style system?"
    )
}

fn root_files(root: &Ext4, built: &Built, part: &str) -> Result<(Vec<Op>, Vec<Change>)> {
    let release = &built.info.release;
    let base = modules_base(root)?;
    let dest = format!("{base}/{release}");
    if root.list(&dest)?.is_some() {
        bail!(
            "the image already has {dest}; nasforge does not overwrite a kernel's modules. Start from the stock image, or change the kernel's version (CONFIG_LOCALVERSION in a fragment)"
        );
    }
    let mut ops = Vec::new();
    let n = copy_tree_ops(&built.modules(), &dest, &mut ops)?;
    let mut changes = vec![Change {
        file: format!("{part}:{dest}"),
        before_sha256: None,
        after_sha256: None,
        why: "[kernel] build: the built kernel's modules (depmod run on the build host)".into(),
        details: vec![format!("{n} files")],
    }];
    for (name, src) in [
        ("config", built.config()),
        ("System.map", built.system_map()),
    ] {
        let path = format!("/boot/{name}-{release}");
        if root.read(&path)?.is_some() {
            bail!("the image already has {path}; nasforge does not overwrite it");
        }
        let data = fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
        changes.push(Change {
            file: format!("{part}:{path}"),
            before_sha256: None,
            after_sha256: Some(sha256_hex(&data)),
            why: "[kernel] build".into(),
            details: vec![],
        });
        ops.push(Op::Write {
            path,
            data,
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
    }
    Ok((ops, changes))
}

fn partition_name(p: Option<&crate::image::Partition>, role: &str) -> String {
    p.and_then(|p| p.label.clone())
        .unwrap_or_else(|| role.to_string())
}

/// Installs `built` into `image` for `board`. Call `super::installed` and
/// `super::booted` afterwards to see what the board boots now.
pub fn install(image: &Image, board: Model, built: &Built) -> Result<Installed> {
    match board.info().family {
        Family::Rpi => raspberry_pi(image, board, built),
        Family::Armbian => armbian(image, board, built),
        Family::Generic => bail!("{}", super::build::remedy(board, &[])),
    }
}

fn raspberry_pi(image: &Image, board: Model, built: &Built) -> Result<Installed> {
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

    // What goes to the boot partition: the kernel, broadcom/*.dtb to the
    // top, overlays/* to overlays/.
    let kernel =
        fs::read(built.image()).with_context(|| format!("reading {}", built.image().display()))?;
    let dtbs = built.dtbs();
    let mut files: Vec<(String, PathBuf)> = Vec::new();
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

    let fat = image.fat(false)?.context("no FAT boot partition")?;
    let names = fat.list_root()?;
    let has_dir = |d: &str| names.iter().any(|n| n.eq_ignore_ascii_case(d));
    let mut need = kernel.len() as u64;
    let mut replaced = Vec::new();
    for (rel, full) in &files {
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
    drop(fat);
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

    let fat = image.fat(true)?.context("no FAT boot partition")?;
    for (rel, old) in &replaced {
        fat.write(&format!("{RPI_STOCK_DIR}/{rel}"), old)?;
    }
    fat.write(RPI_KERNEL, &kernel)?;
    out.changes.push(Change {
        file: format!("{bootfs}:/{RPI_KERNEL}"),
        before_sha256: None,
        after_sha256: Some(sha256_hex(&kernel)),
        why: format!(
            "[kernel] build: kernel {} ({})",
            built.info.release, built.info.defconfig
        ),
        details: vec![],
    });
    let mut written = 0;
    for (rel, full) in &files {
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

    let before = fat
        .read("config.txt")?
        .context("the boot partition has no config.txt")?;
    let mut config = ConfigTxt::parse(
        &String::from_utf8(before.clone()).context("config.txt is not UTF-8 text")?,
    );
    let edits = config.set(&format!("kernel={RPI_KERNEL}"), &info.filters, &section);
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
    fat.close()?;
    Ok(out)
}

fn armbian(image: &Image, board: Model, built: &Built) -> Result<Installed> {
    let root = image.ext4().with_context(|| {
        format!("{board} needs an ext4 root filesystem, but the image has none")
    })?;
    let part = partition_name(image.root(), "root");
    let release = &built.info.release;
    let mut out = Installed::default();

    let env = root
        .read("/boot/armbianEnv.txt")?
        .map(|b| crate::boot::armbian_env::ArmbianEnv::parse(&String::from_utf8_lossy(&b)));
    let fdtfile = env
        .as_ref()
        .and_then(|e| e.get("fdtfile").map(String::from));
    if let Some(f) = &fdtfile
        && !built.dtbs().join(f).is_file()
    {
        bail!(
            "armbianEnv.txt loads the device tree {f}, and the built kernel has no {f}: the source tree does not support this board, or the defconfig leaves its SoC out"
        );
    }
    let vmlinuz = format!("/boot/vmlinuz-{release}");
    let dtb_dir = format!("/boot/dtb-{release}");
    for p in [&vmlinuz, &dtb_dir] {
        if root.owner(p)?.is_some() {
            bail!("the image already has {p}; nasforge does not overwrite it");
        }
    }
    let (mut ops, changes) = root_files(&root, built, &part)?;
    out.changes.extend(changes);
    out.changes.push(Change {
        file: format!("{part}:{vmlinuz}"),
        before_sha256: None,
        after_sha256: Some(crate::io::hash::hash_file(
            &fs::File::open(built.image())?,
            |_| {},
        )?),
        why: format!(
            "[kernel] build: kernel {release} ({})",
            built.info.defconfig
        ),
        details: vec![],
    });
    ops.push(Op::Copy {
        path: vmlinuz.clone(),
        from: built.image(),
        mode: 0o644,
        uid: 0,
        gid: 0,
    });
    // Only the board's vendor directory: a mainline `defconfig` builds the
    // device trees of every arm64 SoC family, which this board never loads.
    let n = match fdtfile.as_deref().and_then(|f| f.split_once('/')) {
        Some((vendor, _)) => {
            ops.push(Op::Mkdir {
                path: dtb_dir.clone(),
                mode: 0o755,
                uid: 0,
                gid: 0,
            });
            copy_tree_ops(
                &built.dtbs().join(vendor),
                &format!("{dtb_dir}/{vendor}"),
                &mut ops,
            )?
        }
        None => copy_tree_ops(&built.dtbs(), &dtb_dir, &mut ops)?,
    };

    // Overlays armbianEnv.txt may name come from Armbian's own patches,
    // which a mainline build lacks: carry the stock ones over.
    let mut carried = 0;
    if let Some(f) = &fdtfile
        && let Some((vendor, _)) = f.split_once('/')
    {
        let stock = format!("/boot/dtb/{vendor}/overlay");
        let new_dir = built.dtbs().join(vendor).join("overlay");
        if let Some(entries) = root.list(&stock)? {
            let wanted: Vec<String> = entries
                .into_iter()
                .filter(|e| {
                    e.kind == crate::image::ext4::Kind::File && !new_dir.join(&e.name).exists()
                })
                .map(|e| e.name)
                .collect();
            if !wanted.is_empty() {
                if !new_dir.is_dir() {
                    ops.push(Op::Mkdir {
                        path: format!("{dtb_dir}/{vendor}/overlay"),
                        mode: 0o755,
                        uid: 0,
                        gid: 0,
                    });
                }
                let paths: Vec<String> = wanted.iter().map(|n| format!("{stock}/{n}")).collect();
                for (name, data) in wanted.iter().zip(root.read_many(&paths)?) {
                    if let Some(data) = data {
                        ops.push(Op::Write {
                            path: format!("{dtb_dir}/{vendor}/overlay/{name}"),
                            data,
                            mode: 0o644,
                            uid: 0,
                            gid: 0,
                        });
                        carried += 1;
                    }
                }
                out.warnings.push(format!(
                        "{carried} device-tree overlays were carried over from the stock kernel's {stock}; they apply only if the new device trees keep the labels they refer to"
                    ));
            }
        }
    }
    out.changes.push(Change {
        file: format!("{part}:{dtb_dir}"),
        before_sha256: None,
        after_sha256: None,
        why: "[kernel] build: device trees of the built kernel".into(),
        details: vec![format!(
            "{n} files from the build, {carried} overlays carried over"
        )],
    });
    root.apply(&ops).map_err(|e| {
        e.context("installing the kernel (is the root filesystem full? `[output] grow` adds room)")
    })?;

    // Point the names U-Boot loads at the new kernel, keeping the old ones.
    let mut link_ops = Vec::new();
    for (link, target) in [
        ("/boot/Image", format!("vmlinuz-{release}")),
        ("/boot/dtb", format!("dtb-{release}")),
    ] {
        let old = root.readlink(link)?;
        match &old {
            Some(_) => link_ops.push(Op::Remove {
                path: link.to_string(),
            }),
            None if root.owner(link)?.is_some() => {
                // A real file or directory: keep it under another name.
                let kept = format!("{link}.stock");
                root.apply(&[Op::Rename {
                    from: link.to_string(),
                    to: kept.clone(),
                }])?;
                out.warnings.push(format!(
                    "{link} was not a link; the stock one is kept as {kept}"
                ));
            }
            None => {}
        }
        link_ops.push(Op::Symlink {
            path: link.to_string(),
            target: target.clone(),
        });
        out.changes.push(Change {
            file: format!("{part}:{link}"),
            before_sha256: None,
            after_sha256: None,
            why: "[kernel] build: U-Boot loads the built kernel".into(),
            details: vec![format!(
                "-> {target} (was {})",
                old.as_deref().unwrap_or("a file")
            )],
        });
    }
    root.apply(&link_ops)?;
    if root.owner("/boot/uInitrd")?.is_some() {
        out.warnings.push(format!(
            "/boot/uInitrd is the stock kernel's initramfs; kernel {release} boots with it but cannot load modules from it. Run `update-initramfs -c -k {release}` on the board to make its own"
        ));
    }
    Ok(out)
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
