//! NAS packages staged in the image for an offline first boot: resolved by
//! apt against the image's own status, sources and keyrings, downloaded and
//! checked on the workstation, written into the root filesystem as a flat
//! repository that apt on the board installs from with no network.

pub mod apt;
pub mod section;
pub mod sources;

use crate::image::ext4::{Ext4, Op};
use anyhow::{Context, Result, bail};
use apt::{AptRoot, Download, ImageFile};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Where the staged repository lives on the board.
pub const STAGE_DIR: &str = "/var/lib/nasforge/debs";

/// One resolved package, downloaded and verified.
#[derive(Debug, Clone, Serialize)]
pub struct Deb {
    pub package: String,
    pub version: String,
    pub architecture: String,
    pub filename: String,
    pub size: u64,
    pub sha256: String,
    pub installed_size_kib: u64,
    #[serde(skip)]
    pub stanza: String,
    #[serde(skip)]
    pub local: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    pub architecture: String,
    pub requested: Vec<String>,
    pub debs: Vec<Deb>,
}

impl Resolved {
    pub fn download_bytes(&self) -> u64 {
        self.debs.iter().map(|d| d.size).sum()
    }

    /// What the packages take once unpacked on the board.
    pub fn installed_bytes(&self) -> u64 {
        self.debs.iter().map(|d| d.installed_size_kib * 1024).sum()
    }

    /// `+ 23 packages (41.2 MiB): mdadm 4.2-5, samba 2:4.17.12+dfsg-0+deb12u4
    /// and 21 dependencies` — what was asked for by name, the rest counted
    /// (the manifest lists every one).
    pub fn summary(&self) -> String {
        let named: Vec<String> = self
            .debs
            .iter()
            .filter(|d| {
                self.requested
                    .iter()
                    .any(|r| r.split('=').next() == Some(d.package.as_str()))
            })
            .map(|d| format!("{} {}", d.package, d.version))
            .collect();
        let others = self.debs.len() - named.len();
        let rest = if others > 0 {
            format!(" and {others} dependencies")
        } else {
            String::new()
        };
        format!(
            "+ {} packages ({}): {}{rest}",
            self.debs.len(),
            crate::size::human(self.download_bytes()),
            named.join(", ")
        )
    }
}

pub(crate) fn field<'a>(stanza: &'a str, name: &str) -> Option<&'a str> {
    stanza
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The image's dpkg architecture: the one dpkg itself is built for.
fn architecture(status: &str) -> Result<String> {
    status
        .split("\n\n")
        .find(|s| field(s, "Package") == Some("dpkg"))
        .and_then(|s| field(s, "Architecture"))
        .map(String::from)
        .context(
            "the image's /var/lib/dpkg/status has no dpkg entry, so its architecture is unknown",
        )
}

/// The image's apt sources, as its files list them.
pub(crate) fn listed_sources(root: &Ext4) -> Result<Vec<sources::AptSource>> {
    let mut files = vec!["/etc/apt/sources.list".to_string()];
    if let Some(entries) = root.list("/etc/apt/sources.list.d")? {
        let mut names: Vec<String> = entries
            .into_iter()
            .map(|e| e.name)
            .filter(|n| n.ends_with(".list") || n.ends_with(".sources"))
            .collect();
        names.sort();
        files.extend(
            names
                .into_iter()
                .map(|n| format!("/etc/apt/sources.list.d/{n}")),
        );
    }
    let mut all = Vec::new();
    for (path, data) in files.iter().zip(root.read_many(&files)?) {
        let Some(data) = data else { continue };
        let text = String::from_utf8_lossy(&data);
        all.extend(sources::parse_file(path, &text)?);
    }
    Ok(all)
}

/// The image's apt sources, with `mirror` applied.
fn image_sources(root: &Ext4, mirror: Option<&str>) -> Result<Vec<sources::AptSource>> {
    let mut all = listed_sources(root)?;
    if all.is_empty() {
        bail!(
            "the image has no apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/); set `[packages] mirror`"
        );
    }
    if let Some(m) = mirror {
        let mut replaced = false;
        for s in all.iter_mut().filter(|s| s.is_debian_archive()) {
            s.uris = vec![m.to_string()];
            replaced = true;
        }
        if !replaced {
            bail!(
                "`[packages] mirror` replaces the image's Debian archive entries (URIs ending in /debian), but it has none"
            );
        }
    }
    Ok(all)
}

/// The keyrings the sources trust, read from the image.
fn image_keyrings(root: &Ext4, sources: &[sources::AptSource]) -> Result<Vec<ImageFile>> {
    let mut out = Vec::new();
    let mut wanted: Vec<(String, String)> = Vec::new();
    for s in sources {
        for k in &s.signed_by {
            match k.strip_prefix("inline:") {
                Some(block) => out.push(ImageFile {
                    path: k.clone(),
                    data: block.as_bytes().to_vec(),
                }),
                None => wanted.push((k.clone(), s.origin.clone())),
            }
        }
    }
    if let Some(entries) = root.list("/etc/apt/trusted.gpg.d")? {
        for e in entries {
            wanted.push((format!("/etc/apt/trusted.gpg.d/{}", e.name), String::new()));
        }
    }
    wanted.sort();
    wanted.dedup_by(|a, b| a.0 == b.0);
    let paths: Vec<String> = wanted.iter().map(|(p, _)| p.clone()).collect();
    for ((path, origin), data) in wanted.iter().zip(root.read_many(&paths)?) {
        match data {
            Some(data) => out.push(ImageFile {
                path: path.clone(),
                data,
            }),
            None if origin.is_empty() => {}
            None => bail!("{origin}: the keyring {path} it is signed by is missing from the image"),
        }
    }
    Ok(out)
}

/// apt on this machine set up as the image's own: its architecture, its
/// sources (with `mirror` applied) and only its keyrings, lists updated.
pub struct ImageApt {
    pub arch: String,
    pub sources: Vec<sources::AptSource>,
    pub apt: AptRoot,
    keyrings: Vec<ImageFile>,
}

impl ImageApt {
    pub fn open(
        root: &Ext4,
        mirror: Option<&str>,
        cache: &Path,
        refresh: bool,
    ) -> Result<ImageApt> {
        let status = root
            .read("/var/lib/dpkg/status")?
            .context("the image has no /var/lib/dpkg/status: is it a Debian-based image?")?;
        let status_text = String::from_utf8_lossy(&status).into_owned();
        let arch = architecture(&status_text)?;
        let sources = image_sources(root, mirror)?;
        let keyrings = image_keyrings(root, &sources)?;
        let apt = AptRoot::prepare(cache, &arch, &sources, &keyrings, &status)?;
        apt.update(refresh)?;
        Ok(ImageApt {
            arch,
            sources,
            apt,
            keyrings,
        })
    }

    /// The image's sources, trusted with the image's keys, read for another
    /// architecture (this machine's, for build tools that run here) with
    /// nothing installed.
    pub fn for_architecture(&self, arch: &str, cache: &Path, refresh: bool) -> Result<AptRoot> {
        let apt = AptRoot::prepare(cache, arch, &self.sources, &self.keyrings, b"")?;
        apt.update(refresh)?;
        Ok(apt)
    }

    /// Downloads what apt chose into the sha256-keyed cache, each file
    /// checked against the signed index, with the index entry that
    /// describes it.
    pub fn fetch(&self, downloads: &[Download], cache: &Path, what: &str) -> Result<Vec<Deb>> {
        fetch_from(&self.apt, downloads, cache, what)
    }
}

/// [`ImageApt::fetch`] from any of the image's apt roots.
pub fn fetch_from(
    apt: &AptRoot,
    downloads: &[Download],
    cache: &Path,
    what: &str,
) -> Result<Vec<Deb>> {
    let names: Vec<String> = downloads
        .iter()
        .map(|d| d.filename.split('_').next().unwrap_or("").to_string())
        .collect();
    let stanzas = if downloads.is_empty() {
        vec![]
    } else {
        apt.stanzas(&names, downloads)?
    };
    let bar = crate::io::progress::bytes(downloads.iter().map(|d| d.size).sum(), what);
    let mut debs = Vec::new();
    for (d, stanza) in downloads.iter().zip(stanzas) {
        let local = crate::fetch::fetch(&d.uri, &d.sha256, cache)
            .with_context(|| format!("downloading {}", d.filename))?;
        bar.inc(d.size);
        debs.push(Deb {
            package: field(&stanza, "Package").unwrap_or_default().to_string(),
            version: field(&stanza, "Version").unwrap_or_default().to_string(),
            architecture: field(&stanza, "Architecture")
                .unwrap_or_default()
                .to_string(),
            filename: d.filename.clone(),
            size: d.size,
            sha256: d.sha256.clone(),
            installed_size_kib: field(&stanza, "Installed-Size")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            stanza,
            local,
        });
    }
    bar.finish_and_clear();
    Ok(debs)
}

/// Resolves `install` against the image and downloads every package into
/// the sha256-keyed cache (a rebuild downloads nothing).
pub fn resolve(
    root: &Ext4,
    install: &[String],
    mirror: Option<&str>,
    cache: &Path,
    refresh: bool,
) -> Result<Resolved> {
    let image = ImageApt::open(root, mirror, cache, refresh)?;
    let downloads: Vec<Download> = image.apt.resolve(install)?;
    let debs = image.fetch(&downloads, cache, "packages")?;
    Ok(Resolved {
        architecture: image.arch,
        requested: install.to_vec(),
        debs,
    })
}

/// The flat repository's index: each stanza as the signed archive listed
/// it, with `Filename` pointing into the staged directory.
pub fn packages_index(resolved: &Resolved) -> String {
    let mut out = String::new();
    for d in &resolved.debs {
        for line in d.stanza.lines() {
            if line.starts_with("Filename:") {
                out.push_str(&format!("Filename: ./{}\n", d.filename));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    out
}

/// A Release file for the staged repository. Without one, apt on the board
/// probes for Packages.xz, .gz, .bz2 ... and logs an error for each that is
/// missing; with it, apt fetches the one index it lists and checks its
/// sha256. The date is fixed so that the same packages stage the same bytes.
fn release_for(index: &str) -> String {
    format!(
        "Date: Thu, 01 Jan 1970 00:00:00 UTC\nSHA256:\n {} {} Packages\n",
        crate::io::hash::sha256_hex(index.as_bytes()),
        index.len()
    )
}

/// The changes that put the packages, their index and a manifest into the
/// image (the directory must exist).
pub fn stage(resolved: &Resolved) -> Result<Vec<Op>> {
    let mut ops = Vec::new();
    for d in &resolved.debs {
        // The cache is trusted only after one more look: the file about to go
        // into the image is the one apt's signed index describes.
        let file = std::fs::File::open(&d.local)
            .with_context(|| format!("opening {}", d.local.display()))?;
        let digest = crate::io::hash::hash_file(&file, |_| {})?;
        if digest != d.sha256 {
            bail!(
                "cached {} is corrupt (sha256 {digest}, expected {}); delete it and build again",
                d.local.display(),
                d.sha256
            );
        }
        ops.push(Op::Copy {
            path: format!("{STAGE_DIR}/{}", d.filename),
            from: d.local.clone(),
            mode: 0o644,
            uid: 0,
            gid: 0,
        });
    }
    let index = packages_index(resolved);
    let release = release_for(&index);
    ops.push(Op::root_file(
        format!("{STAGE_DIR}/Packages"),
        index.into_bytes(),
        0o644,
    ));
    ops.push(Op::root_file(
        format!("{STAGE_DIR}/Release"),
        release.into_bytes(),
        0o644,
    ));
    let manifest = serde_json::to_string_pretty(resolved)?;
    ops.push(Op::root_file(
        format!("{STAGE_DIR}/manifest.json"),
        manifest.into_bytes(),
        0o644,
    ));
    Ok(ops)
}
