//! What a recipe's `[kernel] build = { ... }` asks for, as plain values: the
//! source, the defconfig and the fragments.

use crate::kernel::fragments::{self, Fragment};
use anyhow::{Context, Result};
use std::fs;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A tarball to download; always with its sha256.
    Url { url: String, sha256: String },
    /// A tarball on this machine; checked when a sha256 is given.
    Tarball {
        path: PathBuf,
        sha256: Option<String>,
    },
    /// An unpacked kernel tree on this machine (built out of tree, unchanged).
    Tree(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defconfig {
    /// A `make` target: `bcm2712_defconfig`, `defconfig`, `allnoconfig`.
    Target(String),
    /// A full `.config` file (Armbian's `linux-rockchip64-current.config`).
    File(PathBuf),
}

impl std::fmt::Display for Defconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Defconfig::Target(t) => f.write_str(t),
            Defconfig::File(p) => write!(f, "{}", p.display()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FragmentRef {
    /// One of `kernel-configs/` by name (`sata`), built into nasforge.
    Bundled(String),
    /// A fragment file of the user's, relative to the recipe.
    File(PathBuf),
}

impl FragmentRef {
    pub fn load(&self) -> Result<Fragment> {
        match self {
            FragmentRef::Bundled(n) => {
                let text = fragments::bundled(n)
                    .with_context(|| format!("no bundled kernel fragment `{n}`"))?;
                Fragment::parse(&format!("{n}.config"), text)
            }
            FragmentRef::File(p) => {
                let text = fs::read_to_string(p)
                    .with_context(|| format!("reading kernel fragment {}", p.display()))?;
                Fragment::parse(&p.display().to_string(), &text)
            }
        }
    }
}

/// A validated `[kernel] build = { ... }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    pub source: KernelSource,
    pub defconfig: Defconfig,
    pub fragments: Vec<FragmentRef>,
}

impl BuildSpec {
    pub fn load_fragments(&self) -> Result<Vec<Fragment>> {
        self.fragments.iter().map(FragmentRef::load).collect()
    }
}
