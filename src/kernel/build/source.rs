//! The kernel source, ready to build from: a download (fetched and
//! sha256-checked), a local tarball (unpacked once per digest), or a local
//! tree (built out of tree, never touched).

use super::digest::{sha256_file, tree_digest};
use super::kernels_dir;
use super::say;
use super::spec::{BuildSpec, KernelSource};
use crate::io::lock::Lock;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The source, ready to build from.
pub(super) struct Source {
    pub(super) tree: PathBuf,
    pub(super) digest: String,
    pub(super) describe: String,
    _lock: Option<Lock>,
}

pub(super) fn source_digest(spec: &BuildSpec, cache: &Path) -> Result<(String, Option<PathBuf>)> {
    Ok(match &spec.source {
        KernelSource::Url { url, sha256 } => {
            // A tarball is unpacked only once per digest, so a cached copy
            // is hashed again like base images and packages are.
            let (p, cached) = crate::fetch::fetch_rehashed(url, sha256, cache)?;
            say(
                "kernel",
                format!("source {url}{}", if cached { " (cached)" } else { "" }),
            );
            (sha256.clone(), Some(p))
        }
        KernelSource::Tarball { path, sha256 } => {
            if !path.is_file() {
                bail!(
                    "kernel source {} does not exist (`[kernel] build` source is relative to the recipe)",
                    path.display()
                );
            }
            let got = sha256_file(path)?;
            if let Some(want) = sha256
                && *want != got
            {
                bail!(
                    "sha256 mismatch for kernel source {}:\n  expected {want} (from the recipe)\n       got {got}",
                    path.display()
                );
            }
            (got, Some(path.clone()))
        }
        KernelSource::Tree(dir) => {
            if !dir.join("Makefile").is_file() || !dir.join("Kconfig").is_file() {
                bail!(
                    "{} is not a kernel source tree (no Makefile and Kconfig at its top)",
                    dir.display()
                );
            }
            let t = Instant::now();
            let d = tree_digest(dir)?;
            say(
                "kernel",
                format!(
                    "source tree {} (digest {} in {:.1}s)",
                    dir.display(),
                    &d[..12],
                    t.elapsed().as_secs_f64()
                ),
            );
            (d, None)
        }
    })
}

/// Unpacks a tarball into `<cache>/kernels/src/<digest>` once.
fn unpack(tarball: &Path, digest: &str, cache: &Path) -> Result<(PathBuf, Lock)> {
    let base = kernels_dir(cache).join("src");
    let lock = Lock::take(&base.join(format!("{digest}.lock")))?;
    let done = base.join(digest);
    let find_top = |dir: &Path| -> Result<PathBuf> {
        if dir.join("Makefile").is_file() && dir.join("Kconfig").is_file() {
            return Ok(dir.to_path_buf());
        }
        for e in fs::read_dir(dir)? {
            let p = e?.path();
            if p.join("Makefile").is_file() && p.join("Kconfig").is_file() {
                return Ok(p);
            }
        }
        bail!(
            "{} does not hold a kernel source tree (no directory with a Makefile and Kconfig)",
            tarball.display()
        )
    };
    if done.is_dir() {
        return Ok((find_top(&done)?, lock));
    }
    let partial = base.join(format!("{digest}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial)?;
    }
    fs::create_dir_all(&partial)?;
    let t = Instant::now();
    say("kernel", format!("unpacking {}", tarball.display()));
    let out = Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(&partial)
        .arg("--no-same-owner")
        .output()
        .context("running tar")?;
    if !out.status.success() {
        let _ = fs::remove_dir_all(&partial);
        bail!(
            "unpacking {} failed: {}",
            tarball.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    find_top(&partial)?;
    fs::rename(&partial, &done)?;
    say(
        "kernel",
        format!("unpacked in {:.1}s", t.elapsed().as_secs_f64()),
    );
    Ok((find_top(&done)?, lock))
}

pub(super) fn prepare_source(
    spec: &BuildSpec,
    cache: &Path,
    known: Option<&str>,
) -> Result<Source> {
    let (digest, tarball) = match (known, &spec.source) {
        (Some(d), KernelSource::Tarball { path, .. }) => (d.to_string(), Some(path.clone())),
        (Some(d), KernelSource::Tree(_)) => (d.to_string(), None),
        _ => source_digest(spec, cache)?,
    };
    let describe = match &spec.source {
        KernelSource::Url { url, .. } => url.clone(),
        KernelSource::Tarball { path, .. } => path.display().to_string(),
        KernelSource::Tree(d) => d.display().to_string(),
    };
    match tarball {
        Some(t) => {
            let (tree, lock) = unpack(&t, &digest, cache)?;
            Ok(Source {
                tree,
                digest,
                describe,
                _lock: Some(lock),
            })
        }
        None => {
            let KernelSource::Tree(tree) = &spec.source else {
                unreachable!()
            };
            Ok(Source {
                tree: tree.clone(),
                digest,
                describe,
                _lock: None,
            })
        }
    }
}
