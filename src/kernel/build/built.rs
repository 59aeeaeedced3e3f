//! A finished build in the cache: where its files are, its `result.json`,
//! and the capability check of what it built.

use crate::board::Model;
use crate::kernel::fragments;
use crate::kernel::{Capability, KernelFiles, KernelReport};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A finished build in the cache.
#[derive(Debug, Clone)]
pub struct Built {
    pub dir: PathBuf,
    pub info: BuildInfo,
    /// True when it came from the cache without compiling.
    pub cached: bool,
    pub timings: Vec<(&'static str, Duration)>,
}

/// `result.json` of a cached build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildInfo {
    /// `make kernelrelease`: the /lib/modules directory name.
    pub release: String,
    pub source: String,
    pub source_digest: String,
    pub defconfig: String,
    pub fragments: Vec<String>,
    pub modules: bool,
    pub compile_seconds: f64,
    /// The source tree it was built from (kept in the cache for a tarball,
    /// the recipe's own for a tree): out-of-tree modules build against it.
    #[serde(default)]
    pub source_tree: PathBuf,
}

impl Built {
    /// The arm64 `Image` (uncompressed).
    pub fn image(&self) -> PathBuf {
        self.dir.join("Image")
    }
    /// `dtbs_install` output: `broadcom/*.dtb`, `overlays/*.dtbo`, `rockchip/*.dtb`, ...
    pub fn dtbs(&self) -> PathBuf {
        self.dir.join("dtbs")
    }
    /// `lib/modules/<release>` after modules_install and depmod.
    pub fn modules(&self) -> PathBuf {
        self.dir
            .join("modules/lib/modules")
            .join(&self.info.release)
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config")
    }
    pub fn system_map(&self) -> PathBuf {
        self.dir.join("System.map")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("build.log")
    }
    /// The prepared objects an out-of-tree module (ZFS) builds against:
    /// `make -C <this> M=<module>`, with the source at `info.source_tree`.
    pub fn module_tree(&self) -> PathBuf {
        self.dir.join("build")
    }

    /// What the capability check reads, from the built files.
    pub fn files(&self) -> KernelFiles {
        let read = |p: PathBuf| fs::read_to_string(p).ok();
        KernelFiles {
            version: self.info.release.clone(),
            modules_builtin: read(self.modules().join("modules.builtin")),
            modules_dep: read(self.modules().join("modules.dep")),
            config: read(self.config()),
        }
    }

    /// Opens a cached build.
    pub fn open(dir: &Path) -> Result<Built> {
        let text = fs::read_to_string(dir.join("result.json"))
            .with_context(|| format!("reading {}/result.json", dir.display()))?;
        let info: BuildInfo = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}/result.json is damaged; delete the directory",
                dir.display()
            )
        })?;
        Ok(Built {
            dir: dir.to_path_buf(),
            info,
            cached: true,
            timings: vec![],
        })
    }

    /// The capability report of this kernel, failing like the image check
    /// does when a required capability is missing (a fragment list without
    /// md-raid, say), before anything is installed.
    pub fn check(&self, board: Model, required: &[Capability]) -> Result<KernelReport> {
        let extras = crate::kernel::board_extras(board);
        let report = self.files().report(&extras);
        let missing = report.missing(required);
        if !missing.is_empty() {
            bail!(
                "the kernel built by `[kernel] build` ({}) lacks {}; add the fragments that provide them (bundled: {})",
                self.info.release,
                missing.join(" and "),
                fragments::BUNDLED
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(report)
    }
}
