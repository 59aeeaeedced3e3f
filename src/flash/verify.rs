//! Reading the target back. Every range that was written (data, and the
//! zeros of the partition-table areas) is read again and its sha256 compared
//! with the one taken from the image as it was written. Ranges the target
//! zeroed itself (punched holes) and ranges left alone are not read.
//!
//! The readback goes through the descriptor the write used (the device that
//! was checked, not whatever its path names by now) and must come from the
//! medium, not from the page cache that the write just filled: the target
//! is read with O_DIRECT where it accepts it (block devices, most
//! filesystems); otherwise each range is first dropped from the cache with
//! POSIX_FADV_DONTNEED (the data was fsynced, so the pages are clean and
//! go). See `crate::io::direct`. Below a loop device the backing file's own
//! cache is the kernel's business; on a real card O_DIRECT reads the card.

use super::source::{CHUNK, ImageFile};
use super::write::Record;
use crate::io::direct::{AlignedBuf, DiskFile};
use anyhow::{Result, anyhow};
use indicatif::ProgressBar;
use sha2::{Digest, Sha256};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Verified {
    pub bytes: u64,
    pub elapsed: Duration,
    pub direct_io: bool,
}

/// The target differs from the image.
#[derive(Debug, thiserror::Error)]
#[error(
    "verification failed: {target} differs from the image at byte {offset} (the 4 KiB block at {offset}; {differing} of {checked} bytes differ in the {checked}-byte range from {range_start}); the card or reader is failing, or something else wrote to it"
)]
pub struct Mismatch {
    pub target: String,
    /// The first differing 4 KiB block.
    pub offset: u64,
    pub range_start: u64,
    pub checked: u64,
    pub differing: u64,
}

/// Consecutive records read with one transfer of at most CHUNK bytes.
fn groups(records: &[Record]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut len = 0u64;
    for (i, r) in records.iter().enumerate() {
        let contiguous = i > start && records[i - 1].offset + records[i - 1].len == r.offset;
        if i > start && (!contiguous || len + r.len > CHUNK as u64) {
            out.push(start..i);
            start = i;
            len = 0;
        }
        len += r.len;
    }
    if start < records.len() {
        out.push(start..records.len());
    }
    out
}

/// Reads back every record from `disk` (the written target, named `name`
/// in messages) and compares digests; on a mismatch, re-reads the image to
/// name the first differing block.
pub fn verify(
    image: &ImageFile,
    image_size: u64,
    disk: &DiskFile,
    name: &str,
    records: &[Record],
    bar: &ProgressBar,
) -> Result<Verified> {
    let started = Instant::now();
    let groups = groups(records);
    let (tx, rx) = mpsc::sync_channel::<Result<(std::ops::Range<usize>, AlignedBuf)>>(3);
    let (back_tx, back_rx) = mpsc::channel::<AlignedBuf>();
    let disk_ref = disk;
    let bytes = std::thread::scope(|s| -> Result<u64> {
        s.spawn(move || {
            for g in groups {
                let first = &records[g.start];
                let last = &records[g.end - 1];
                let len = (last.offset + last.len - first.offset) as usize;
                let mut buf = back_rx
                    .try_recv()
                    .unwrap_or_else(|_| AlignedBuf::new(CHUNK));
                let r = disk_ref
                    .read_exact_at(&mut buf[..len], first.offset)
                    .map_err(|e| {
                        anyhow!(
                            "reading {name} back at byte {} ({len} bytes): {e}",
                            first.offset
                        )
                    });
                let failed = r.is_err();
                if tx.send(r.map(|()| (g, buf))).is_err() || failed {
                    return;
                }
            }
        });
        let rx = rx;
        let mut bytes = 0;
        while let Ok(msg) = rx.recv() {
            let (g, buf) = msg?;
            let base = records[g.start].offset;
            for r in &records[g] {
                let at = (r.offset - base) as usize;
                let got = &buf[at..at + r.len as usize];
                if <[u8; 32]>::from(Sha256::digest(got)) != r.sha256 {
                    return Err(locate(image, image_size, name, r, got).into());
                }
                bytes += r.len;
                bar.inc(r.len);
            }
            let _ = back_tx.send(buf);
        }
        Ok(bytes)
    })?;
    Ok(Verified {
        bytes,
        elapsed: started.elapsed(),
        direct_io: disk.uses_direct_io(),
    })
}

/// Compares a failing range block by block with the image.
fn locate(image: &ImageFile, image_size: u64, name: &str, r: &Record, got: &[u8]) -> Mismatch {
    let mut m = Mismatch {
        target: name.to_string(),
        offset: r.offset,
        range_start: r.offset,
        checked: r.len,
        differing: 0,
    };
    // The partition-table zeros past the image's end are not in the image.
    let want = if r.offset >= image_size {
        Ok(vec![0u8; r.len as usize])
    } else {
        image.read_range(r.offset, r.len as usize)
    };
    if let Ok(want) = want {
        let mut first = None;
        for (i, (a, b)) in want.chunks(4096).zip(got.chunks(4096)).enumerate() {
            if a != b {
                first.get_or_insert(r.offset + (i * 4096) as u64);
                m.differing += a.iter().zip(b).filter(|(x, y)| x != y).count() as u64;
            }
        }
        if let Some(f) = first {
            m.offset = f;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, len: u64) -> Record {
        Record {
            offset,
            len,
            sha256: [0; 32],
        }
    }

    #[test]
    fn contiguous_records_are_read_together_up_to_a_chunk() {
        let c = CHUNK as u64;
        let recs = [
            rec(0, 4096),
            rec(4096, 4096),
            rec(1 << 20, 4096),
            rec(2 << 20, c),
            rec(2 << 20 | c, 4096),
        ];
        assert_eq!(groups(&recs), vec![0..2, 2..3, 3..4, 4..5]);
        assert!(groups(&[]).is_empty());
    }
}
