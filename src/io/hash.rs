//! SHA-256 on the fly, and of files with holes without reading the holes.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

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
        HashReader { inner, hasher: Sha256::new() }
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
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// Feeds `len` zero bytes to a hasher without touching the disk.
pub fn hash_zeros(hasher: &mut Sha256, mut len: u64) {
    while len > 0 {
        let n = len.min(CHUNK as u64) as usize;
        hasher.update(&ZEROS[..n]);
        len -= n as u64;
    }
}

/// The sha256 of a whole file, where holes are hashed as the zeros they read
/// as, without reading them.
pub fn hash_file(file: &File, mut progress: impl FnMut(u64)) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    for region in super::sparse::regions(file)? {
        match region {
            super::sparse::Region::Hole { len, .. } => hash_zeros(&mut hasher, len),
            super::sparse::Region::Data { start, len } => {
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

/// How often the trailing hasher keeps a copy of its state, so that a change
/// made after hashing costs a rehash from the nearest copy, not from byte 0.
const CHECKPOINT: u64 = 64 << 20;

#[derive(Default)]
struct Mark {
    /// Bytes below this are final and may be hashed.
    safe: u64,
    /// The file's final length, once known.
    end: Option<u64>,
    cancelled: bool,
}

/// A SHA-256 of a file computed on another thread while the file is still
/// being written front to back: it hashes only what the writer declared
/// final (`advance`), so the digest is ready when the writing ends.
pub struct Trailing {
    mark: Arc<(Mutex<Mark>, Condvar)>,
    thread: Option<JoinHandle<io::Result<Hashed>>>,
}

/// A finished trailing hash and its checkpoints.
pub struct Hashed {
    checkpoints: Vec<(u64, Sha256)>,
    hasher: Sha256,
}

impl Trailing {
    pub fn start(file: File) -> Trailing {
        let mark: Arc<(Mutex<Mark>, Condvar)> = Arc::default();
        let m = mark.clone();
        let thread = std::thread::spawn(move || trail(&file, &m));
        Trailing { mark, thread: Some(thread) }
    }

    pub fn advance(&self, safe: u64) {
        let (lock, cv) = &*self.mark;
        let mut m = lock.lock().expect("hasher lock");
        if safe > m.safe {
            m.safe = safe;
            cv.notify_one();
        }
    }

    /// Waits for the hash of the whole file, `len` bytes.
    pub fn finish(mut self, len: u64) -> io::Result<Hashed> {
        {
            let (lock, cv) = &*self.mark;
            let mut m = lock.lock().expect("hasher lock");
            m.safe = len;
            m.end = Some(len);
            cv.notify_one();
        }
        self.thread.take().expect("joined once").join().map_err(|_| io::Error::other("the hashing thread panicked"))?
    }
}

impl Drop for Trailing {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let (lock, cv) = &*self.mark;
            if let Ok(mut m) = lock.lock() {
                m.cancelled = true;
                cv.notify_one();
            }
            let _ = t.join();
        }
    }
}

fn trail(file: &File, mark: &(Mutex<Mark>, Condvar)) -> io::Result<Hashed> {
    let mut hashed = Hashed { checkpoints: vec![(0, Sha256::new())], hasher: Sha256::new() };
    let mut pos = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let (safe, end) = {
            let (lock, cv) = mark;
            let mut m = lock.lock().expect("hasher lock");
            while m.safe <= pos && !m.cancelled && m.end.is_none_or(|e| pos < e) {
                m = cv.wait(m).expect("hasher lock");
            }
            if m.cancelled {
                return Err(io::Error::other("hashing cancelled"));
            }
            (m.safe, m.end)
        };
        if end.is_some_and(|e| pos >= e) {
            return Ok(hashed);
        }
        while pos < safe {
            let next_checkpoint = (pos / CHECKPOINT + 1) * CHECKPOINT;
            let n = (safe - pos).min(CHUNK as u64).min(next_checkpoint - pos) as usize;
            hash_range(file, &mut hashed.hasher, pos, n, &mut buf)?;
            pos += n as u64;
            if pos.is_multiple_of(CHECKPOINT) {
                hashed.checkpoints.push((pos, hashed.hasher.clone()));
            }
        }
    }
}

/// Hashes `n` bytes at `pos`, feeding zeros for a hole instead of reading it.
/// Bytes past the end of the file are zeros too: a sparse writer extends the
/// file over its trailing zeros only when it finishes.
fn hash_range(file: &File, hasher: &mut Sha256, pos: u64, n: usize, buf: &mut [u8]) -> io::Result<()> {
    let data = super::sparse::next_data(file, pos)?;
    if data.is_none_or(|d| d >= pos + n as u64) {
        hash_zeros(hasher, n as u64);
        return Ok(());
    }
    let mut filled = 0;
    while filled < n {
        match file.read_at(&mut buf[filled..n], pos + filled as u64)? {
            0 => {
                buf[filled..n].fill(0);
                break;
            }
            r => filled += r,
        }
    }
    hasher.update(&buf[..n]);
    Ok(())
}

impl Hashed {
    /// The digest, after rehashing from the last checkpoint at or before
    /// `dirty_from` when bytes from there on changed after they were hashed.
    pub fn digest(self, file: &File, dirty_from: Option<u64>, len: u64) -> io::Result<String> {
        let Some(dirty) = dirty_from else {
            return Ok(hex(&self.hasher.finalize()));
        };
        let (mut pos, mut hasher) = self
            .checkpoints
            .into_iter()
            .rev()
            .find(|(at, _)| *at <= dirty)
            .expect("a checkpoint at 0 always exists");
        let mut buf = vec![0u8; CHUNK];
        while pos < len {
            let n = (len - pos).min(CHUNK as u64) as usize;
            hash_range(file, &mut hasher, pos, n, &mut buf)?;
            pos += n as u64;
        }
        Ok(hex(&hasher.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(data: &[u8]) -> File {
        let f = tempfile::tempfile().unwrap();
        f.write_all_at(data, 0).unwrap();
        f
    }

    #[test]
    fn trailing_hash_equals_the_plain_hash_and_survives_late_changes() {
        let mut data: Vec<u8> = (0..(150u32 << 20) / 4).flat_map(|i| (i.wrapping_mul(2654435761)).to_le_bytes()).collect();
        data[70 << 20..80 << 20].fill(0);
        let f = file_with(&data);
        let t = Trailing::start(f.try_clone().unwrap());
        for step in (0..=data.len() as u64).step_by(7 << 20) {
            t.advance(step);
        }
        let hashed = t.finish(data.len() as u64).unwrap();
        // A change at 130 MiB after hashing: resumed from the 128 MiB checkpoint.
        f.write_all_at(b"changed", 130 << 20).unwrap();
        data[(130 << 20)..(130 << 20) + 7].copy_from_slice(b"changed");
        assert_eq!(hashed.digest(&f, Some(130 << 20), data.len() as u64).unwrap(), sha256_hex(&data));

        let t = Trailing::start(f.try_clone().unwrap());
        let hashed = t.finish(data.len() as u64).unwrap();
        assert_eq!(hashed.digest(&f, None, data.len() as u64).unwrap(), sha256_hex(&data));
    }

    #[test]
    fn dropping_a_trailing_hash_stops_its_thread() {
        let f = file_with(&[1u8; 4096]);
        let t = Trailing::start(f);
        t.advance(1024);
        drop(t);
    }
}
