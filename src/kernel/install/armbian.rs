//! Armbian: `/boot/vmlinuz-<release>` and `/boot/dtb-<release>/` beside the
//! stock kernel, and the `/boot/Image` and `/boot/dtb` links U-Boot's boot
//! script loads pointed at them.

use super::files::{copy_tree_ops, root_files};
use super::{Installed, partition_name};
use crate::board::Model;
use crate::image::Image;
use crate::image::ext4::{Ext4, Op};
use crate::kernel::build::Built;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
use std::fs;

pub(super) fn install(image: &Image, board: Model, built: &Built) -> Result<Installed> {
    let root = image.ext4().with_context(|| {
        format!("{board} needs an ext4 root filesystem, but the image has none")
    })?;
    let part = partition_name(image.root(), "root");
    let release = &built.info.release;
    let mut out = Installed::default();

    let env = root.read("/boot/armbianEnv.txt")?.map(|b| {
        nasforge_engine::machine::armbian_env::ArmbianEnv::parse(&String::from_utf8_lossy(&b))
    });
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
    let vendor = fdtfile
        .as_deref()
        .and_then(|f| f.split_once('/'))
        .map(|(v, _)| v);
    let n = device_tree_ops(built, vendor, &dtb_dir, &mut ops)?;
    let carried = match vendor {
        Some(vendor) => carry_overlays(&root, built, vendor, &dtb_dir, &mut ops, &mut out)?,
        None => 0,
    };
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

    point_links(&root, release, &part, &mut out)?;
    if root.owner("/boot/uInitrd")?.is_some() {
        out.warnings.push(format!(
            "/boot/uInitrd is the stock kernel's initramfs; kernel {release} boots with it but cannot load modules from it. Run `update-initramfs -c -k {release}` on the board to make its own"
        ));
    }
    Ok(out)
}

/// The built device trees into `dtb_dir`; returns how many files.
fn device_tree_ops(
    built: &Built,
    vendor: Option<&str>,
    dtb_dir: &str,
    ops: &mut Vec<Op>,
) -> Result<usize> {
    // Only the board's vendor directory: a mainline `defconfig` builds the
    // device trees of every arm64 SoC family, which this board never loads.
    match vendor {
        Some(vendor) => {
            ops.push(Op::Mkdir {
                path: dtb_dir.to_string(),
                mode: 0o755,
                uid: 0,
                gid: 0,
            });
            copy_tree_ops(
                &built.dtbs().join(vendor),
                &format!("{dtb_dir}/{vendor}"),
                ops,
            )
        }
        None => copy_tree_ops(&built.dtbs(), dtb_dir, ops),
    }
}

/// Overlays armbianEnv.txt may name come from Armbian's own patches, which
/// a mainline build lacks: the stock ones the build does not have are
/// carried over. Returns how many.
fn carry_overlays(
    root: &Ext4,
    built: &Built,
    vendor: &str,
    dtb_dir: &str,
    ops: &mut Vec<Op>,
    out: &mut Installed,
) -> Result<usize> {
    let stock = format!("/boot/dtb/{vendor}/overlay");
    let new_dir = built.dtbs().join(vendor).join("overlay");
    let Some(entries) = root.list(&stock)? else {
        return Ok(0);
    };
    let wanted: Vec<String> = entries
        .into_iter()
        .filter(|e| e.kind == crate::image::ext4::Kind::File && !new_dir.join(&e.name).exists())
        .map(|e| e.name)
        .collect();
    if wanted.is_empty() {
        return Ok(0);
    }
    if !new_dir.is_dir() {
        ops.push(Op::Mkdir {
            path: format!("{dtb_dir}/{vendor}/overlay"),
            mode: 0o755,
            uid: 0,
            gid: 0,
        });
    }
    let mut carried = 0;
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
    Ok(carried)
}

/// Points the names U-Boot loads at the new kernel, keeping the old ones.
fn point_links(root: &Ext4, release: &str, part: &str, out: &mut Installed) -> Result<()> {
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
    Ok(())
}
