//! The root filesystem side of an install, shared by every board: debugfs
//! ops for a directory tree, and the modules, config and System.map of a
//! build.

use crate::image::ext4::{Ext4, Op};
use crate::io::hash::sha256_hex;
use crate::kernel::build::Built;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};

/// Every file under `dir`, as (relative path, full path), sorted.
pub(super) fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
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
pub(super) fn copy_tree_ops(src: &Path, dest: &str, ops: &mut Vec<Op>) -> Result<usize> {
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

/// The build's modules, config and System.map as debugfs ops on the root
/// filesystem `part`, with the manifest entries; nothing is overwritten.
pub(super) fn root_files(root: &Ext4, built: &Built, part: &str) -> Result<(Vec<Op>, Vec<Change>)> {
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
