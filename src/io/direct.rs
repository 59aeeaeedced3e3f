//! Aligned, cache-bypassing I/O on a disk or a file standing in for one.
//!
//! `DiskFile` holds two descriptors on the same target: one opened with
//! O_DIRECT (when the target accepts it: block devices, ext4, xfs; not every
//! tmpfs or FUSE) and an ordinary one. A transfer goes through O_DIRECT when
//! its buffer, offset and length are aligned, and through the page cache
//! otherwise (an image whose size is not a multiple of 4 KiB ends with such
//! a piece), so callers never have to care. Reads through the ordinary
//! descriptor first drop the range from the page cache (POSIX_FADV_DONTNEED
//! after an fsync), so a readback comes from the medium wherever the kernel
//! lets it.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Alignment of buffers, offsets and lengths for O_DIRECT: 4 KiB covers
/// 512-byte and 4Kn logical sectors and every filesystem block size in use.
pub const ALIGN: usize = 4096;

/// A heap buffer aligned to [`ALIGN`], zero-filled at allocation.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is uniquely owned plain memory.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(ALIGN).next_multiple_of(ALIGN), ALIGN)
            .expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.len.max(ALIGN).next_multiple_of(ALIGN), ALIGN)
            .expect("valid layout")
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { dealloc(self.ptr, self.layout()) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

fn aligned(buf: &[u8], offset: u64) -> bool {
    (buf.as_ptr() as usize).is_multiple_of(ALIGN)
        && buf.len().is_multiple_of(ALIGN)
        && offset.is_multiple_of(ALIGN as u64)
}

/// How zero ranges can be produced without writing zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zeroing {
    /// `fallocate(PUNCH_HOLE)` worked: the range reads as zeros and holds no
    /// blocks (a file's hole; a block device's offloaded write-zeroes, which
    /// on a loop device punches the backing file).
    Punched,
    /// Neither the file nor the device can zero a range without being sent
    /// the zeros.
    Unsupported,
}

/// A disk, or a regular file standing in for one, open for aligned I/O.
pub struct DiskFile {
    direct: Option<File>,
    buffered: File,
    direct_ok: AtomicBool,
    block_device: bool,
}

impl DiskFile {
    /// Opens `path` for reading and writing; a regular file is created when
    /// `create` is set. O_DIRECT is used when the target accepts it.
    ///
    /// A block device is opened exclusively (O_EXCL): the kernel refuses
    /// with EBUSY while it or a partition of it is mounted or held by md/dm,
    /// and nobody can mount it while it is open.
    pub fn open(path: &Path, create: bool) -> io::Result<DiskFile> {
        let is_bdev = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
        let excl = if is_bdev { libc::O_EXCL } else { 0 };
        let buffered = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create && !is_bdev)
            .truncate(false)
            .custom_flags(excl)
            .open(path)?;
        DiskFile::with_direct(buffered, path, true)
    }

    /// Opens `path` read-only (for reading a target back).
    pub fn open_read(path: &Path) -> io::Result<DiskFile> {
        let buffered = File::open(path)?;
        DiskFile::with_direct(buffered, path, false)
    }

    /// A second descriptor with O_DIRECT beside the buffered one; the
    /// filesystems that refuse O_DIRECT (tmpfs) leave only the buffered one.
    fn with_direct(buffered: File, path: &Path, write: bool) -> io::Result<DiskFile> {
        let block_device = buffered.metadata()?.file_type().is_block_device();
        let direct = OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok();
        let direct_ok = AtomicBool::new(direct.is_some());
        Ok(DiskFile {
            direct,
            buffered,
            direct_ok,
            block_device,
        })
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// Whether transfers can still bypass the page cache.
    pub fn uses_direct_io(&self) -> bool {
        self.direct_ok.load(Ordering::Relaxed)
    }

    /// The size: a file's length, a block device's capacity.
    pub fn size(&self) -> io::Result<u64> {
        use std::io::{Seek, SeekFrom};
        let mut f = &self.buffered;
        f.seek(SeekFrom::End(0))
    }

    fn direct_for(&self, buf: &[u8], offset: u64) -> Option<&File> {
        if aligned(buf, offset) && self.direct_ok.load(Ordering::Relaxed) {
            self.direct.as_ref()
        } else {
            None
        }
    }

    /// An O_DIRECT transfer the target refused with EINVAL (alignment it did
    /// not announce, or no O_DIRECT after all) switches to the page cache for
    /// good; anything else is a real error.
    fn fall_back(&self, e: &io::Error) -> bool {
        if e.raw_os_error() == Some(libc::EINVAL) {
            self.direct_ok.store(false, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(f) = self.direct_for(buf, offset) {
            match f.write_all_at(buf, offset) {
                Ok(()) => return Ok(()),
                Err(e) if self.fall_back(&e) => {}
                Err(e) => return Err(e),
            }
        }
        self.buffered.write_all_at(buf, offset)
    }

    /// Reads exactly `buf.len()` bytes, bypassing or first dropping the page
    /// cache so the bytes come from the medium.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if let Some(f) = self.direct_for(buf, offset) {
            match f.read_exact_at(buf, offset) {
                Ok(()) => return Ok(()),
                Err(e) if self.fall_back(&e) => {}
                Err(e) => return Err(e),
            }
        }
        self.drop_cache(offset, buf.len() as u64);
        self.buffered.read_exact_at(buf, offset)
    }

    /// Asks the kernel to forget cached pages of a range. Clean pages go at
    /// once; call after [`sync`](Self::sync). On tmpfs the cache is the
    /// storage and nothing is dropped.
    pub fn drop_cache(&self, offset: u64, len: u64) {
        // SAFETY: advisory call on a valid descriptor.
        unsafe {
            libc::posix_fadvise(
                self.buffered.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            );
        }
    }

    /// Makes `[offset, offset+len)` read as zeros without sending zeros, if
    /// the target can. Never falls back to writing (the caller decides).
    pub fn punch(&self, offset: u64, len: u64) -> io::Result<Zeroing> {
        if len == 0 {
            return Ok(Zeroing::Punched);
        }
        // SAFETY: fallocate on a valid descriptor has no memory effects.
        let r = unsafe {
            libc::fallocate(
                self.buffered.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            return Ok(Zeroing::Punched);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // Not supported here, or (block devices) not offloaded / not aligned.
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENODEV) => {
                Ok(Zeroing::Unsupported)
            }
            _ => Err(e),
        }
    }

    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.buffered.set_len(len)
    }

    /// Flushes both descriptors to stable storage (the direct one too: a
    /// block device's volatile write cache is flushed by fsync).
    pub fn sync(&self) -> io::Result<()> {
        self.buffered.sync_all()?;
        if let Some(d) = &self.direct {
            d.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        for len in [1, 4096, 5000, 1 << 20] {
            let b = AlignedBuf::new(len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn aligned_and_unaligned_transfers_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        let f = DiskFile::open(&path, true).unwrap();
        let mut big = AlignedBuf::new(64 * 1024);
        big.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 253) as u8);
        f.write_all_at(&big, 8192).unwrap();
        f.write_all_at(b"tail", 8192 + 64 * 1024).unwrap();
        f.sync().unwrap();
        assert_eq!(f.size().unwrap(), 8192 + 64 * 1024 + 4);
        let mut back = AlignedBuf::new(64 * 1024);
        f.read_exact_at(&mut back, 8192).unwrap();
        assert_eq!(&back[..], &big[..]);
        let mut tail = [0u8; 4];
        f.read_exact_at(&mut tail, 8192 + 64 * 1024).unwrap();
        assert_eq!(&tail, b"tail");
    }

    #[test]
    fn punching_a_file_frees_its_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        let f = DiskFile::open(&path, true).unwrap();
        let data = AlignedBuf::new(1 << 20);
        let mut ones = AlignedBuf::new(1 << 20);
        ones.fill(1);
        f.write_all_at(&ones, 0).unwrap();
        f.sync().unwrap();
        let before = std::fs::metadata(&path).unwrap().blocks();
        if f.punch(0, 1 << 20).unwrap() == Zeroing::Punched {
            assert!(std::fs::metadata(&path).unwrap().blocks() < before);
            let mut back = AlignedBuf::new(1 << 20);
            f.read_exact_at(&mut back, 0).unwrap();
            assert_eq!(&back[..], &data[..]);
        }
    }
}
