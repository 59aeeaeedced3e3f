//! Sparse output: blocks of zeros are skipped (left as holes), and sparse
//! inputs are read extent by extent with SEEK_DATA/SEEK_HOLE.

use sha2::Sha256;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use super::writeback::Writeback;

/// Holes are found at this granularity: the ext4 and FAT block size.
const BLOCK: usize = 4096;
const CHUNK: usize = 1 << 20;
static ZERO_BLOCK: [u8; BLOCK] = [0; BLOCK];
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// Feeds `len` zero bytes to a hasher without touching the disk: a hole
/// hashed as the zeros it reads as.
pub fn hash_zeros(hasher: &mut Sha256, mut len: u64) {
    use sha2::Digest;
    while len > 0 {
        let n = len.min(CHUNK as u64) as usize;
        hasher.update(&ZEROS[..n]);
        len -= n as u64;
    }
}

/// Writes data at increasing offsets, leaving all-zero blocks as holes.
/// The target must start empty, so that unwritten blocks read as zeros.
pub struct SparseWriter<'a> {
    file: &'a File,
    pos: u64,
    writeback: Writeback,
}

impl<'a> SparseWriter<'a> {
    pub fn new(file: &'a File) -> Self {
        SparseWriter {
            file,
            pos: 0,
            writeback: Writeback::new(file),
        }
    }

    /// Moves forward over zeros the caller knows about (a hole in the source).
    pub fn skip(&mut self, len: u64) {
        self.pos += len;
    }

    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        let mut run_start: Option<usize> = None;
        let mut i = 0;
        while i < data.len() {
            let end = (i + BLOCK).min(data.len());
            let zero = data[i..end] == ZERO_BLOCK[..end - i];
            match (zero, run_start) {
                (false, None) => run_start = Some(i),
                (true, Some(s)) => {
                    self.file.write_all_at(&data[s..i], self.pos + s as u64)?;
                    run_start = None;
                }
                _ => {}
            }
            i = end;
        }
        if let Some(s) = run_start {
            self.file.write_all_at(&data[s..], self.pos + s as u64)?;
        }
        self.pos += data.len() as u64;
        self.writeback.reached(self.pos);
        Ok(())
    }

    /// Sets the file's length, which creates a trailing hole if the data ended
    /// in zeros.
    pub fn finish(self) -> io::Result<u64> {
        self.file.set_len(self.pos)?;
        Ok(self.pos)
    }
}

/// Copies a stream into an empty file, sparsely. Returns the bytes copied.
pub fn copy_stream(
    mut src: impl Read,
    dst: &File,
    mut progress: impl FnMut(u64),
) -> io::Result<u64> {
    let mut w = SparseWriter::new(dst);
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut filled = 0;
        // Fill whole chunks so zero detection sees whole blocks.
        while filled < buf.len() {
            match src.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if filled == 0 {
            break;
        }
        w.write(&buf[..filled])?;
        progress(filled as u64);
        if filled < buf.len() {
            break;
        }
    }
    w.finish()
}

/// Copies a raw image file into an empty file, skipping the source's holes
/// without reading them. When `hasher` is given, it sees every byte of the
/// source, holes included, in order; without one, data regions are copied
/// inside the kernel (copy_file_range, as `cp` does), which shares blocks on
/// filesystems that can and saves a trip through user space on the rest.
pub fn copy_file(
    src: &File,
    dst: &File,
    mut hasher: Option<&mut Sha256>,
    mut progress: impl FnMut(u64),
) -> io::Result<u64> {
    use sha2::Digest;
    let mut w = SparseWriter::new(dst);
    let mut buf = vec![0u8; CHUNK];
    for region in regions(src)? {
        match region {
            Region::Hole { len, .. } => {
                if let Some(h) = hasher.as_deref_mut() {
                    hash_zeros(h, len);
                }
                w.skip(len);
                progress(len);
            }
            Region::Data { start, len } => {
                let mut done = 0;
                if hasher.is_none() {
                    done = copy_range(src, dst, start, len, &w.writeback)?;
                    progress(done);
                    if done == len {
                        w.skip(len);
                        continue;
                    }
                    w.skip(done);
                }
                while done < len {
                    let n = (len - done).min(CHUNK as u64) as usize;
                    src.read_exact_at(&mut buf[..n], start + done)
                        .map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("reading the source image at byte {}: {e}", start + done),
                            )
                        })?;
                    if let Some(h) = hasher.as_deref_mut() {
                        h.update(&buf[..n]);
                    }
                    w.write(&buf[..n])?;
                    progress(n as u64);
                    done += n as u64;
                }
            }
        }
    }
    w.finish()
}

/// Copies `len` bytes at `start` to the same offset with copy_file_range.
/// Returns how many were copied: less than `len` where the kernel cannot
/// copy between these files (EXDEV on old kernels, EINVAL or ENOSYS), and
/// the caller goes on with read and write from there.
fn copy_range(
    src: &File,
    dst: &File,
    start: u64,
    len: u64,
    writeback: &Writeback,
) -> io::Result<u64> {
    let mut done = 0u64;
    while done < len {
        let mut off_in = (start + done) as libc::loff_t;
        let mut off_out = off_in;
        let want = (len - done).min(Writeback::PIECE) as usize;
        // SAFETY: both descriptors are open for the call's duration and the
        // offsets are plain integers the kernel reads and advances.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                &mut off_in,
                dst.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        if n > 0 {
            writeback.range(start + done, n as u64);
            done += n as u64;
            continue;
        }
        if n == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => break,
            _ => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("copying the source image at byte {}: {e}", start + done),
                ));
            }
        }
    }
    Ok(done)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    Data { start: u64, len: u64 },
    Hole { start: u64, len: u64 },
}

impl Region {
    pub fn size(&self) -> u64 {
        match self {
            Region::Data { len, .. } | Region::Hole { len, .. } => *len,
        }
    }
}

fn lseek(file: &File, offset: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    // SAFETY: lseek on a valid descriptor has no memory effects.
    let r = unsafe { libc::lseek(file.as_raw_fd(), offset as libc::off_t, whence) };
    if r >= 0 {
        return Ok(Some(r as u64));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENXIO) {
        Ok(None)
    } else {
        Err(e)
    }
}

/// The file's data and hole regions in order. Filesystems without
/// SEEK_DATA support report the whole file as data, which is still correct.
pub fn regions(file: &File) -> io::Result<Vec<Region>> {
    let size = file.metadata()?.len();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < size {
        let data = match lseek(file, pos, libc::SEEK_DATA) {
            Ok(Some(d)) => d.min(size),
            Ok(None) => size,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => pos,
            Err(e) => return Err(e),
        };
        if data > pos {
            out.push(Region::Hole {
                start: pos,
                len: data - pos,
            });
        }
        if data >= size {
            break;
        }
        let hole = match lseek(file, data, libc::SEEK_HOLE) {
            Ok(Some(h)) => h.min(size),
            Ok(None) => size,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => size,
            Err(e) => return Err(e),
        };
        out.push(Region::Data {
            start: data,
            len: hole - data,
        });
        pos = hole;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn allocated(f: &File) -> u64 {
        use std::os::unix::fs::MetadataExt;
        f.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn zero_blocks_become_holes() {
        let mut data = vec![0u8; 8 * CHUNK];
        data[5 * CHUNK..5 * CHUNK + 10].copy_from_slice(b"0123456789");
        let dst = tempfile::tempfile().unwrap();
        let n = copy_stream(&data[..], &dst, |_| {}).unwrap();
        assert_eq!(n, data.len() as u64);
        assert_eq!(dst.metadata().unwrap().len(), data.len() as u64);
        assert!(
            allocated(&dst) <= 64 * 1024,
            "only the one data block is allocated: {}",
            allocated(&dst)
        );
        let mut back = vec![0u8; data.len()];
        dst.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn copies_sparse_files_and_hashes_their_holes() {
        use sha2::Digest;
        let mut src = tempfile::tempfile().unwrap();
        src.set_len(16 * CHUNK as u64).unwrap();
        src.write_all_at(b"head", 0).unwrap();
        src.write_all_at(&[7u8; 3 * BLOCK], 9 * CHUNK as u64)
            .unwrap();
        src.flush().unwrap();
        let dst = tempfile::tempfile().unwrap();
        let mut h = Sha256::new();
        copy_file(&src, &dst, Some(&mut h), |_| {}).unwrap();
        let mut whole = vec![0u8; 16 * CHUNK];
        src.read_exact_at(&mut whole, 0).unwrap();
        assert_eq!(
            hex::encode(h.finalize()),
            super::super::hash::sha256_hex(&whole)
        );
        let mut back = vec![0u8; 16 * CHUNK];
        dst.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(back, whole);
        assert_eq!(
            super::super::hash::hash_file(&dst, |_| {}).unwrap(),
            super::super::hash::sha256_hex(&whole)
        );
    }

    #[test]
    fn a_copy_inside_the_kernel_keeps_bytes_and_holes() {
        let src = tempfile::tempfile().unwrap();
        src.set_len(32 * CHUNK as u64).unwrap();
        src.write_all_at(&[1u8; 2 * CHUNK], 3 * CHUNK as u64)
            .unwrap();
        src.write_all_at(b"tail", 32 * CHUNK as u64 - 4).unwrap();
        let dst = tempfile::tempfile().unwrap();
        let n = copy_file(&src, &dst, None, |_| {}).unwrap();
        assert_eq!(n, 32 * CHUNK as u64);
        let mut a = vec![0u8; 32 * CHUNK];
        let mut b = vec![0u8; 32 * CHUNK];
        src.read_exact_at(&mut a, 0).unwrap();
        dst.read_exact_at(&mut b, 0).unwrap();
        assert!(a == b, "the copy differs from the source");
        assert!(
            allocated(&dst) <= 4 * CHUNK as u64,
            "the source's holes stay holes: {} allocated",
            allocated(&dst)
        );
    }

    #[test]
    fn regions_cover_the_file_in_order() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(10 * CHUNK as u64).unwrap();
        f.write_all_at(b"x", 4 * CHUNK as u64).unwrap();
        let r = regions(&f).unwrap();
        let mut pos = 0;
        for region in &r {
            let (Region::Data { start, len } | Region::Hole { start, len }) = *region;
            assert_eq!(start, pos);
            pos += len;
        }
        assert_eq!(pos, 10 * CHUNK as u64);
        assert!(r.iter().any(|x| matches!(x, Region::Data { .. })));
    }
}
