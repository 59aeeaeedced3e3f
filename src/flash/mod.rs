//! `nasforge flash`: the image onto an SD card, eMMC or USB disk, fast,
//! verified, and never onto the wrong disk.
//!
//! - [`candidates`]: which disks there are, what they hold, which are
//!   refused (the system disk, anything mounted or held, internal SATA,
//!   NVMe, SAS/SCSI and virtio disks without `--force`, anything larger than `--max-size`,
//!   partitions, read-only media) and why.
//! - [`target`]: the named target opened once (a disk O_EXCL), checked
//!   through that descriptor, and checked again after the question.
//! - [`source`]: the image (.img, .img.xz, .img.gz), its size and published
//!   digests, read in hashed batches of data and zero spans.
//! - [`write`]: data written in large O_DIRECT writes, zeros punched where
//!   the target can, stale partition tables wiped, the first MiB last.
//! - [`verify`]: every written range read back past the page cache.

pub mod candidates;
pub mod source;
pub mod target;
pub mod verify;
pub mod write;

use crate::size::{Size, human};
use anyhow::{Context, Result, bail};
use candidates::Device;
use std::io::{BufRead, IsTerminal, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use target::Target;

/// How long the question waits for its answer: long enough to read it,
/// short enough that nobody swaps the card under a forgotten prompt.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(300);

/// `nasforge flash`'s arguments, which are the options [`flash`] and
/// [`list`] take.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The image: .img, .img.xz or .img.gz (format read from its bytes)
    #[arg(required_unless_present = "list")]
    pub image: Option<PathBuf>,
    /// The disk (/dev/sdX, /dev/mmcblkN, /dev/disk/by-id/...) or a file
    #[arg(required_unless_present = "list")]
    pub target: Option<PathBuf>,
    /// List removable, USB and MMC disks: size, model, what they hold,
    /// and whether (and why) they would be refused
    #[arg(long, conflicts_with_all = ["image", "target"])]
    pub list: bool,
    /// With --list: every disk, the system disk included
    #[arg(long, requires = "list")]
    pub all: bool,
    /// Do not ask for confirmation (for scripts; without it, a
    /// non-interactive run is refused)
    #[arg(short, long)]
    pub yes: bool,
    /// Refuse disks larger than this (e.g. 256GB, 1TB)
    #[arg(long, value_name = "SIZE", default_value = "512GB")]
    pub max_size: Size,
    /// Write to a disk larger than --max-size
    #[arg(long)]
    pub force_large: bool,
    /// Write to an internal disk: one that sysfs reports non-removable on
    /// a SATA, NVMe, SAS/SCSI or virtio bus (this computer's own disk,
    /// whatever its size)
    #[arg(long)]
    pub force: bool,
    /// Seconds the question waits for `yes` (tests shorten it)
    #[arg(long, hide = true, value_name = "SECONDS", default_value_t = CONFIRM_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub confirm_timeout: u64,
    /// Skip reading the target back
    #[arg(long)]
    pub no_verify: bool,
    /// On a disk that cannot zero ranges itself (most SD readers), leave
    /// the image's zero ranges unwritten instead of writing zeros. Faster,
    /// but those ranges keep the card's old bytes: safe only for images
    /// whose zero ranges are unused by every filesystem in them
    #[arg(long)]
    pub skip_holes: bool,
    /// Check the image and the target, print what would happen, write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// What a flash did, for the closing lines.
#[derive(Debug)]
pub struct Summary {
    pub image: String,
    pub target: String,
    pub written: write::Written,
    pub verified: Option<verify::Verified>,
}

fn rate(bytes: u64, d: std::time::Duration) -> String {
    format!(
        "{}/s",
        human((bytes as f64 / d.as_secs_f64().max(1e-3)) as u64)
    )
}

impl Summary {
    pub fn render(&self) -> String {
        let w = &self.written;
        let mut out = format!(
            "wrote {} to {}: {} image, {} of data in {:.1}s ({}{})\n",
            self.image,
            self.target,
            human(w.size),
            human(w.data_bytes),
            w.elapsed.as_secs_f64(),
            rate(w.data_bytes, w.elapsed),
            if w.direct_io {
                ", O_DIRECT"
            } else {
                ", through the page cache"
            }
        );
        if w.punched_bytes > 0 {
            out += &format!(
                "  {} of zeros left to the target to zero (holes punched, nothing sent)\n",
                human(w.punched_bytes)
            );
        }
        if w.zero_written_bytes > 0 {
            out += &format!(
                "  {} of zeros written (the target cannot zero ranges itself)\n",
                human(w.zero_written_bytes)
            );
        }
        if w.skipped_bytes > 0 {
            out += &format!(
                "  {} of zeros skipped (--skip-holes): those ranges keep their old contents\n",
                human(w.skipped_bytes)
            );
        }
        if let Some((a, b)) = w.wiped_tail {
            out += &format!(
                "  zeroed the target's last {} (bytes {a}..{b}): no stale backup GPT or RAID label survives\n",
                human(b - a)
            );
        }
        match &self.verified {
            Some(v) => {
                out += &format!(
                    "verified: read back {} in {:.1}s ({}{}), every written range matches the image\n",
                    human(v.bytes),
                    v.elapsed.as_secs_f64(),
                    rate(v.bytes, v.elapsed),
                    if v.direct_io {
                        ", O_DIRECT"
                    } else {
                        ", page cache dropped first"
                    }
                )
            }
            None => out += "not verified (--no-verify)\n",
        }
        out
    }
}

/// `nasforge flash --list`: one block per disk, refused ones with the reason.
pub fn list(opts: &Options) -> String {
    let disks: Vec<Device> = candidates::all()
        .into_iter()
        .filter(|d| opts.all || d.is_candidate())
        .collect();
    if disks.is_empty() {
        return if opts.all {
            "no block devices with media found\n".into()
        } else {
            "no removable, USB or MMC disks found: insert the card (or a reader); `--list --all` shows every disk\n".into()
        };
    }
    let mut out = format!(
        "{:<14} {:<20} {:<9} {:<30} {}\n",
        "DEVICE", "SIZE", "TRANSPORT", "MODEL", "HOLDS"
    );
    for d in &disks {
        out += &format!(
            "{:<14} {:<20} {:<9} {:<30} {}\n",
            d.path.display(),
            candidates::both_units(d.size),
            d.transport,
            d.model.as_deref().unwrap_or("-"),
            d.holds()
        );
        let refusals = d.refusals(opts.max_size.0, opts.force_large, opts.force);
        if refusals.is_empty() {
            out += &format!("{:<14} can be flashed\n", "");
        }
        for r in refusals {
            out += &format!("{:<14} refused: {}\n", "", r.explain());
        }
    }
    out
}

/// "5 minutes", "2 s".
fn duration_text(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 60 && s % 60 == 0 => {
            format!("{} minute{}", s / 60, if s == 60 { "" } else { "s" })
        }
        s => format!("{s} s"),
    }
}

/// Asks on the terminal; no answer within `limit` is a no.
fn confirm(question: &str, limit: Duration) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "{question}\nrefusing without confirmation: standard input is not a terminal; pass --yes to confirm in a script"
        );
    }
    eprint!(
        "{question}\nType yes within {} to continue: ",
        duration_text(limit)
    );
    std::io::stderr().flush().ok();
    let deadline = Instant::now() + limit;
    // A terminal in canonical mode turns readable once a whole line (or
    // end of input) is there, so the read below does not block.
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!();
            bail!(
                "no answer within {}: not confirmed, nothing was written. The question expires so that a card swapped in later is never written under an old yes; run the command again",
                duration_text(limit)
            );
        }
        let mut poll = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            0 => continue,
            n if n > 0 => break,
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e).context("waiting for the answer");
                }
            }
        }
    }
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        bail!("not confirmed; nothing was written");
    }
    Ok(())
}

/// Checks the target, asks, checks the target is still the one shown,
/// writes, verifies. With `dry_run`, stops after the checks and returns
/// None.
pub fn flash(opts: &Options) -> Result<Option<Summary>> {
    let (Some(image_path), Some(target_path)) = (&opts.image, &opts.target) else {
        bail!("name an image and a target: nasforge flash IMAGE /dev/sdX (see --list)");
    };
    let image = source::ImageFile::open(image_path)?;
    let image_name = image_path.display().to_string();
    let target = target::open(target_path, !opts.dry_run).map_err(anyhow::Error::msg)?;
    let name = target_path.display().to_string();
    let question = question(opts, &image, &image_name, &target, &name)?;
    if opts.dry_run {
        let what = match &target {
            Target::Disk { device, .. } => format!("{} ({})", name, device.summary()),
            Target::File { .. } => format!("the file {name}"),
        };
        println!(
            "dry run: would write {image_name} ({}, {}) to {what}; checks passed, nothing written",
            image.format.name(),
            size_text(&image)
        );
        return Ok(None);
    }
    if let Some(q) = question
        && !opts.yes
    {
        confirm(&q, Duration::from_secs(opts.confirm_timeout))?;
    }
    let (disk, target_size) = match &target {
        Target::Disk { disk, identity, .. } => {
            target::recheck(&name, disk, identity).map_err(anyhow::Error::msg)?;
            (disk, Some(identity.size))
        }
        Target::File { disk: Some(disk) } => (disk, None),
        Target::File { disk: None } => bail!("{name} was not opened for writing"),
    };
    let (written, verified) = write_and_verify(opts, &image, disk, &name, target_size)?;
    // Held open (O_EXCL) until now: an automounter reacting to the new
    // partition table cannot mount, and so change, the card mid-verify.
    drop(target);
    Ok(Some(Summary {
        image: image_name,
        target: name,
        written,
        verified,
    }))
}

fn size_text(image: &source::ImageFile) -> String {
    match image.size {
        Some(s) => human(s),
        None => "size unknown until decoded".into(),
    }
}

/// Refuses a target that must not be written or cannot hold the image, and
/// otherwise says what writing it replaces: the question to ask, None for a
/// new file.
fn question(
    opts: &Options,
    image: &source::ImageFile,
    image_name: &str,
    target: &Target,
    name: &str,
) -> Result<Option<String>> {
    let size_text = size_text(image);
    Ok(match target {
        Target::Disk { device: d, .. } => {
            let refusals = d.refusals(opts.max_size.0, opts.force_large, opts.force);
            if !refusals.is_empty() {
                let reasons: Vec<String> = refusals
                    .iter()
                    .map(|r| format!("  - {}", r.explain()))
                    .collect();
                bail!(
                    "refusing to write {name} ({}):\n{}",
                    d.summary(),
                    reasons.join("\n")
                );
            }
            if let Some(s) = image.size
                && s > d.size
            {
                bail!(
                    "{image_name} does not fit on {name}: the image is {s} bytes ({}), the disk {} bytes ({}); nothing was written",
                    human(s),
                    d.size,
                    human(d.size)
                );
            }
            Some(format!(
                "About to overwrite {name}: {}\n  it holds: {}\n  everything on it will be replaced by {image_name} ({size_text})",
                d.summary(),
                d.holds()
            ))
        }
        Target::File { disk: None } => None,
        Target::File { disk: Some(disk) } => {
            use std::os::unix::fs::MetadataExt;
            let (a, b) = (disk.file().metadata()?, image.file.metadata()?);
            if a.dev() == b.dev() && a.ino() == b.ino() {
                bail!("{name} is the image itself");
            }
            let existing = a.len();
            (existing > 0).then(|| {
                let holds = target::probe(disk, 0, existing)
                    .ok()
                    .filter(|s| !s.is_empty())
                    .map(|s| s.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("; "))
                    .unwrap_or_else(|| "data nasforge does not recognise".into());
                format!(
                    "About to overwrite the file {name} ({}): it holds {holds}\n  it will be replaced by {image_name} ({size_text})",
                    human(existing)
                )
            })
        }
    })
}

/// Writes the image with a progress bar, then reads it back unless
/// `--no-verify`.
fn write_and_verify(
    opts: &Options,
    image: &source::ImageFile,
    disk: &crate::io::direct::DiskFile,
    name: &str,
    target_size: Option<u64>,
) -> Result<(write::Written, Option<verify::Verified>)> {
    let bar = match image.size {
        Some(len) => crate::io::progress::bytes(len, "write"),
        // A .gz without a manifest: no total, so no ETA; bytes and rate only.
        None => {
            let b = crate::io::progress::bytes(0, "write");
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg:>12} {bytes} {bytes_per_sec}")
                    .expect("valid template"),
            );
            b
        }
    };
    let written = write::write(
        image,
        disk,
        name,
        write::WriteOptions {
            target_size,
            skip_holes: opts.skip_holes,
            no_offload: false,
        },
        &bar,
    );
    bar.finish_and_clear();
    let written = written?;

    let verified = if opts.no_verify {
        None
    } else {
        let total = written.records.iter().map(|r| r.len).sum();
        let bar = crate::io::progress::bytes(total, "verify");
        let v = verify::verify(image, written.size, disk, name, &written.records, &bar);
        bar.finish_and_clear();
        Some(v?)
    };
    Ok((written, verified))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A 6 MiB raw image: a head, data at 3 MiB, holes elsewhere.
    fn image(dir: &std::path::Path) -> PathBuf {
        let p = dir.join("t.img");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(6 << 20).unwrap();
        f.write_all_at(&[0x55, 0xaa], 510).unwrap();
        f.write_all_at(&vec![0x42u8; 64 << 10], 3 << 20).unwrap();
        p
    }

    fn write_to(img: &std::path::Path, target: &std::path::Path) -> Result<write::Written> {
        write_with(img, target, write::WriteOptions::default())
    }

    fn write_with(
        img: &std::path::Path,
        target: &std::path::Path,
        opts: write::WriteOptions,
    ) -> Result<write::Written> {
        let image = source::ImageFile::open(img)?;
        let disk = crate::io::direct::DiskFile::open(target, true)?;
        write::write(
            &image,
            &disk,
            "target",
            opts,
            &indicatif::ProgressBar::hidden(),
        )
    }

    #[test]
    fn without_offloaded_zeroing_the_zeros_are_written_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let target = dir.path().join("card");
        std::fs::write(&target, vec![0x77u8; 6 << 20]).unwrap();
        let w = write_with(
            &img,
            &target,
            write::WriteOptions {
                no_offload: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(w.punched_bytes, 0);
        assert_eq!(w.zero_written_bytes, (6 << 20) - w.data_bytes);
        assert_eq!(
            std::fs::read(&target).unwrap(),
            std::fs::read(&img).unwrap()
        );
        let covered: u64 = w.records.iter().map(|r| r.len).sum();
        assert_eq!(covered, 6 << 20, "written zeros are read back too");
        let image = source::ImageFile::open(&img).unwrap();
        verify::verify(
            &image,
            w.size,
            &crate::io::direct::DiskFile::open(&target, false).unwrap(),
            "card",
            &w.records,
            &indicatif::ProgressBar::hidden(),
        )
        .unwrap();
    }

    #[test]
    fn a_changed_block_is_reported_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let target = dir.path().join("card");
        let written = write_to(&img, &target).unwrap();
        let image = source::ImageFile::open(&img).unwrap();
        let bar = indicatif::ProgressBar::hidden();
        let disk = crate::io::direct::DiskFile::open(&target, false).unwrap();
        verify::verify(&image, written.size, &disk, "card", &written.records, &bar).unwrap();

        let bad = (3 << 20) + 5 * 4096 + 17;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .unwrap()
            .write_all_at(b"X", bad)
            .unwrap();
        let err = verify::verify(&image, written.size, &disk, "card", &written.records, &bar)
            .unwrap_err();
        let m = err
            .downcast_ref::<verify::Mismatch>()
            .unwrap_or_else(|| panic!("{err:#}"));
        assert_eq!(m.offset, bad & !4095);
        assert_eq!(m.differing, 1);
        assert!(
            err.to_string()
                .contains(&format!("at byte {}", bad & !4095)),
            "{err}"
        );
    }

    #[test]
    fn a_digest_mismatch_stops_before_the_first_mib() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        std::fs::write(
            dir.path().join("t.img.sha256"),
            format!("{}  t.img\n", "0".repeat(64)),
        )
        .unwrap();
        let target = dir.path().join("card");
        std::fs::write(&target, vec![0x77u8; 8 << 20]).unwrap();
        let err = write_to(&img, &target).unwrap_err().to_string();
        assert!(
            err.contains("does not match") && err.contains("t.img.sha256"),
            "{err}"
        );
        let mut head = vec![0u8; 1 << 20];
        std::fs::File::open(&target)
            .unwrap()
            .read_exact_at(&mut head, 0)
            .unwrap();
        assert!(
            head.iter().all(|&b| b == 0x77),
            "the first MiB was not written"
        );
    }

    #[test]
    fn a_matching_digest_passes_and_the_file_equals_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let digest =
            crate::io::hash::hash_file(&std::fs::File::open(&img).unwrap(), |_| {}).unwrap();
        std::fs::write(
            dir.path().join("t.img.sha256"),
            format!("{digest}  t.img\n"),
        )
        .unwrap();
        let target = dir.path().join("card");
        let w = write_to(&img, &target).unwrap();
        assert_eq!(w.size, 6 << 20);
        assert_eq!(
            crate::io::hash::hash_file(&std::fs::File::open(&target).unwrap(), |_| {}).unwrap(),
            digest
        );
        // Head and tail table areas and the data: written; the rest: holes.
        assert_eq!(w.data_bytes, (2 << 20) + (64 << 10));
    }
}
