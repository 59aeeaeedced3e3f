//! Streaming building blocks, stacked like coreos-installer's: a source is a
//! `Read` (file or download), optionally hashed, decompressed and metered on
//! its way to a sparse writer. No stage holds an image in memory.

pub mod decompress;
pub mod direct;
pub mod hash;
pub mod lock;
pub mod progress;
pub mod sparse;
pub mod writeback;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::path::Path;

/// Streams the base image into the (empty) working file, decompressing and
/// leaving zeros as holes. When `sha256` is given the source is hashed on the
/// way and a mismatch is an error.
pub fn unpack(source: &Path, work: &File, sha256: Option<&str>) -> Result<decompress::Format> {
    let mut src = File::open(source).with_context(|| format!("opening {}", source.display()))?;
    let format = decompress::Format::sniff(&mut src)?;
    let len = src.metadata()?.len();
    let what = if format == decompress::Format::Raw {
        "copy"
    } else {
        "decompress"
    };
    let bar = progress::bytes(len, what);
    let digest = match format {
        decompress::Format::Raw => {
            let mut hasher = sha256.map(|_| Sha256::new());
            sparse::copy_file(&src, work, hasher.as_mut(), |n| bar.inc(n))
                .with_context(|| format!("copying {}", source.display()))?;
            hasher.map(|h| hash::hex(&h.finalize()))
        }
        _ => {
            let mut reader = hash::HashReader::new(progress::ProgressReader::new(src, bar.clone()));
            let copied = {
                let decoder = decompress::decoder(format, &mut reader)?;
                sparse::copy_stream(decoder, work, |_| {})
            };
            copied.map_err(|e| {
                anyhow::anyhow!("{} is not a valid {} archive ({e}); the file is truncated or corrupt, download it again", source.display(), format.name())
            })?;
            sha256.map(|_| reader.digest_hex())
        }
    };
    bar.finish_and_clear();
    if let (Some(want), Some(got)) = (sha256, digest)
        && want != got
    {
        bail!(
            "sha256 mismatch for base image {}:\n  expected {want} (from the recipe)\n       got {got}",
            source.display()
        );
    }
    Ok(format)
}
