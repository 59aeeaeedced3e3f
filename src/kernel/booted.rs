//! Which kernel a board will actually boot: what its firmware or boot
//! script loads, and the version that file carries.

use crate::board::{BoardInfo, Family, Model};
use crate::boot::config_txt::ConfigTxt;
use crate::image::Image;
use crate::image::fat::Fat;
use crate::manifest::Booted;
use anyhow::{Result, bail};
use std::io::Read;

impl Booted {
    fn new(board: Model, file: Option<String>, version: Option<String>, reason: String) -> Booted {
        Booted {
            board,
            file,
            version,
            reason,
        }
    }
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
    match info.family {
        Family::Rpi => raspberry_pi(image, board, &info, versions),
        Family::Armbian | Family::Generic | Family::Uefi => from_root(image, board, versions),
    }
}

/// The installed version a `vmlinuz-<v>` or `Image-<v>` file is named for.
fn from_name(file: &str, versions: &[String]) -> Option<String> {
    let name = file.rsplit('/').next().unwrap_or(file);
    let v = name
        .strip_prefix("vmlinuz-")
        .or_else(|| name.strip_prefix("Image-"))?;
    versions.iter().find(|x| *x == v).cloned()
}

/// Raspberry Pi: config.txt's `kernel=` for the board, else the first of
/// the firmware's default kernels on the boot partition.
fn raspberry_pi(
    image: &Image,
    board: Model,
    info: &BoardInfo,
    versions: &[String],
) -> Result<Booted> {
    let Some(fat) = image.fat(false)? else {
        bail!("board {board} boots from a FAT partition, but this image has none");
    };
    let (file, reason) = rpi_kernel_file(&fat, board, info)?;
    let Some(file) = file else {
        return Ok(Booted::new(board, None, None, reason));
    };
    if let Some(v) = from_name(&file, versions) {
        return Ok(Booted::new(board, Some(file), Some(v), reason));
    }
    if let Some(r) = fat.reader(&file)? {
        if let Some(v) = version_in(r)? {
            return Ok(Booted::new(
                board,
                Some(file),
                Some(v),
                format!("{reason}; its header names the version"),
            ));
        }
    } else {
        return Ok(Booted::new(
            board,
            Some(file.clone()),
            None,
            format!("{reason}, but {file} is missing from the boot partition"),
        ));
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
    Ok(Booted::new(
        board,
        Some(file),
        version,
        format!("{reason}; matched by module directory suffix"),
    ))
}

/// The kernel file the Raspberry Pi firmware loads, if any, and why.
fn rpi_kernel_file(fat: &Fat, board: Model, info: &BoardInfo) -> Result<(Option<String>, String)> {
    let config = fat
        .read("config.txt")?
        .map(|b| ConfigTxt::parse(&String::from_utf8_lossy(&b)));
    let configured = config
        .as_ref()
        .and_then(|c| c.effective("kernel", &info.filters));
    let names = fat.list_root()?;
    if let Some(k) = configured {
        return Ok((
            Some(k.clone()),
            format!("config.txt sets kernel={k} for {board}"),
        ));
    }
    Ok(
        match info
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
    )
}

/// Armbian and generic boards: the kernel link (or file) on the root
/// filesystem, else the only kernel in /lib/modules.
fn from_root(image: &Image, board: Model, versions: &[String]) -> Result<Booted> {
    let Some(root) = image.ext4() else {
        bail!("board {board} boots from the ext4 root, but this image has none");
    };
    // Armbian links /boot/Image; Debian links /boot/vmlinuz and /vmlinuz.
    let candidates = ["/boot/Image", "/boot/vmlinuz", "/vmlinuz"];
    for c in candidates {
        if let Some(target) = root.readlink(c)?
            && let Some(v) = from_name(&target, versions)
        {
            return Ok(Booted::new(
                board,
                Some(c.to_string()),
                Some(v),
                format!("{c} links to {target}"),
            ));
        }
        let tmp = tempfile::NamedTempFile::new()?;
        if root.dump(c, tmp.path())?
            && let Some(v) = version_in(std::fs::File::open(tmp.path())?)?
        {
            return Ok(Booted::new(
                board,
                Some(c.to_string()),
                Some(v),
                format!("{c}'s header names its version"),
            ));
        }
    }
    if versions.len() == 1 {
        return Ok(Booted::new(
            board,
            None,
            Some(versions[0].clone()),
            "the only kernel in /lib/modules".into(),
        ));
    }
    Ok(Booted::new(
        board,
        None,
        None,
        format!("no {} in the root filesystem", candidates.join(" or ")),
    ))
}
