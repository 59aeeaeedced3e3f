//! Writing the image: a producer thread reads (or decodes) and hashes the
//! image while this thread writes, in large aligned O_DIRECT writes where
//! the target takes them.
//!
//! Order matters for a card pulled out half way or a write that fails:
//! 1. everything past the first MiB, in image order;
//! 2. the zeros that make stale partition tables disappear: the image's
//!    last MiB (its backup GPT area) and the target's last MiB;
//! 3. fsync, and only if all of that succeeded
//! 4. the first MiB (MBR / primary GPT, boot loader), then fsync again.
//!
//! Until step 4 the target's old first MiB is untouched, so a failed flash
//! never leaves a partition table that points at a half-written image.

use super::source::{Batch, CHUNK, Digests, Expected, ImageFile, Msg, Span, TABLE_AREA};
use crate::io::direct::{AlignedBuf, DiskFile, Zeroing};
use anyhow::{Result, anyhow, bail};
use indicatif::ProgressBar;
use sha2::{Digest, Sha256};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A range written to the target, and the sha256 of what the image holds there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub len: u64,
    pub sha256: [u8; 32],
}

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// A block device's capacity; None for a regular file (it grows).
    pub target_size: Option<u64>,
    /// Leave the image's zero ranges unwritten on a block device that cannot
    /// zero ranges itself (bmaptool's behaviour; see `--skip-holes`).
    pub skip_holes: bool,
    /// Never ask the target to zero ranges itself: write the zeros (the path
    /// a card reader without write-zeroes support takes; used by tests).
    pub no_offload: bool,
}

#[derive(Debug, Default)]
pub struct Written {
    /// The raw image size.
    pub size: u64,
    /// Every range written, in offset order (the head first).
    pub records: Vec<Record>,
    /// Image bytes sent to the target (data, and the zeros of table areas).
    pub data_bytes: u64,
    /// Zero ranges the target zeroed itself (file holes, offloaded zeroing).
    pub punched_bytes: u64,
    /// Zero ranges written as zeros (the target could not zero them itself).
    pub zero_written_bytes: u64,
    /// Zero ranges left as they were (`--skip-holes`).
    pub skipped_bytes: u64,
    /// The target's own last bytes, zeroed past the image's end.
    pub wiped_tail: Option<(u64, u64)>,
    pub direct_io: bool,
    pub elapsed: Duration,
}

/// The image does not fit: reported with the first offset that does not.
#[derive(Debug, thiserror::Error)]
#[error(
    "the image does not fit on {target}: it continues past the target's end at byte {offset} (the target holds {target_size} bytes); nothing of the first MiB was written, so the target holds no bootable partial image"
)]
pub struct TooSmall {
    pub target: String,
    pub offset: u64,
    pub target_size: u64,
}

struct Writer<'a> {
    target: &'a DiskFile,
    name: &'a str,
    opts: WriteOptions,
    out: Written,
    head: Option<AlignedBuf>,
    head_len: usize,
    zeros: Option<(u64, u64)>,
    punch_works: bool,
    /// A CHUNK of zeros and its sha256, made on first use.
    zero_buf: Option<(AlignedBuf, [u8; 32])>,
}

impl Writer<'_> {
    fn fits(&self, end: u64) -> Result<()> {
        if let Some(size) = self.opts.target_size
            && end > size
        {
            return Err(TooSmall {
                target: self.name.to_string(),
                offset: size,
                target_size: size,
            }
            .into());
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.target.write_all_at(buf, offset).map_err(|e| {
            anyhow!(
                "writing {} at byte {offset} ({} bytes): {e}",
                self.name,
                buf.len()
            )
        })
    }

    fn data(&mut self, buf: &[u8], offset: u64, sha256: [u8; 32]) -> Result<()> {
        self.flush_zeros()?;
        self.fits(offset + buf.len() as u64)?;
        if offset < TABLE_AREA {
            // Spans never cross TABLE_AREA, so this one lies inside the head.
            let head = self
                .head
                .get_or_insert_with(|| AlignedBuf::new(TABLE_AREA as usize));
            head[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
            self.head_len = self.head_len.max(offset as usize + buf.len());
        } else {
            self.write_at(buf, offset)?;
        }
        self.out.data_bytes += buf.len() as u64;
        self.out.records.push(Record {
            offset,
            len: buf.len() as u64,
            sha256,
        });
        Ok(())
    }

    fn zero(&mut self, offset: u64, len: u64) -> Result<()> {
        self.fits(offset + len)?;
        match &mut self.zeros {
            Some((_, end)) if *end == offset => *end += len,
            _ => {
                self.flush_zeros()?;
                self.zeros = Some((offset, offset + len));
            }
        }
        Ok(())
    }

    /// Makes a run of the image's zeros read as zeros on the target: punched
    /// (files; block devices that zero ranges themselves, such as loop
    /// devices, NVMe and SCSI disks with WRITE SAME), else written, else, with
    /// `--skip-holes`, left alone.
    fn flush_zeros(&mut self) -> Result<()> {
        let Some((a, b)) = self.zeros.take() else {
            return Ok(());
        };
        if self.punch_works {
            match self
                .target
                .punch(a, b - a)
                .map_err(|e| anyhow!("zeroing {} at byte {a} ({} bytes): {e}", self.name, b - a))?
            {
                Zeroing::Punched => {
                    self.out.punched_bytes += b - a;
                    return Ok(());
                }
                Zeroing::Unsupported => self.punch_works = false,
            }
        }
        if self.opts.skip_holes && self.target.is_block_device() {
            self.out.skipped_bytes += b - a;
            return Ok(());
        }
        self.write_zeros(a, b, true)?;
        self.out.zero_written_bytes += b - a;
        Ok(())
    }

    fn write_zeros(&mut self, a: u64, b: u64, record: bool) -> Result<()> {
        let zero_digest = self
            .zero_buf
            .get_or_insert_with(|| {
                let zeros = AlignedBuf::new(CHUNK);
                let digest = Sha256::digest(&zeros[..]).into();
                (zeros, digest)
            })
            .1;
        let mut at = a;
        let mut pieces = Vec::new();
        while at < b {
            let n = ((b - at) as usize).min(CHUNK - (at % CHUNK as u64) as usize);
            pieces.push((at, n));
            at += n as u64;
        }
        for (at, n) in pieces {
            let zeros = &self.zero_buf.as_ref().expect("allocated above").0;
            self.write_at(&zeros[..n], at)?;
            if record {
                let sha256 = if n == CHUNK {
                    zero_digest
                } else {
                    Sha256::digest(&zeros[..n]).into()
                };
                self.out.records.push(Record {
                    offset: at,
                    len: n as u64,
                    sha256,
                });
            }
        }
        Ok(())
    }

    fn batch(&mut self, b: &Batch) -> Result<()> {
        for span in &b.spans {
            match *span {
                Span::Data { start, end, sha256 } => {
                    self.data(&b.buf[start..end], b.offset + start as u64, sha256)?
                }
                Span::Zero { start, end } => {
                    self.zero(b.offset + start as u64, (end - start) as u64)?
                }
            }
        }
        Ok(())
    }
}

/// Checks a digest computed on the way against the one published beside the
/// image. Runs before the first MiB is written.
fn check(
    expected: &Option<Expected>,
    got: &Option<String>,
    image: &ImageFile,
    what: &str,
) -> Result<()> {
    if let (Some(want), Some(got)) = (expected, got)
        && want.sha256 != *got
    {
        bail!(
            "{} does not match {} ({what}):\n  expected {}\n       got {got}\nthe image is corrupt or was changed after it was built; the target's first MiB was not written, so it holds no bootable partial image",
            image.path.display(),
            want.from.display(),
            want.sha256
        );
    }
    Ok(())
}

/// Writes `image` to `target` (named `name` in messages) in the order the
/// module documentation gives.
pub fn write(
    image: &ImageFile,
    target: &DiskFile,
    name: &str,
    opts: WriteOptions,
    bar: &ProgressBar,
) -> Result<Written> {
    let started = Instant::now();
    let digests = Digests {
        file: image.file_sha256.is_some(),
        image: image.file_sha256.is_none() && image.image_sha256.is_some(),
    };
    let mut w = Writer {
        target,
        name,
        opts,
        out: Written::default(),
        head: None,
        head_len: 0,
        zeros: None,
        punch_works: !opts.no_offload,
        zero_buf: None,
    };
    let (size, file_sha256, image_sha256) = w.stream(image, digests, bar)?;
    w.flush_zeros()?;
    w.out.size = size;
    check(
        &image.file_sha256,
        &file_sha256,
        image,
        "sha256 of the file",
    )?;
    check(
        &image.image_sha256,
        &image_sha256,
        image,
        "sha256 of the raw image",
    )?;
    w.end_target(size)?;
    w.write_head()?;
    w.out.records.sort_by_key(|r| r.offset);
    w.out.direct_io = target.uses_direct_io();
    w.out.elapsed = started.elapsed();
    Ok(w.out)
}

impl Writer<'_> {
    /// Step 1: writes what the producer thread reads, past the first MiB,
    /// until the image ends; its size and the digests computed on the way.
    fn stream(
        &mut self,
        image: &ImageFile,
        digests: Digests,
        bar: &ProgressBar,
    ) -> Result<(u64, Option<String>, Option<String>)> {
        let (tx, rx) = mpsc::sync_channel::<Result<Msg>>(3);
        let (back_tx, back_rx) = mpsc::channel::<AlignedBuf>();
        std::thread::scope(|s| {
            s.spawn(move || {
                super::source::produce(image, digests, &|m| tx.send(m).is_ok(), &back_rx)
            });
            // `rx` is dropped when this closure returns, error or not, which
            // stops the producer at its next send.
            let rx = rx;
            loop {
                let msg = rx
                    .recv()
                    .map_err(|_| anyhow!("reading the image stopped unexpectedly"))??;
                match msg {
                    Msg::Batch(b) => {
                        self.batch(&b)?;
                        bar.inc(b.len as u64);
                        let _ = back_tx.send(b.buf);
                    }
                    Msg::Hole { offset, len } => {
                        self.zero(offset, len)?;
                        bar.inc(len);
                    }
                    Msg::End {
                        size,
                        file_sha256,
                        image_sha256,
                    } => return Ok((size, file_sha256, image_sha256)),
                }
            }
        })
    }

    /// Steps 2 and 3: the target ends where the image does (a file) or its
    /// last MiB past the image is zeroed (a larger disk); then fsync.
    fn end_target(&mut self, size: u64) -> Result<()> {
        let name = self.name;
        match self.opts.target_size {
            // A larger disk keeps whatever its old last MiB held: a GPT's backup
            // header and entries (the last 33 sectors), md 0.90/1.0 superblocks,
            // ZFS labels. Left there, `sgdisk`/`parted`/`blkid` report a
            // corrupt or foreign GPT (the backup disagrees with, or stands in
            // for, the image's table), and a board's first-boot resize to the
            // full disk can pick up the stale one. Zeroing it costs 1 MiB.
            Some(dev) if dev > size => {
                let from = size.max(dev.saturating_sub(TABLE_AREA));
                self.write_zeros(from, dev, true)?;
                self.out.wiped_tail = Some((from, dev));
            }
            Some(_) => {}
            // dd-style: a file target ends where the image does.
            None => self
                .target
                .set_len(size)
                .map_err(|e| anyhow!("setting the length of {name}: {e}"))?,
        }
        self.target
            .sync()
            .map_err(|e| anyhow!("flushing {name} (fsync): {e}"))
    }

    /// Step 4: the first MiB, once everything else is on the target.
    fn write_head(&self) -> Result<()> {
        if let Some(head) = &self.head {
            // One write; aligned (O_DIRECT) unless the image is shorter than 1 MiB.
            self.write_at(&head[..self.head_len], 0)?;
            self.target.sync().map_err(|e| {
                anyhow!(
                    "flushing {} after writing its first MiB (fsync): {e}",
                    self.name
                )
            })?;
        }
        Ok(())
    }
}
