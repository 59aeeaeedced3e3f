//! What a ZFS build is made from, all resolved from the image's own apt
//! sources and checked against their signed indices like every staged
//! package: the kernel's headers (with the kbuild tools they name), the
//! OpenZFS source that Debian ships as `zfs-dkms`, and the userland of the
//! same version that the board installs at first boot.

use super::kernel_package::KernelPackage;
use crate::packages::{Deb, ImageApt, field};
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::{Command, Stdio};

/// The OpenZFS source chosen for the kernel.
#[derive(Debug, Clone)]
pub struct ZfsSource {
    /// `zfs-dkms` as a verified download.
    pub deb: Deb,
    /// OpenZFS's own version (`2.1.11`), the directory under /usr/src.
    pub upstream: String,
}

#[derive(Debug, Clone)]
pub struct Inputs {
    pub zfs: ZfsSource,
    /// The headers package and the packages of it that hold the rest of the
    /// tree (Debian's `-common` and `linux-kbuild-*`); empty when the
    /// modules are built against a tree nasforge compiled itself.
    pub headers: Vec<Deb>,
    /// The userland packages of exactly the modules' version, as apt takes
    /// them (`zfsutils-linux=2.1.11-1+deb12u1`, its libraries, `zfs-zed`).
    pub userland: Vec<String>,
}

/// The kernel versions an OpenZFS release builds against, from the META
/// file at the top of its source (`Linux-Minimum: 3.10`, `Linux-Maximum: 6.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supported {
    pub min: (u32, u32),
    pub max: (u32, u32),
}

impl Supported {
    pub fn parse(meta: &str) -> Option<Supported> {
        let get = |k: &str| {
            meta.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(':'))
        };
        Some(Supported {
            min: major_minor(get("Linux-Minimum")?.trim())?,
            max: major_minor(get("Linux-Maximum")?.trim())?,
        })
    }

    pub fn covers(&self, kernel: (u32, u32)) -> bool {
        self.min <= kernel && kernel <= self.max
    }
}

/// `6.1` of `6.1.0-57-arm64`, `6.12.47+rpt-rpi-v8` or `6.2`.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `2.1.11-1+deb12u1` → `2.1.11`: the version without epoch and Debian revision.
fn upstream_of(version: &str) -> &str {
    let v = version.split_once(':').map_or(version, |(_, v)| v);
    v.rsplit_once('-').map_or(v, |(u, _)| u)
}

/// Why the image cannot have ZFS from its sources: Debian ships OpenZFS in
/// `contrib`, which minimal images leave out.
fn no_zfs_source(apt: &ImageApt) -> anyhow::Error {
    let lines: Vec<String> = apt
        .sources
        .iter()
        .map(|s| {
            format!(
                "{}: {} {} {}",
                s.origin,
                s.uris.join(" "),
                s.suites.join(" "),
                s.components.join(" ")
            )
        })
        .collect();
    let contrib = apt
        .sources
        .iter()
        .any(|s| s.components.iter().any(|c| c == "contrib"));
    anyhow::anyhow!(
        "the image's apt sources offer no zfs-dkms, the OpenZFS source nasforge builds the board's ZFS modules from{}:\n  {}\n{}",
        if contrib {
            ""
        } else {
            " (Debian ships OpenZFS in `contrib`, which none of them lists)"
        },
        lines.join("\n  "),
        if contrib {
            "Add a source that carries zfs-dkms (Debian's bookworm-backports contrib has newer releases), or build the pool with md (a raid level and ext4/xfs/btrfs)."
        } else {
            "Add `contrib` to the Debian line of the base image's sources (Raspberry Pi OS lists it already), or build the pool with md (a raid level and ext4/xfs/btrfs)."
        }
    )
}

/// The headers of `kernel`, and the packages of the same source they need
/// for a module build; refused when the sources no longer carry them.
fn headers(apt: &ImageApt, kernel: &KernelPackage, cache: &Path) -> Result<Vec<Deb>> {
    let name = kernel.headers();
    let Some(stanza) = apt.apt.stanza(&name, &kernel.version)? else {
        let offered = apt.apt.versions(&name)?;
        bail!(
            "the image's apt sources have no {name} {} — the headers of the kernel the board boots ({} from {} {}), which ZFS's modules are compiled against{}.\nThe archive has moved on from this kernel: update the base image (a newer release, or a rebuilt Debian base), or use `[kernel] build`, whose kernel nasforge builds ZFS against itself.",
            kernel.version,
            kernel.release,
            kernel.package,
            kernel.version,
            if offered.is_empty() {
                String::new()
            } else {
                format!("; they offer {}", offered.join(", "))
            }
        );
    };
    let mut specs = vec![format!("{name}={}", kernel.version)];
    // The rest of the tree lives in packages the headers depend on:
    // Debian's `-common` (same version) and `linux-kbuild-*` (at least it).
    for dep in field(&stanza, "Depends").unwrap_or("").split(',') {
        let dep = dep.split('|').next().unwrap_or("").trim();
        let pkg = dep.split_whitespace().next().unwrap_or("");
        if !(pkg.starts_with("linux-headers-") || pkg.starts_with("linux-kbuild-")) {
            continue;
        }
        match dep.split_once("(=") {
            Some((_, v)) => specs.push(format!("{pkg}={}", v.trim_end_matches(')').trim())),
            None => specs.push(pkg.to_string()),
        }
    }
    let downloads = apt.apt.download_uris(&specs)?;
    apt.fetch(&downloads, cache, "kernel headers")
}

/// This machine's architecture in dpkg's spelling, for the architectures
/// a Debian archive builds.
fn host_arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("amd64"),
        "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// The kbuild package among the headers' (`linux-kbuild-6.1`), for this
/// machine's architecture and of the same version, from the image's own
/// sources with the same signature checks. Debian builds it for every
/// architecture and marks it Multi-Arch: foreign for cross builds; its
/// fixdep, modpost and genksyms then run here natively, which measured a
/// third off the module build (compile 379 s → 231 s, configure 217 s →
/// 188 s). None, with the reason said, where that cannot be had (Raspberry
/// Pi's archive builds only arm64 and armhf): the board's tools run through
/// qemu-user instead.
pub fn native_tools(apt: &ImageApt, headers: &[Deb], cache: &Path) -> Option<Deb> {
    let kbuild = headers
        .iter()
        .find(|d| d.package.starts_with("linux-kbuild-"))?;
    let host = host_arch()?;
    if host == kbuild.architecture {
        return None;
    }
    let found = (|| -> Result<Option<Deb>> {
        let native = apt.for_architecture(host, cache, false)?;
        let Some(stanza) = native.stanza(&kbuild.package, &kbuild.version)? else {
            return Ok(None);
        };
        if field(&stanza, "Multi-Arch") != Some("foreign") {
            return Ok(None);
        }
        let spec = format!("{}={}", kbuild.package, kbuild.version);
        let downloads = native.download_uris(&[spec])?;
        Ok(crate::packages::fetch_from(&native, &downloads, cache, "kbuild tools")?.pop())
    })();
    match found {
        Ok(Some(deb)) => Some(deb),
        Ok(None) => {
            say_tools(&format!(
                "the image's sources have no {} {} for {host}: its {} tools run through qemu-user",
                kbuild.package, kbuild.version, kbuild.architecture
            ));
            None
        }
        Err(e) => {
            say_tools(&format!(
                "{} for {host} could not be had ({e:#}): the {} tools run through qemu-user",
                kbuild.package, kbuild.architecture
            ));
            None
        }
    }
}

fn say_tools(msg: &str) {
    eprintln!("{:>10}  {msg}", "zfs");
}

/// The META file of a zfs-dkms package, read without unpacking the rest.
fn meta(deb: &Path, upstream: &str) -> Result<String> {
    let mut tar = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("running dpkg-deb (scripts/setup installs dpkg)")?;
    let out = Command::new("tar")
        .args(["-xO", &format!("./usr/src/zfs-{upstream}/META")])
        .stdin(tar.stdout.take().expect("piped"))
        .output()
        .context("running tar")?;
    let _ = tar.wait();
    if !out.status.success() {
        bail!(
            "{} has no usr/src/zfs-{upstream}/META: it is not the OpenZFS source package nasforge expects",
            deb.display()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The newest zfs-dkms the sources offer that builds for `release`, apt's
/// candidate first (the version the image's pinning prefers).
fn zfs_source(apt: &ImageApt, release: &str, cache: &Path) -> Result<ZfsSource> {
    let versions = apt.apt.versions("zfs-dkms")?;
    if versions.is_empty() {
        return Err(no_zfs_source(apt));
    }
    let kernel = major_minor(release)
        .with_context(|| format!("cannot read a kernel version from `{release}`"))?;
    let mut refused = Vec::new();
    for version in &versions {
        let downloads = apt.apt.download_uris(&[format!("zfs-dkms={version}")])?;
        let deb = apt
            .fetch(&downloads, cache, "zfs-dkms")?
            .pop()
            .context("apt listed no file for zfs-dkms")?;
        let upstream = upstream_of(version).to_string();
        let text = meta(&deb.local, &upstream)?;
        let supported = Supported::parse(&text).with_context(|| {
            format!("zfs-dkms {version}'s META names no Linux-Minimum/Linux-Maximum")
        })?;
        if supported.covers(kernel) {
            return Ok(ZfsSource { deb, upstream });
        }
        refused.push(format!(
            "zfs-dkms {version} builds for Linux {}.{} to {}.{}",
            supported.min.0, supported.min.1, supported.max.0, supported.max.1
        ));
    }
    bail!(
        "no zfs-dkms in the image's apt sources builds for the board's kernel {release}:\n  {}\nAdd a source with a newer OpenZFS (Debian's bookworm-backports contrib), or boot an older kernel.",
        refused.join("\n  ")
    )
}

/// The userland packages of exactly `version`: zfsutils-linux, its
/// libraries of the same version (apt would otherwise mix a backport's
/// tools with a stable library) and zed.
fn userland(apt: &ImageApt, version: &str) -> Result<Vec<String>> {
    let Some(stanza) = apt.apt.stanza("zfsutils-linux", version)? else {
        bail!(
            "the image's apt sources have zfs-dkms {version} but no zfsutils-linux {version}: the board's tools must be of the modules' version"
        );
    };
    let mut specs = vec![
        format!("zfsutils-linux={version}"),
        format!("zfs-zed={version}"),
    ];
    for dep in field(&stanza, "Depends").unwrap_or("").split(',') {
        let dep = dep.trim();
        if let Some((pkg, v)) = dep.split_once("(=")
            && v.trim_end_matches(')').trim() == version
        {
            specs.push(format!("{}={version}", pkg.trim()));
        }
    }
    Ok(specs)
}

/// Everything a build for kernel `release` needs; `kernel` is its package,
/// whose headers are taken, and None for a kernel nasforge built itself.
pub fn resolve(
    apt: &ImageApt,
    release: &str,
    kernel: Option<&KernelPackage>,
    cache: &Path,
) -> Result<Inputs> {
    let zfs = zfs_source(apt, release, cache)?;
    let headers = match kernel {
        Some(k) => headers(apt, k, cache)?,
        None => vec![],
    };
    let userland = userland(apt, &zfs.deb.version)?;
    Ok(Inputs {
        zfs,
        headers,
        userland,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_gives_the_kernels_a_release_builds_for() {
        // The META of Debian's zfs-dkms 2.1.11-1+deb12u1.
        let meta = "Meta:          1\nName:          zfs\nBranch:        1.0\nVersion:       2.1.11\nRelease:      1+deb12u1\nRelease-Tags:  relext\nLicense:       CDDL\nAuthor:        OpenZFS\nLinux-Maximum: 6.2\nLinux-Minimum: 3.10\n";
        let s = Supported::parse(meta).unwrap();
        assert_eq!(s.max, (6, 2));
        assert!(s.covers(major_minor("6.1.0-57-arm64").unwrap()));
        assert!(!s.covers(major_minor("6.12.47+rpt-rpi-v8").unwrap()));
        assert!(!s.covers((3, 2)));
        assert_eq!(Supported::parse("Version: 2.1.11\n"), None);
    }

    #[test]
    fn versions_read_as_upstream_and_kernel_numbers() {
        assert_eq!(upstream_of("2.1.11-1+deb12u1"), "2.1.11");
        assert_eq!(upstream_of("2.3.2-2~bpo12+2"), "2.3.2");
        assert_eq!(upstream_of("1:2.2.0-1"), "2.2.0");
        assert_eq!(major_minor("6.12.47+rpt-rpi-v8"), Some((6, 12)));
        assert_eq!(major_minor("6.2"), Some((6, 2)));
        assert_eq!(major_minor("current"), None);
    }
}
