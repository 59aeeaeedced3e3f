//! The kernels in an image, what each can do, and which one the board will
//! actually boot. The CM4 seed could not see its SATA card until the kernel
//! was rebuilt, so this is checked, never assumed.

pub mod build;
pub mod caps;
pub mod fragments;
pub mod install;
pub mod kconfig;
pub mod section;

pub use crate::manifest::Booted;
pub use caps::{Capability, KernelFiles, KernelReport, Presence};

use crate::board::{Family, Model};
use crate::boot::config_txt::ConfigTxt;
use crate::image::Image;
use anyhow::{Result, bail};
use std::io::Read;

/// Every installed kernel (`/lib/modules/<version>`), read in one debugfs run.
pub fn installed(image: &Image) -> Result<Vec<KernelFiles>> {
    let Some(root) = image.ext4() else {
        return Ok(vec![]);
    };
    let mut base = "/lib/modules";
    let mut dirs = root.list(base)?;
    if dirs.is_none() {
        base = "/usr/lib/modules";
        dirs = root.list(base)?;
    }
    let mut versions: Vec<String> = dirs
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == crate::image::ext4::Kind::Dir)
        .map(|e| e.name)
        .collect();
    versions.sort();
    let mut paths = Vec::new();
    for v in &versions {
        paths.push(format!("{base}/{v}/modules.builtin"));
        paths.push(format!("{base}/{v}/modules.dep"));
        paths.push(format!("/boot/config-{v}"));
    }
    let mut contents = root.read_many(&paths)?.into_iter();
    let text = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok(versions
        .into_iter()
        .map(|version| KernelFiles {
            version,
            modules_builtin: text(contents.next().flatten()),
            modules_dep: text(contents.next().flatten()),
            config: text(contents.next().flatten()),
        })
        .collect())
}

/// Module alternatives a board adds to capabilities (from overlays/<board>.toml).
pub fn board_extras(board: Model) -> Vec<(Capability, Vec<String>)> {
    board
        .info()
        .sata_modules
        .into_iter()
        .map(|g| (Capability::Sata, g))
        .collect()
}

/// The version string the kernel image itself carries: "Linux version X ...".
/// Raspberry Pi OS ships gzip-compressed arm64 images, so gzip is unwrapped.
pub fn version_in(mut r: impl Read) -> Result<Option<String>> {
    let mut head = [0u8; 2];
    let n = r.read(&mut head)?;
    let chained = std::io::Read::chain(&head[..n], r);
    let mut reader: Box<dyn Read> = if head[..n] == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(chained))
    } else {
        Box::new(chained)
    };
    const NEEDLE: &[u8] = b"Linux version ";
    let mut window: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => n,
            // A kernel we cannot decompress simply yields no version.
            Err(_) => return Ok(None),
        };
        window.extend_from_slice(&buf[..n]);
        if let Some(i) = window.windows(NEEDLE.len()).position(|w| w == NEEDLE) {
            let rest = &window[i + NEEDLE.len()..];
            if let Some(end) = rest.iter().position(|b| b.is_ascii_whitespace() || *b == 0) {
                return Ok(Some(String::from_utf8_lossy(&rest[..end]).into_owned()));
            }
            if rest.len() > 256 {
                return Ok(None);
            }
            continue;
        }
        let keep = window.len().saturating_sub(NEEDLE.len() + 256);
        window.drain(..keep);
    }
}

/// Works out the kernel `board` boots from this image.
pub fn booted(image: &Image, board: Model, versions: &[String]) -> Result<Booted> {
    let info = board.info();
    let from_name = |file: &str| -> Option<String> {
        let name = file.rsplit('/').next().unwrap_or(file);
        let v = name
            .strip_prefix("vmlinuz-")
            .or_else(|| name.strip_prefix("Image-"))?;
        versions.iter().find(|x| *x == v).cloned()
    };
    match info.family {
        Family::Rpi => {
            let Some(fat) = image.fat(false)? else {
                bail!("board {board} boots from a FAT partition, but this image has none");
            };
            let config = fat
                .read("config.txt")?
                .map(|b| ConfigTxt::parse(&String::from_utf8_lossy(&b)));
            let filters: Vec<String> = info.filters.clone();
            let configured = config
                .as_ref()
                .and_then(|c| c.effective("kernel", &filters));
            let names = fat.list_root()?;
            let (file, reason) = match configured {
                Some(k) => (
                    Some(k.clone()),
                    format!("config.txt sets kernel={k} for {board}"),
                ),
                None => match info
                    .kernels
                    .iter()
                    .find(|k| names.iter().any(|n| n.eq_ignore_ascii_case(&k.image)))
                {
                    Some(k) => (
                        Some(k.image.clone()),
                        format!("{} is what the {board} firmware loads by default", k.image),
                    ),
                    None => (
                        None,
                        format!(
                            "none of the {board} firmware's default kernels ({}) is on the boot partition",
                            info.kernels
                                .iter()
                                .map(|k| k.image.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                },
            };
            let Some(file) = file else {
                return Ok(Booted {
                    board,
                    file: None,
                    version: None,
                    reason,
                });
            };
            if let Some(v) = from_name(&file) {
                return Ok(Booted {
                    board,
                    file: Some(file),
                    version: Some(v),
                    reason,
                });
            }
            if let Some(r) = fat.reader(&file)? {
                if let Some(v) = version_in(r)? {
                    return Ok(Booted {
                        board,
                        file: Some(file),
                        version: Some(v),
                        reason: format!("{reason}; its header names the version"),
                    });
                }
            } else {
                return Ok(Booted {
                    board,
                    file: Some(file.clone()),
                    version: None,
                    reason: format!("{reason}, but {file} is missing from the boot partition"),
                });
            }
            let suffix = info
                .kernels
                .iter()
                .find(|k| k.image.eq_ignore_ascii_case(&file))
                .map(|k| k.module_suffix.clone());
            let by_suffix: Vec<&String> = versions
                .iter()
                .filter(|v| suffix.as_ref().is_some_and(|s| v.ends_with(s.as_str())))
                .collect();
            let version = by_suffix.last().map(|v| (*v).clone());
            Ok(Booted {
                board,
                file: Some(file),
                version,
                reason: format!("{reason}; matched by module directory suffix"),
            })
        }
        Family::Armbian | Family::Generic => {
            let Some(root) = image.ext4() else {
                bail!("board {board} boots from the ext4 root, but this image has none");
            };
            // Armbian links /boot/Image; Debian links /boot/vmlinuz and /vmlinuz.
            let candidates = ["/boot/Image", "/boot/vmlinuz", "/vmlinuz"];
            for c in candidates {
                if let Some(target) = root.readlink(c)?
                    && let Some(v) = from_name(&target)
                {
                    return Ok(Booted {
                        board,
                        file: Some(c.to_string()),
                        version: Some(v),
                        reason: format!("{c} links to {target}"),
                    });
                }
                let tmp = tempfile::NamedTempFile::new()?;
                if root.dump(c, tmp.path())?
                    && let Some(v) = version_in(std::fs::File::open(tmp.path())?)?
                {
                    return Ok(Booted {
                        board,
                        file: Some(c.to_string()),
                        version: Some(v),
                        reason: format!("{c}'s header names its version"),
                    });
                }
            }
            if versions.len() == 1 {
                return Ok(Booted {
                    board,
                    file: None,
                    version: Some(versions[0].clone()),
                    reason: "the only kernel in /lib/modules".into(),
                });
            }
            Ok(Booted {
                board,
                file: None,
                version: None,
                reason: format!("no {} in the root filesystem", candidates.join(" or ")),
            })
        }
    }
}

/// Fails unless the kernel the board boots has every required capability.
pub fn require(
    board: Model,
    booted: &Booted,
    kernels: &[KernelFiles],
    required: &[Capability],
) -> Result<KernelReport> {
    let Some(version) = &booted.version else {
        bail!(
            "cannot tell which kernel {board} boots from this image ({}), so `[kernel] require` cannot be checked",
            booted.reason
        );
    };
    let Some(files) = kernels.iter().find(|k| &k.version == version) else {
        bail!(
            "{board} boots kernel {version} ({}), but the image has no /lib/modules/{version}; installed: {}",
            booted.reason,
            kernels
                .iter()
                .map(|k| k.version.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let extras = board_extras(board);
    let report = files.report(&extras);
    let missing = report.missing(required);
    if !missing.is_empty() {
        bail!(
            "the kernel {board} boots, {version} ({}), lacks {}.\nThis image cannot run the NAS as it is: pick a base image whose kernel has these drivers (Raspberry Pi OS kernels since 2021 carry SATA and md as modules), or drop the capability from `[kernel] require` if the board does not need it.\n{}",
            booted.reason,
            missing.join(" and "),
            build::remedy(board, required)
        );
    }
    Ok(report)
}
