//! Aligned, cache-bypassing I/O on a disk or a file standing in for one.
//!
//! `DiskFile` holds ONE descriptor on its target, so everything done to a
//! disk (checks, writes, the readback) goes to the device that was opened
//! and checked, never to whatever a path names later. O_DIRECT is switched
//! on that descriptor with `fcntl(F_SETFL)`: set for transfers whose buffer,
//! offset and length are aligned, cleared for the rest (an image whose size
//! is not a multiple of 4 KiB ends with such a piece), so callers never have
//! to care. A target that refuses O_DIRECT (tmpfs, some FUSE) is used
//! through the page cache throughout.
//!
//! Reads must come from the medium, not from pages the write just filled:
//! O_DIRECT reads bypass the page cache (and an O_DIRECT write invalidates
//! cached pages of its range, so no stale page is left behind); a read
//! through the page cache first drops its range (POSIX_FADV_DONTNEED, which
//! drops clean pages: the writer fsyncs before reading back).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;

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

/// BLKGETSIZE64, `_IOR(0x12, 114, u64)` in the asm-generic ioctl layout
/// (x86, arm, riscv): a block device's capacity in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// How the descriptor currently transfers.
struct Mode {
    /// The target took O_DIRECT; cleared for good when it refuses a
    /// transfer that should have worked.
    direct_ok: bool,
    /// O_DIRECT is set on the descriptor now.
    direct_set: bool,
}

/// A disk, or a regular file standing in for one, open for aligned I/O.
pub struct DiskFile {
    file: File,
    /// Held across a mode switch and the transfer that needed it, so a
    /// transfer never runs in the other thread's mode.
    mode: Mutex<Mode>,
    block_device: bool,
}

impl DiskFile {
    /// Opens a regular file standing in for a disk, for reading and
    /// writing; created when `create` is set.
    #[cfg(test)]
    pub fn open(path: &Path, create: bool) -> io::Result<DiskFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        DiskFile::new(file)
    }

    /// Opens the block device at `path` exclusively (O_EXCL), for reading
    /// and, with `write`, writing. The kernel refuses with EBUSY while it or
    /// a partition of it is mounted, active swap, held by md/dm or open
    /// O_EXCL elsewhere, and nobody can mount it while this descriptor is
    /// open. What was opened is the caller's to check through
    /// [`file`](Self::file): the path may have named something else a
    /// moment before.
    pub fn open_device(path: &Path, write: bool) -> io::Result<DiskFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_EXCL)
            .open(path)?;
        DiskFile::new(file)
    }

    /// Uses `file` (opened by the caller) for aligned I/O, with O_DIRECT
    /// where the target takes it.
    pub fn new(file: File) -> io::Result<DiskFile> {
        let block_device = file.metadata()?.file_type().is_block_device();
        let disk = DiskFile {
            file,
            mode: Mutex::new(Mode {
                direct_ok: true,
                direct_set: false,
            }),
            block_device,
        };
        {
            let mut mode = disk.lock();
            if disk.set_direct(&mut mode, true).is_err() {
                mode.direct_ok = false;
            }
        }
        Ok(disk)
    }

    /// The one descriptor, for checks that must see what is written.
    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// Whether transfers can still bypass the page cache.
    pub fn uses_direct_io(&self) -> bool {
        self.lock().direct_ok
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        // A panic mid-transfer leaves the mode as it was set: still valid.
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The size: a file's length; a block device's capacity, asked of the
    /// device behind this descriptor (BLKGETSIZE64).
    pub fn size(&self) -> io::Result<u64> {
        if !self.block_device {
            return Ok(self.file.metadata()?.len());
        }
        let mut size: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), BLKGETSIZE64 as _, &mut size) };
        if rc == 0 {
            Ok(size)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sets or clears O_DIRECT on the descriptor (F_SETFL changes the open
    /// file description, so every later transfer on it follows).
    fn set_direct(&self, mode: &mut Mode, on: bool) -> io::Result<()> {
        if mode.direct_set == on {
            return Ok(());
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: F_GETFL / F_SETFL on a valid descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_DIRECT
        } else {
            flags & !libc::O_DIRECT
        };
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        mode.direct_set = on;
        Ok(())
    }

    /// Runs `transfer` with O_DIRECT when the piece is aligned and the
    /// target takes it, through the page cache otherwise. An O_DIRECT
    /// transfer refused with EINVAL (alignment the target did not announce,
    /// or no O_DIRECT after all) switches to the page cache for good and is
    /// retried there; anything else is a real error. `before_cached` runs
    /// before a transfer through the page cache.
    fn transfer(
        &self,
        aligned: bool,
        before_cached: impl Fn(),
        mut transfer: impl FnMut(&File) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut mode = self.lock();
        if aligned && mode.direct_ok {
            self.set_direct(&mut mode, true)?;
            match transfer(&self.file) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => mode.direct_ok = false,
                Err(e) => return Err(e),
            }
        }
        self.set_direct(&mut mode, false)?;
        before_cached();
        transfer(&self.file)
    }

    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.transfer(aligned(buf, offset), || {}, |f| f.write_all_at(buf, offset))
    }

    /// Reads exactly `buf.len()` bytes, bypassing or first dropping the page
    /// cache so the bytes come from the medium.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        self.transfer(
            aligned(buf, offset),
            || self.drop_cache(offset, len),
            |f| f.read_exact_at(buf, offset),
        )
    }

    /// Asks the kernel to forget cached pages of a range. Clean pages go at
    /// once; call after [`sync`](Self::sync). On tmpfs the cache is the
    /// storage and nothing is dropped.
    pub fn drop_cache(&self, offset: u64, len: u64) {
        // SAFETY: advisory call on a valid descriptor.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
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
                self.file.as_raw_fd(),
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
        self.file.set_len(len)
    }

    /// Flushes to stable storage (for a block device, its volatile write
    /// cache too).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
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
    fn transfers_go_to_what_was_opened_not_to_what_the_path_names_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        let f = DiskFile::open(&path, true).unwrap();
        std::fs::hard_link(&path, dir.path().join("opened")).unwrap();
        std::fs::write(dir.path().join("other"), b"other").unwrap();
        std::fs::rename(dir.path().join("other"), &path).unwrap();
        let mut block = AlignedBuf::new(ALIGN);
        block.fill(7);
        f.write_all_at(&block, 0).unwrap();
        f.write_all_at(b"tail", ALIGN as u64).unwrap();
        f.sync().unwrap();
        let mut back = AlignedBuf::new(ALIGN);
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..], &block[..]);
        assert_eq!(std::fs::read(&path).unwrap(), b"other");
        let opened = std::fs::read(dir.path().join("opened")).unwrap();
        assert_eq!(&opened[..ALIGN], &block[..]);
        assert_eq!(&opened[ALIGN..], b"tail");
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
