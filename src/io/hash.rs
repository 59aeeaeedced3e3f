//! SHA-256 on the fly, and of files with holes without reading the holes.
//! Builds on [`super::sparse`], which does not use this module.

use super::sparse::{Region, hash_zeros, regions};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

pub fn hex(digest: &[u8]) -> String {
    hex::encode(digest)
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Hashes everything read through it.
pub struct HashReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> HashReader<R> {
    pub fn new(inner: R) -> Self {
        HashReader {
            inner,
            hasher: Sha256::new(),
        }
    }

    pub fn digest_hex(self) -> String {
        hex(&self.hasher.finalize())
    }
}

impl<R: Read> Read for HashReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

const CHUNK: usize = 1 << 20;

/// The sha256 of a whole file, where holes are hashed as the zeros they read
/// as, without reading them.
pub fn hash_file(file: &File, mut progress: impl FnMut(u64)) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    for region in regions(file)? {
        match region {
            Region::Hole { len, .. } => hash_zeros(&mut hasher, len),
            Region::Data { start, len } => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(CHUNK as u64) as usize;
                    file.read_exact_at(&mut buf[..n], start + done)?;
                    hasher.update(&buf[..n]);
                    done += n as u64;
                }
            }
        }
        progress(region.size());
    }
    Ok(hex(&hasher.finalize()))
}
