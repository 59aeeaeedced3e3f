//! Base images built from Debian's own packages, the way Debian's raspi
//! images are made: mmdebstrap (with qemu-user for a foreign architecture)
//! installs systemd, `linux-image-<arch>` and `raspi-firmware`, and the result
//! is laid out like those images: MBR, FAT `RASPIFIRM` mounted at
//! /boot/firmware, ext4 `RASPIROOT`. An amd64 base is a UEFI PC's disk
//! instead: GPT, an EFI system partition with GRUB from `grub-efi-amd64-bin`,
//! ext4 root. No vendor download is involved.
//!
//! Package configuration and mkinitramfs under emulation take many minutes,
//! so the image is cached by everything that goes into it and built once per
//! machine.

use crate::diag::Located;
use crate::io::hash::sha256_hex;
use crate::packages::sources;
use crate::section::{RecipeText, url_problem};
use anyhow::{Context, Result, bail};
use nasforge_engine::steps::shell_quote;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use toml::Spanned;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebianBase {
    /// A Debian suite: `bookworm`, `trixie`, ...
    pub suite: String,
    /// A dpkg architecture: `arm64` (Raspberry Pi layout) or `amd64` (PC).
    pub arch: String,
    /// The Debian archive; default: the one this machine's apt uses.
    pub mirror: Option<String>,
    /// Packages beyond the base set.
    #[serde(default)]
    pub packages: Vec<String>,
}

/// The checks `[base] debian` needs before anything is run: names that
/// end up on mmdebstrap's command line and in apt's sources.
pub(crate) fn check(d: &Spanned<DebianBase>, at: &RecipeText) -> Vec<Located> {
    use crate::packages::section::{
        MIRROR_HELP, MIRROR_SCHEMES, PACKAGE_NAME_HELP, is_package_name,
    };
    let deb = d.get_ref();
    let mut errs = Vec::new();
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-+.".contains(c))
    };
    if !word(&deb.suite) || !word(&deb.arch) {
        errs.push(
            at.at(
                d.span(),
                format!(
                    "`{}`/`{}` is not a Debian suite and architecture",
                    deb.suite, deb.arch
                ),
            )
            .with_help("e.g. debian = { suite = \"bookworm\", arch = \"arm64\" }"),
        );
    } else if Layout::of(&deb.arch).is_none() {
        errs.push(
            at.at(
                d.span(),
                format!("nasforge lays out no `{}` Debian image", deb.arch),
            )
            .with_help("use `arm64` (Raspberry Pi and other arm64 boards) or `amd64` (a UEFI PC)"),
        );
    }
    if let Some(why) = deb
        .mirror
        .as_deref()
        .and_then(|m| url_problem(m, MIRROR_SCHEMES))
    {
        errs.push(
            at.at(d.span(), format!("`mirror`: {why}"))
                .with_help(MIRROR_HELP),
        );
    }
    for name in deb.packages.iter().filter(|n| !is_package_name(n)) {
        errs.push(
            at.at(
                d.span(),
                format!("`{}` is not a Debian package name", name.escape_debug()),
            )
            .with_help(PACKAGE_NAME_HELP),
        );
    }
    errs
}

/// What every image gets: an init, the initramfs tools, and what a headless
/// box needs to come up on a network and keep its clock. The kernel and the
/// boot files come with the architecture's `Layout`.
const BASE_PACKAGES: &[&str] = &[
    "systemd-sysv",
    "udev",
    "kmod",
    "dbus",
    "systemd-timesyncd",
    "iproute2",
    "netbase",
    "sudo",
    "tzdata",
    "ca-certificates",
    "initramfs-tools",
    // initramfs-tools compresses with zstd when it is there: much faster than
    // gzip, which matters when the board rebuilds it after mdadm.conf.
    "zstd",
    "e2fsprogs",
    "dosfstools",
    "procps",
    "less",
];

/// How the finished tree becomes a disk image, per architecture. The hook
/// runs as mmdebstrap's customize hook, inside mmdebstrap's user namespace
/// when not root, so the files keep their owners without nasforge needing root.
struct Layout {
    hook: &'static str,
    /// What this kind of machine needs to boot, beside `BASE_PACKAGES`.
    boot_packages: &'static [&'static str],
}

impl Layout {
    fn of(arch: &str) -> Option<Layout> {
        match arch {
            "arm64" => Some(Layout {
                hook: concat!(
                    include_str!("../files/debian/common.sh"),
                    include_str!("../files/debian/layout-image.sh")
                ),
                boot_packages: &["raspi-firmware"],
            }),
            // grub-mkimage is in grub-common, which this depends on; not
            // grub-efi-amd64, whose scripts would run grub-install.
            "amd64" => Some(Layout {
                hook: concat!(
                    include_str!("../files/debian/common.sh"),
                    include_str!("../files/debian/layout-pc.sh")
                ),
                boot_packages: &["grub-efi-amd64-bin"],
            }),
            _ => None,
        }
    }
}
/// Every package that touches the kernel would rebuild the initramfs, each
/// time taking minutes under emulation: update-initramfs is diverted away
/// while packages install, and the layout hook builds the initramfs once.
const ESSENTIAL_HOOK: &str = "chroot \"$1\" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs && ln -s /bin/true \"$1/usr/sbin/update-initramfs\"";

/// dpkg without an fsync per file while the base installs: the tree is
/// copied into the image by mke2fs afterwards, so a crash midway only fails
/// the build. A file of the build's own, which the layout hook leaves out of
/// the image (mmdebstrap's `--dpkgopt` would stay in it for good, and the
/// board's dpkg must sync).
const SETUP_HOOK: &str = "mkdir -p \"$1/etc/dpkg/dpkg.cfg.d\" && echo force-unsafe-io > \"$1/etc/dpkg/dpkg.cfg.d/nasforge-build\"";

/// The machine's own Debian archive address, from its apt sources.
pub fn host_mirror() -> Result<String> {
    sources::host()
        .into_iter()
        .find(|s| s.is_debian_archive())
        .and_then(|s| s.uris.into_iter().next())
        .context("this machine's apt has no Debian archive source (a URI ending in /debian); set `mirror` in `[base] debian`")
}

/// The customize hook that runs `script` with `NASFORGE_IMAGE` set to
/// `image`. mmdebstrap runs a hook with `sh -c`, so both are quoted for the
/// shell: the path comes from `$HOME` or `NASFORGE_CACHE` and may hold any
/// character.
fn layout_hook(image: &Path, script: &str) -> Result<String> {
    let image = image.to_str().with_context(|| {
        format!(
            "the cache path {} is not valid UTF-8; set NASFORGE_CACHE to another directory",
            image.display()
        )
    })?;
    Ok(format!(
        "NASFORGE_IMAGE={} sh -c {} nasforge-layout \"$1\"",
        shell_quote(image),
        shell_quote(script)
    ))
}

/// The archive's components the image's sources list: `contrib` is where
/// Debian ships OpenZFS, `non-free-firmware` the Pi's boot firmware.
const COMPONENTS: &str = "main,contrib,non-free-firmware";

struct CacheEntry {
    image: PathBuf,
    mirror: String,
    packages: Vec<String>,
    key: String,
}

impl DebianBase {
    fn layout(&self) -> Result<Layout> {
        Layout::of(&self.arch)
            .with_context(|| format!("nasforge lays out no `{}` Debian image", self.arch))
    }

    fn packages(&self, layout: &Layout) -> Vec<String> {
        let kernel = format!("linux-image-{}", self.arch);
        BASE_PACKAGES
            .iter()
            .chain(layout.boot_packages)
            .map(|s| s.to_string())
            .chain([kernel])
            .chain(self.packages.iter().cloned())
            .collect()
    }

    /// Where the image for these inputs is cached, whether or not it is
    /// built yet, with the mirror and packages it is built from.
    fn cache_entry(&self, cache: &Path) -> Result<CacheEntry> {
        let mirror = match &self.mirror {
            Some(m) => m.clone(),
            None => host_mirror()?,
        };
        let layout = self.layout()?;
        let packages = self.packages(&layout);
        let key = sha256_hex(
            format!(
                "{}\n{}\n{mirror}\n{COMPONENTS}\n{}\n{SETUP_HOOK}\n{ESSENTIAL_HOOK}\n{}",
                self.suite,
                self.arch,
                packages.join(","),
                layout.hook
            )
            .as_bytes(),
        );
        let image =
            cache
                .join("debian")
                .join(format!("{}-{}-{}.img", self.suite, self.arch, &key[..12]));
        Ok(CacheEntry {
            image,
            mirror,
            packages,
            key,
        })
    }

    /// The cached image for these inputs if it was built before.
    pub fn cached(&self, cache: &Path) -> Result<Option<PathBuf>> {
        let image = self.cache_entry(cache)?.image;
        Ok(image.is_file().then_some(image))
    }

    /// The cached image for these inputs, building it first if needed.
    pub fn image(&self, cache: &Path) -> Result<PathBuf> {
        let CacheEntry {
            image,
            mirror,
            packages,
            key,
        } = self.cache_entry(cache)?;
        if image.is_file() {
            return Ok(image);
        }
        let layout = self.layout()?;
        let dir = cache.join("debian");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Two builds wanting the same base build it once: the second waits
        // and finds it made.
        let _lock = crate::io::lock::Lock::take(&image.with_extension("lock"))?;
        if image.is_file() {
            return Ok(image);
        }
        let partial = tempfile::Builder::new()
            .prefix(".debian-")
            .suffix(".img")
            .tempfile_in(&dir)?;
        let log_path = dir.join(format!("{}-{}-{}.log", self.suite, self.arch, &key[..12]));
        eprintln!(
            "{:>10}  building Debian {} {} from {mirror} with mmdebstrap (once per machine; minutes, more under emulation; log: {})",
            "base",
            self.suite,
            self.arch,
            log_path.display()
        );
        let log = std::fs::File::create(&log_path)?;
        let hook = layout_hook(partial.path(), layout.hook)?;
        let status = Command::new("mmdebstrap")
            .arg(format!("--arch={}", self.arch))
            .arg("--variant=minbase")
            .arg(format!("--components={COMPONENTS}"))
            .arg(format!("--include={}", packages.join(",")))
            .arg(format!("--setup-hook={SETUP_HOOK}"))
            .arg(format!("--essential-hook={ESSENTIAL_HOOK}"))
            .arg("--customize-hook=echo debian > \"$1/etc/hostname\"")
            .arg(format!("--customize-hook={hook}"))
            .arg(&self.suite)
            .arg("/dev/null")
            .arg(&mirror)
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    anyhow::anyhow!("mmdebstrap not found: install it (scripts/setup does), with qemu-user-static for a foreign architecture")
                } else {
                    anyhow::anyhow!("cannot run mmdebstrap: {e}")
                }
            })?;
        if !status.success() {
            let tail: Vec<String> = std::fs::read_to_string(&log_path)
                .unwrap_or_default()
                .lines()
                .rev()
                .take(15)
                .map(String::from)
                .collect();
            bail!(
                "mmdebstrap failed building Debian {} {} (full log: {}):\n  {}",
                self.suite,
                self.arch,
                log_path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
            );
        }
        partial.persist(&image).map_err(|e| e.error)?;
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_passes_any_cache_path_through_the_shell_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("it's $HOME `id`\n'; touch pwned; '");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let image = cache.join(".debian-x.img");
        let hook = layout_hook(
            &image,
            "printf %s \"$NASFORGE_IMAGE\" > \"$1/image\"; printf %s \"$1\" > \"$1/root\"",
        )
        .unwrap();

        let syntax = Command::new("sh")
            .args(["-n", "-c", &hook])
            .status()
            .unwrap();
        assert!(syntax.success(), "sh -n refuses: {hook}");
        // As mmdebstrap runs a hook: `sh -c HOOK exec ROOT`.
        let out = Command::new("sh")
            .args(["-c", &hook, "exec"])
            .arg(&root)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("image")).unwrap(),
            image.to_str().unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(root.join("root")).unwrap(),
            root.to_str().unwrap()
        );
        assert!(!tmp.path().join("pwned").exists());
    }

    #[test]
    fn a_cache_path_that_is_not_utf8_is_named() {
        use std::os::unix::ffi::OsStrExt;
        let image = Path::new(std::ffi::OsStr::from_bytes(b"/c\xff/x.img"));
        let e = layout_hook(image, "true").unwrap_err().to_string();
        assert!(e.contains("set NASFORGE_CACHE"), "{e}");
    }
}
