//! The image being flashed: its format, its size when that is known before
//! decoding (a raw file's length, an .xz index, the build manifest), the
//! digests published beside it, and a producer that turns it into batches
//! of blocks to write, split into data and zero spans and hashed.

use crate::io::decompress::{self, Format};
use crate::io::direct::AlignedBuf;
use crate::io::sparse::{self, Region};
use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Zero detection and hole granularity: the filesystem block size.
pub const BLOCK: usize = 4096;
/// Bytes read, hashed and written at a time.
pub const CHUNK: usize = 4 << 20;
/// The partition-table areas at each end of the image that are always
/// written, zeros included: MBR, GPT header and entries, boot loaders in the
/// gap before the first partition (U-Boot at 32 KiB on Rockchip), and the
/// backup GPT in the last sectors.
pub const TABLE_AREA: u64 = 1 << 20;

/// A digest published beside the image, and which file said so.
#[derive(Debug, Clone)]
pub struct Expected {
    pub sha256: String,
    pub from: PathBuf,
}

/// The image file being flashed, opened, with what is known of it before
/// decoding (not [`crate::image::Image`], a disk image's partitions).
pub struct ImageFile {
    pub path: PathBuf,
    pub format: Format,
    pub file: File,
    /// The raw image size, when known before decoding.
    pub size: Option<u64>,
    /// `<image>.sha256`: the digest of the file as stored (compressed or not).
    pub file_sha256: Option<Expected>,
    /// The manifest's `output.image_sha256`: the digest of the raw image.
    pub image_sha256: Option<Expected>,
}

impl ImageFile {
    pub fn open(path: &Path) -> Result<ImageFile> {
        let mut file =
            File::open(path).with_context(|| format!("opening the image {}", path.display()))?;
        if !file.metadata()?.is_file() {
            bail!("{} is not an image file", path.display());
        }
        let format = Format::sniff(&mut file)?;
        let paths = crate::output::Paths::for_image(path);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let file_sha256 = read_sha256_file(&paths.sha256, &name);
        let (manifest_sha, manifest_size) = read_manifest(&paths.manifest, &name);
        let size = match format {
            Format::Raw => Some(file.metadata()?.len()),
            Format::Xz => Some(decompress::xz_uncompressed_size(&file).map_err(|e| {
                anyhow::anyhow!("{}: {e}; download or build it again", path.display())
            })?),
            // gzip keeps only the size modulo 4 GiB; the manifest may know.
            Format::Gz => manifest_size,
        };
        if let (Some(s), Some(m)) = (size, manifest_size)
            && s != m
        {
            bail!(
                "{} holds a {s}-byte image but {} says {m} bytes: the image and its manifest are from different builds",
                path.display(),
                paths.manifest.display()
            );
        }
        let image_sha256 = manifest_sha.map(|sha256| Expected {
            sha256,
            from: paths.manifest.clone(),
        });
        let file_sha256 = file_sha256.map(|sha256| Expected {
            sha256,
            from: paths.sha256.clone(),
        });
        Ok(ImageFile {
            path: path.to_path_buf(),
            format,
            file,
            size,
            file_sha256,
            image_sha256,
        })
    }

    /// The raw bytes of `[offset, offset+len)`, decoding again from the start
    /// for a compressed image (only used to locate a verify mismatch).
    pub fn read_range(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        if self.format == Format::Raw {
            let avail = self
                .file
                .metadata()?
                .len()
                .saturating_sub(offset)
                .min(len as u64) as usize;
            self.file.read_exact_at(&mut out[..avail], offset)?;
            return Ok(out);
        }
        let input = File::open(&self.path)?;
        let mut dec = decompress::decoder(self.format, std::io::BufReader::new(input))?;
        std::io::copy(&mut (&mut dec).take(offset), &mut std::io::sink())?;
        let mut filled = 0;
        while filled < len {
            let n = dec.read(&mut out[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        Ok(out)
    }
}

/// The digest for `name` in a sha256sum-format file.
fn read_sha256_file(path: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (digest, file) = l.split_once(char::is_whitespace)?;
        let file = file.trim_start().trim_start_matches('*');
        (file == name && digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| digest.to_ascii_lowercase())
    })
}

/// `output.image_sha256` and `output.image_size` of a build manifest, when
/// it describes this image file (a renamed image's old manifest does not).
fn read_manifest(path: &Path, name: &str) -> (Option<String>, Option<u64>) {
    let Some(json) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return (None, None);
    };
    let out = &json["output"];
    let describes = out["path"]
        .as_str()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str())
        == Some(name);
    if !describes {
        return (None, None);
    }
    (
        out["image_sha256"].as_str().map(str::to_ascii_lowercase),
        out["image_size"].as_u64(),
    )
}

/// A run of a batch: bytes to write (hashed), or zeros that may be skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    Data {
        start: usize,
        end: usize,
        sha256: [u8; 32],
    },
    Zero {
        start: usize,
        end: usize,
    },
}

/// Consecutive image bytes starting at `offset`.
pub struct Batch {
    pub offset: u64,
    pub buf: AlignedBuf,
    pub len: usize,
    pub spans: Vec<Span>,
}

pub enum Msg {
    Batch(Batch),
    /// A hole of a sparse raw image outside the table areas: zeros, unread.
    Hole {
        offset: u64,
        len: u64,
    },
    /// The image ended; digests of what was read, when asked for.
    End {
        size: u64,
        file_sha256: Option<String>,
        image_sha256: Option<String>,
    },
}

/// Where the image's bytes must be written even when they are zeros.
#[derive(Debug, Clone, Copy)]
pub struct Forced {
    pub end: Option<u64>,
}

impl Forced {
    fn contains_block(&self, start: u64, end: u64) -> bool {
        start < TABLE_AREA || self.end.is_some_and(|e| end > e.saturating_sub(TABLE_AREA))
    }
}

/// Splits `buf` (image bytes at `offset`) into data and zero spans at block
/// granularity, keeping forced blocks as data, and never letting a span
/// cross the end of the head area (written last, separately).
pub fn split(buf: &[u8], offset: u64, forced: Forced) -> Vec<Span> {
    static ZERO: [u8; BLOCK] = [0; BLOCK];
    let mut spans = Vec::new();
    let mut run: Option<(usize, bool)> = None;
    let mut i = 0;
    while i < buf.len() {
        let end = (i + BLOCK).min(buf.len());
        let (a, b) = (offset + i as u64, offset + end as u64);
        let data = forced.contains_block(a, b) || buf[i..end] != ZERO[..end - i];
        let head_edge = a == TABLE_AREA;
        match run {
            Some((_, d)) if d == data && !head_edge => {}
            Some((s, d)) => {
                spans.push(make(buf, s, i, d));
                run = Some((i, data));
            }
            None => run = Some((i, data)),
        }
        i = end;
    }
    if let Some((s, d)) = run {
        spans.push(make(buf, s, buf.len(), d));
    }
    spans
}

fn make(buf: &[u8], start: usize, end: usize, data: bool) -> Span {
    if data {
        Span::Data {
            start,
            end,
            sha256: Sha256::digest(&buf[start..end]).into(),
        }
    } else {
        Span::Zero { start, end }
    }
}

/// Which digests the producer computes on the way.
#[derive(Debug, Clone, Copy, Default)]
pub struct Digests {
    /// Of the file as stored (checked against `<image>.sha256`).
    pub file: bool,
    /// Of the raw image (checked against the manifest).
    pub image: bool,
}

/// Reads the whole image in order, sending batches and holes to `send`,
/// taking buffers back from `recycle`. Stops early, without error, when
/// `send` fails (the writer quit).
pub fn produce(
    image: &ImageFile,
    digests: Digests,
    send: &dyn Fn(Result<Msg>) -> bool,
    recycle: &std::sync::mpsc::Receiver<AlignedBuf>,
) {
    let result = match image.format {
        Format::Raw => produce_raw(image, digests, send, recycle),
        _ => produce_stream(image, digests, send, recycle),
    };
    match result {
        Ok(Some(end)) => {
            send(Ok(end));
        }
        Ok(None) => {}
        Err(e) => {
            send(Err(e));
        }
    }
}

fn buffer(recycle: &std::sync::mpsc::Receiver<AlignedBuf>) -> AlignedBuf {
    recycle
        .try_recv()
        .unwrap_or_else(|_| AlignedBuf::new(CHUNK))
}

/// What to read of a raw image of `size` bytes, in order: its data regions,
/// plus the table areas even where they are holes.
fn raw_reads(image: &ImageFile, size: u64) -> Result<Vec<(u64, u64)>> {
    let mut reads: Vec<(u64, u64)> = Vec::new();
    let mut add = |a: u64, b: u64| {
        if a >= b {
            return;
        }
        match reads.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => reads.push((a, b)),
        }
    };
    let head = TABLE_AREA.min(size);
    let tail = size.saturating_sub(TABLE_AREA).max(head);
    add(0, head);
    for r in sparse::regions(&image.file)
        .with_context(|| format!("listing the data regions of {}", image.path.display()))?
    {
        if let Region::Data { start, len } = r {
            let (a, b) = (start.max(head), (start + len).min(tail));
            add(a, b);
        }
    }
    add(tail, size);
    Ok(reads)
}

/// A raw image: its data regions (SEEK_DATA/SEEK_HOLE) and the table areas
/// are read; holes elsewhere are sent as holes without reading them.
fn produce_raw(
    image: &ImageFile,
    digests: Digests,
    send: &dyn Fn(Result<Msg>) -> bool,
    recycle: &std::sync::mpsc::Receiver<AlignedBuf>,
) -> Result<Option<Msg>> {
    let size = image.file.metadata()?.len();
    let forced = Forced { end: Some(size) };
    let mut whole = (digests.file || digests.image).then(Sha256::new);
    let mut pos = 0u64;
    for (a, b) in raw_reads(image, size)? {
        if a > pos {
            if let Some(h) = whole.as_mut() {
                sparse::hash_zeros(h, a - pos);
            }
            if !send(Ok(Msg::Hole {
                offset: pos,
                len: a - pos,
            })) {
                return Ok(None);
            }
        }
        let mut at = a;
        while at < b {
            // Batches start on CHUNK boundaries where they can, so the head
            // area is always one batch's first span.
            let n = ((b - at) as usize).min(CHUNK - (at % CHUNK as u64) as usize);
            let mut buf = buffer(recycle);
            image
                .file
                .read_exact_at(&mut buf[..n], at)
                .with_context(|| format!("reading {} at byte {at}", image.path.display()))?;
            if let Some(h) = whole.as_mut() {
                h.update(&buf[..n]);
            }
            let spans = split(&buf[..n], at, forced);
            if !send(Ok(Msg::Batch(Batch {
                offset: at,
                buf,
                len: n,
                spans,
            }))) {
                return Ok(None);
            }
            at += n as u64;
        }
        pos = b;
    }
    if pos < size {
        if let Some(h) = whole.as_mut() {
            sparse::hash_zeros(h, size - pos);
        }
        if !send(Ok(Msg::Hole {
            offset: pos,
            len: size - pos,
        })) {
            return Ok(None);
        }
    }
    let digest = whole.map(|h| crate::io::hash::hex(&h.finalize()));
    Ok(Some(Msg::End {
        size,
        file_sha256: digest.clone().filter(|_| digests.file),
        image_sha256: digest.filter(|_| digests.image),
    }))
}

/// Reads until `buf` is full or the input ends; on an error, the error and
/// how many bytes came before it.
fn fill(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, (std::io::Error, u64)> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((e, filled as u64)),
        }
    }
    Ok(filled)
}

/// A compressed image, decoded in order. The last chunk is held back until
/// the next one shows whether it ends the image, so the tail table area is
/// known even when the size was not.
fn produce_stream(
    image: &ImageFile,
    digests: Digests,
    send: &dyn Fn(Result<Msg>) -> bool,
    recycle: &std::sync::mpsc::Receiver<AlignedBuf>,
) -> Result<Option<Msg>> {
    let input = File::open(&image.path)?;
    let mut file_hash =
        crate::io::hash::HashReader::new(std::io::BufReader::with_capacity(1 << 20, input));
    let mut image_hash = digests.image.then(Sha256::new);
    let mut dec = decompress::decoder(image.format, &mut file_hash)?;
    let corrupt = |e: std::io::Error, at: u64| {
        anyhow::anyhow!(
            "{} is not a valid {} archive: decoding failed after {at} bytes of image ({e}); the file is truncated or corrupt, download or build it again",
            image.path.display(),
            image.format.name()
        )
    };
    let mut held: Option<(u64, AlignedBuf, usize)> = None;
    let mut pos = 0u64;
    let flush = |(offset, buf, len): (u64, AlignedBuf, usize), end: Option<u64>| -> bool {
        let spans = split(&buf[..len], offset, Forced { end });
        send(Ok(Msg::Batch(Batch {
            offset,
            buf,
            len,
            spans,
        })))
    };
    loop {
        let mut buf = buffer(recycle);
        let filled = fill(&mut dec, &mut buf[..CHUNK]).map_err(|(e, n)| corrupt(e, pos + n))?;
        if let Some(h) = image_hash.as_mut() {
            h.update(&buf[..filled]);
        }
        let at_end = filled < CHUNK;
        if filled > 0 {
            if let Some(prev) = held.take() {
                // A full chunk after `prev` means the tail area lies beyond it.
                let end = at_end.then_some(pos + filled as u64).or(image.size);
                if !flush(prev, end) {
                    return Ok(None);
                }
            }
            held = Some((pos, buf, filled));
            pos += filled as u64;
        }
        if at_end {
            break;
        }
    }
    if let Some(prev) = held.take()
        && !flush(prev, Some(pos))
    {
        return Ok(None);
    }
    drop(dec);
    if let Some(want) = image.size
        && pos != want
    {
        bail!(
            "{} decoded to {pos} bytes but its index (or manifest) says {want}: it holds more than one xz stream, which nasforge cannot decode yet, or is corrupt",
            image.path.display()
        );
    }
    // Read what follows the compressed stream, so the file digest covers the
    // whole file as sha256sum would.
    std::io::copy(&mut file_hash, &mut std::io::sink())?;
    Ok(Some(Msg::End {
        size: pos,
        file_sha256: digests.file.then(|| file_hash.digest_hex()),
        image_sha256: image_hash.map(|h| crate::io::hash::hex(&h.finalize())),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(spans: &[Span]) -> Vec<(usize, usize, bool)> {
        spans
            .iter()
            .map(|s| match s {
                Span::Data { start, end, .. } => (*start, *end, true),
                Span::Zero { start, end } => (*start, *end, false),
            })
            .collect()
    }

    #[test]
    fn zero_blocks_become_zero_spans_except_in_table_areas() {
        let mut buf = vec![0u8; CHUNK];
        buf[(2 << 20) + 10] = 1; // one data block at 2 MiB
        let forced = Forced {
            end: Some(100 << 20),
        };
        let spans = split(&buf, 0, forced);
        let one_mib = TABLE_AREA as usize;
        assert_eq!(
            kinds(&spans),
            vec![
                (0, one_mib, true),
                (one_mib, 2 << 20, false),
                (2 << 20, (2 << 20) + BLOCK, true),
                ((2 << 20) + BLOCK, CHUNK, false)
            ]
        );
        // The last MiB of the image is data even when zero.
        let spans = split(&buf, (100 << 20) - CHUNK as u64, forced);
        assert_eq!(kinds(&spans).last(), Some(&(CHUNK - one_mib, CHUNK, true)));
    }

    #[test]
    fn the_head_area_is_its_own_span() {
        let buf = vec![7u8; 2 << 20];
        let spans = split(&buf, 0, Forced { end: None });
        assert_eq!(
            kinds(&spans),
            vec![(0, 1 << 20, true), (1 << 20, 2 << 20, true)]
        );
        let Span::Data { sha256, .. } = &spans[0] else {
            panic!()
        };
        assert_eq!(
            hex::encode(sha256),
            crate::io::hash::sha256_hex(&buf[..1 << 20])
        );
    }

    #[test]
    fn a_short_last_block_is_compared_as_it_is() {
        let buf = vec![0u8; 5000];
        let spans = split(
            &buf,
            8 << 20,
            Forced {
                end: Some(100 << 20),
            },
        );
        assert_eq!(kinds(&spans), vec![(0, 5000, false)]);
    }

    #[test]
    fn sha256_files_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.img.sha256");
        let d = "a".repeat(64);
        std::fs::write(&p, format!("{d}  x.img\n")).unwrap();
        assert_eq!(read_sha256_file(&p, "x.img"), Some(d));
        assert_eq!(read_sha256_file(&p, "y.img"), None);
    }
}
