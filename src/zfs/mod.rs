//! ZFS for the board, prepared on the workstation: OpenZFS's kernel modules
//! compiled here for the kernel the board boots, packaged, and staged with
//! zfsutils-linux of the same version for the offline first boot. On a Pi,
//! zfs-dkms would compile for tens of minutes at first boot and again after
//! every kernel update, with a compiler and headers on the card; here it is
//! done once per kernel and cached.
//!
//! `kernel_package` finds which package carries the kernel, `sources`
//! resolves the headers and the OpenZFS source from the image's own apt
//! sources, `build` compiles (or takes from the cache), `deb` packages.

pub mod build;
pub mod deb;
pub mod kernel_package;
pub mod sources;

use crate::image::Image;
use crate::kernel::Capability;
use crate::kernel::build::Built;
use crate::packages::{Deb, ImageApt};
use crate::recipe::Recipe;
use anyhow::{Context, Result, bail};
use std::path::Path;

/// What a build stages for ZFS.
pub struct Staged {
    pub modules: build::Modules,
    /// The modules' package, staged beside the resolved ones.
    pub package: Deb,
    /// The userland of the same version, resolved with the other packages.
    pub userland: Vec<String>,
}

impl Staged {
    /// `zfs ✓ (2.1.11-1+deb12u1, 6.1.0-57-arm64)`, as `inspect` says it.
    pub fn describe(&self) -> String {
        format!(
            "zfs ✓ ({}, {}){}",
            self.modules.version,
            self.modules.release,
            if self.modules.cached {
                format!(", modules from the cache ({})", self.modules.dir.display())
            } else {
                String::new()
            }
        )
    }
}

/// The recipe builds a ZFS pool, or names `zfs` in `[kernel] require`.
pub fn wanted(recipe: &Recipe) -> bool {
    recipe.kernel.require.contains(&Capability::Zfs)
        || recipe
            .storage
            .as_ref()
            .is_some_and(|s| s.arrays.iter().any(|a| a.is_zfs()))
}

/// What OpenZFS's configure refuses in a kernel's configuration
/// (config/kernel-config-defined.m4 in its source), each with the value
/// that is there: the same list `kernel-configs/zfs.config` sets.
pub fn kernel_config_problems(config: &str) -> Vec<String> {
    let c = crate::kernel::kconfig::Config::parse(config);
    let mut out = Vec::new();
    for sym in ["MODULES", "BLOCK"] {
        if c.get(sym) != "y" {
            out.push(format!("CONFIG_{sym}={} (needs y)", c.get(sym)));
        }
    }
    for sym in ["ZLIB_INFLATE", "ZLIB_DEFLATE"] {
        if c.get(sym) == "n" {
            out.push(format!("CONFIG_{sym} is not set (needs y or m)"));
        }
    }
    for sym in ["TRIM_UNUSED_KSYMS", "DEBUG_LOCK_ALLOC"] {
        if c.get(sym) == "y" {
            out.push(format!("CONFIG_{sym}=y (must be off)"));
        }
    }
    out
}

/// Builds (or finds in the cache) the modules for the kernel the board will
/// boot — `built`, when the recipe builds one, else `release` from the
/// image — and resolves what goes with them. Nothing is written to the image.
pub fn prepare(
    image: &Image,
    recipe: &Recipe,
    release: Option<&str>,
    built: Option<&Built>,
    cache: &Path,
    refresh: bool,
) -> Result<Staged> {
    let release = release.context(
        "cannot tell which kernel the board boots, so ZFS's modules cannot be built for it",
    )?;
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem")?;
    let (modules, userland, arch) = match built {
        Some(b) => {
            let config = std::fs::read_to_string(b.config())
                .with_context(|| format!("reading {}", b.config().display()))?;
            let problems = kernel_config_problems(&config);
            if !problems.is_empty() {
                bail!(
                    "the kernel `[kernel] build` makes ({release}) cannot load ZFS's modules: {}.\nAdd \"zfs\" to its `fragments` (kernel-configs/zfs.config sets all of these).",
                    problems.join(", ")
                );
            }
            if !b.module_tree().join("Module.symvers").is_file() {
                bail!(
                    "the kernel build {} kept no tree for module builds (its modules are off, or it was cached by an older nasforge); delete that directory to build it again",
                    b.dir.display()
                );
            }
            let apt = ImageApt::open(&root, recipe.mirror.as_deref(), cache, refresh)?;
            let inputs = sources::resolve(&apt, release, None, cache)?;
            let key = b.dir.file_name().unwrap_or_default().to_string_lossy();
            let modules = build::build(
                &build::Kernel::Tree {
                    release,
                    source: &b.info.source_tree,
                    objects: &b.module_tree(),
                    key: &key,
                },
                build::Target::of(&apt.arch)?,
                &inputs.zfs,
                cache,
                &|| None,
            )?;
            (modules, inputs.userland, apt.arch)
        }
        None => {
            let kernel = kernel_package::find(&root, release)?;
            let apt = ImageApt::open(&root, recipe.mirror.as_deref(), cache, refresh)?;
            let inputs = sources::resolve(&apt, release, Some(&kernel), cache)?;
            let (mirror, suite) = debian_release(&apt)?;
            let modules = build::build(
                &build::Kernel::Headers {
                    release,
                    debs: &inputs.headers,
                    suite: &suite,
                    mirror: &mirror,
                },
                build::Target::of(&apt.arch)?,
                &inputs.zfs,
                cache,
                &|| sources::native_tools(&apt, &inputs.headers, cache),
            )?;
            (modules, inputs.userland, apt.arch)
        }
    };
    let package = deb::package(&modules, &arch)?;
    Ok(Staged {
        modules,
        package,
        userland,
    })
}

/// The image's Debian archive and release (`[packages] mirror` applied),
/// where the compiler of its kernel comes from.
fn debian_release(apt: &ImageApt) -> Result<(String, String)> {
    apt.sources
        .iter()
        .filter(|s| s.is_debian_archive())
        .find_map(|s| {
            let uri = s.uris.first()?;
            let suite = s.suites.iter().find(|x| !x.contains(['-', '/']))?;
            Some((uri.clone(), suite.clone()))
        })
        .context("the image's apt sources name no Debian release (a URI ending in /debian with a suite such as trixie): ZFS's modules are compiled with the compiler of the kernel's Debian release; set `[packages] mirror`")
}

/// ZFS modules an image carries for one kernel: staged for the first boot
/// by a build, or installed by dpkg.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InImage {
    pub release: String,
    pub version: String,
    /// "staged for the first boot" or "installed".
    pub state: &'static str,
    /// The userland staged or installed beside them, when there is one.
    pub zfsutils: Option<String>,
}

impl InImage {
    pub fn describe(&self) -> String {
        format!(
            "zfs ✓ ({}, {}) — {}{}",
            self.version,
            self.release,
            self.state,
            self.zfsutils
                .as_ref()
                .map(|v| format!(", with zfsutils-linux {v}"))
                .unwrap_or_default()
        )
    }
}

/// What an image holds of nasforge's ZFS modules, from the staged
/// repository's manifest and from dpkg's status.
pub fn in_image(root: &crate::image::ext4::Ext4) -> Result<Vec<InImage>> {
    let paths = vec![
        format!("{}/manifest.json", crate::packages::STAGE_DIR),
        "/var/lib/dpkg/status".to_string(),
    ];
    let mut files = root.read_many(&paths)?.into_iter();
    let manifest = files.next().flatten();
    let status = files.next().flatten();
    let mut found = Vec::new();
    if let Some(m) = manifest {
        let staged: serde_json::Value =
            serde_json::from_slice(&m).with_context(|| format!("{} is not JSON", paths[0]))?;
        let debs = staged["debs"].as_array().cloned().unwrap_or_default();
        let version_of = |name: &str| {
            debs.iter()
                .find(|d| d["package"] == name)
                .and_then(|d| d["version"].as_str())
                .map(String::from)
        };
        for d in &debs {
            let package = d["package"].as_str().unwrap_or("");
            if let Some(release) = package.strip_prefix("nasforge-zfs-modules-") {
                found.push(InImage {
                    release: release.to_string(),
                    version: d["version"].as_str().unwrap_or("").to_string(),
                    state: "staged for the first boot",
                    zfsutils: version_of("zfsutils-linux"),
                });
            }
        }
    }
    if let Some(status) = status {
        let status = String::from_utf8_lossy(&status);
        let installed = |s: &str| {
            crate::packages::field(s, "Status").is_some_and(|v| v.ends_with(" installed"))
        };
        let zfsutils = status
            .split("\n\n")
            .find(|s| {
                crate::packages::field(s, "Package") == Some("zfsutils-linux") && installed(s)
            })
            .and_then(|s| crate::packages::field(s, "Version"))
            .map(String::from);
        for s in status.split("\n\n").filter(|s| installed(s)) {
            let Some(release) = crate::packages::field(s, "Package")
                .and_then(|p| p.strip_prefix("nasforge-zfs-modules-"))
            else {
                continue;
            };
            found.push(InImage {
                release: release.to_string(),
                version: crate::packages::field(s, "Version")
                    .unwrap_or("")
                    .to_string(),
                state: "installed",
                zfsutils: zfsutils.clone(),
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_config_is_checked_as_openzfs_configure_checks_it() {
        let debian = "CONFIG_MODULES=y\nCONFIG_BLOCK=y\nCONFIG_ZLIB_INFLATE=y\nCONFIG_ZLIB_DEFLATE=y\n# CONFIG_TRIM_UNUSED_KSYMS is not set\n";
        assert!(kernel_config_problems(debian).is_empty());
        let small =
            "CONFIG_MODULES=y\nCONFIG_BLOCK=y\nCONFIG_ZLIB_INFLATE=m\nCONFIG_TRIM_UNUSED_KSYMS=y\n";
        assert_eq!(
            kernel_config_problems(small),
            vec![
                "CONFIG_ZLIB_DEFLATE is not set (needs y or m)",
                "CONFIG_TRIM_UNUSED_KSYMS=y (must be off)"
            ]
        );
    }

    #[test]
    fn the_bundled_zfs_fragment_satisfies_the_check() {
        let text = crate::kernel::fragments::bundled("zfs").unwrap();
        let f = crate::kernel::fragments::Fragment::parse("zfs", text).unwrap();
        let config: String = f.settings.iter().map(|s| s.render() + "\n").collect();
        assert!(kernel_config_problems(&config).is_empty(), "{config}");
    }
}
