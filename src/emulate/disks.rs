//! The emulated machine's data disks: blank ones made in the work
//! directory or images named on the command line, each with a serial that
//! follows its file.

use super::Options;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// How a disk hangs off the emulated machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bus {
    Sata,
    /// Behind the PC's emulated LSI SAS HBAs (`pc::sas_device`).
    Sas,
    UsbStorage,
    Uas,
    /// An NVMe SSD the PC may boot from (`--ssd`, `pc::ssd_device`).
    Nvme,
}

impl Bus {
    pub(super) fn label(self) -> &'static str {
        match self {
            Bus::Sata => "sata",
            Bus::Sas => "sas",
            Bus::UsbStorage => "usb",
            Bus::Uas => "uas",
            Bus::Nvme => "ssd",
        }
    }
}

/// The SATA disks, the SAS disks, then the SSDs: each bus's blank ones
/// (created in `workdir` unless kept from an earlier run), then its
/// existing images named; nothing is created when one of those is missing.
pub(super) fn wired_disks(opts: &Options, workdir: &Path) -> Result<Vec<(PathBuf, Bus)>> {
    for d in opts.disks.iter().chain(&opts.sas_disks).chain(&opts.ssds) {
        if !d.is_file() {
            bail!("disk image {} does not exist", d.display());
        }
    }
    let mut disks = Vec::new();
    for (asked, named, bus) in [
        (opts.blank, &opts.disks, Bus::Sata),
        (opts.sas_blank, &opts.sas_disks, Bus::Sas),
    ] {
        if let Some((count, size)) = asked {
            for i in 0..count {
                let p = workdir.join(format!("{}{i}.img", bus.label()));
                if opts.fresh || !p.exists() {
                    std::fs::File::create(&p)?.set_len(size)?;
                }
                disks.push((p, bus));
            }
        }
        disks.extend(named.iter().map(|d| (d.clone(), bus)));
    }
    disks.extend(opts.ssds.iter().map(|d| (d.clone(), Bus::Nvme)));
    Ok(disks)
}

/// Ports on the emulated xHCI controller, for --usb-disk and --uas-disk.
pub(super) const USB_PORTS: usize = 8;

/// ATA IDENTIFY has 20 bytes for the serial; qemu cuts a longer one.
const SERIAL_MAX: usize = 20;

/// Each disk with its serial. A serial that followed the disk's place on the
/// controller would move to another disk when one is left out, and the board
/// names a missing member by its serial: so it is taken from the file
/// instead (see `--disk`).
pub(super) fn with_serials(disks: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let stems: Vec<Option<&str>> = disks
        .iter()
        .map(|d| d.file_stem().and_then(|s| s.to_str()))
        .collect();
    disks
        .iter()
        .zip(&stems)
        .map(|(disk, stem)| {
            let unique = stems.iter().filter(|s| *s == stem).count() == 1;
            let serial = match stem {
                Some(s) if unique && serial_safe(s) => s.to_string(),
                _ => path_serial(disk)?,
            };
            Ok((disk.clone(), serial))
        })
        .collect()
}

/// What udev keeps as it is in /dev/disk/by-id and fits IDENTIFY.
fn serial_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= SERIAL_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `nf-` and 12 hex digits of the SHA-256 of the canonical path: the same
/// file gets the same serial however it is named on the command line.
fn path_serial(disk: &Path) -> Result<String> {
    use sha2::Digest;
    let full = std::fs::canonicalize(disk)
        .with_context(|| format!("finding the full path of {}", disk.display()))?;
    let digest = sha2::Sha256::digest(full.as_os_str().as_encoded_bytes());
    Ok(format!("nf-{}", &hex::encode(digest)[..12]))
}

/// `4x2G` → (4, 2 GiB).
pub fn parse_disks(spec: &str) -> Result<(usize, u64), String> {
    let (n, size) = spec
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{spec}`: write COUNTxSIZE, e.g. 4x2G"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("`{n}` is not a number of disks"))?;
    if n == 0 || n > super::pc::MAX_DISKS {
        return Err(format!(
            "{n} disks: the emulated PC takes 1 to {} SATA disks, the arm64 board 1 to {}",
            super::pc::MAX_DISKS,
            super::board::MAX_DISKS
        ));
    }
    let size = size.trim();
    let size = if size.ends_with(['G', 'M', 'T', 'K']) {
        format!("{size}iB")
    } else {
        size.to_string()
    };
    let bytes: crate::size::Size = size
        .parse()
        .map_err(|e: nasforge_engine::size::SizeError| e.to_string())?;
    Ok((n, bytes.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_specs() {
        assert_eq!(parse_disks("4x2G").unwrap(), (4, 2 << 30));
        assert_eq!(parse_disks("3x512MiB").unwrap(), (3, 512 << 20));
        assert_eq!(parse_disks("15x1G").unwrap(), (15, 1 << 30));
        assert!(
            parse_disks("25x1G")
                .unwrap_err()
                .contains("the emulated PC takes 1 to 24 SATA disks, the arm64 board 1 to 6")
        );
        assert!(parse_disks("0x1G").unwrap_err().contains("1 to 24"));
        assert!(parse_disks("four").unwrap_err().contains("COUNTxSIZE"));
    }

    #[test]
    fn a_disk_keeps_its_serial_when_another_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let disk = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, b"").unwrap();
            p
        };
        let (m0, m1, m2) = (
            disk("member0.img"),
            disk("member1.img"),
            disk("member2.img"),
        );
        let serials = |ds: &[&PathBuf]| -> Vec<String> {
            let ds: Vec<PathBuf> = ds.iter().map(|d| (*d).clone()).collect();
            with_serials(&ds)
                .unwrap()
                .into_iter()
                .map(|(_, s)| s)
                .collect()
        };
        assert_eq!(serials(&[&m0, &m1, &m2]), ["member0", "member1", "member2"]);
        assert_eq!(serials(&[&m0, &m2]), ["member0", "member2"]);
    }

    #[test]
    fn a_name_that_cannot_be_a_serial_gets_a_hash_of_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |rel: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
            p
        };
        let long = mk("a-disk-name-over-twenty-chars.img");
        let spaced = mk("my disk.img");
        let (a, b) = (mk("a/disk.img"), mk("b/disk.img"));
        let got = with_serials(&[long.clone(), spaced, a, b.clone()]).unwrap();
        for (_, s) in &got {
            assert!(
                s.starts_with("nf-") && s.len() == 15 && serial_safe(s),
                "{s}"
            );
        }
        let all: std::collections::BTreeSet<&String> = got.iter().map(|(_, s)| s).collect();
        assert_eq!(all.len(), 4, "{got:?}");
        // The same file through another spelling of its path: the same serial.
        let roundabout = dir.path().join("b/../a/disk.img");
        let again = with_serials(&[roundabout, b]).unwrap();
        assert_eq!(again[0].1, got[2].1);
        assert_eq!(with_serials(&[long]).unwrap()[0].1, got[0].1);
    }

    #[test]
    fn serials_udev_keeps() {
        assert!(serial_safe("blank_1-x"));
        assert!(serial_safe("abcdefghij0123456789"));
        assert!(!serial_safe("abcdefghij0123456789x"));
        assert!(!serial_safe("disk.v2"));
        assert!(!serial_safe(""));
    }
}
