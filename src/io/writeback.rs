//! Hands written data to the disk as a write goes on.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Hands written data to the disk as a copy or a compression goes on, so
/// that the fsync before publishing, which runs beside the final hash, finds
/// little left to write. An .img.xz of incompressible data is as large as
/// its data: a build that fsyncs a gigabyte at the end stood still for
/// seconds that `xz` never pays. A thread of its own asks the kernel to
/// start writing each piece (sync_file_range, which can wait for the disk's
/// queue), so the writer itself never waits. Only a hint: the fsync before
/// publishing is what reports a failed write.
pub struct Writeback {
    pieces: Option<std::sync::mpsc::Sender<(u64, u64)>>,
    /// Where the data [`Writeback::reached`] has not handed over starts.
    handed: u64,
}

impl Writeback {
    /// Written data is handed to the disk in pieces of this size.
    pub const PIECE: u64 = 64 << 20;

    pub fn new(file: &File) -> Writeback {
        let Ok(file) = file.try_clone() else {
            return Writeback {
                pieces: None,
                handed: 0,
            };
        };
        let (pieces, queue) = std::sync::mpsc::channel::<(u64, u64)>();
        // Not joined: it ends once the writer is gone and its queue is
        // handed over, and the copy must not wait for that.
        std::thread::spawn(move || {
            for (start, len) in queue {
                // SAFETY: sync_file_range only reads its integer arguments.
                unsafe {
                    libc::sync_file_range(
                        file.as_raw_fd(),
                        start as libc::off64_t,
                        len as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WRITE,
                    );
                }
            }
        });
        Writeback {
            pieces: Some(pieces),
            handed: 0,
        }
    }

    /// The writer has written everything before `pos`: hands over what it
    /// has not yet, once that makes a whole piece.
    pub fn reached(&mut self, pos: u64) {
        if pos - self.handed >= Self::PIECE {
            self.range(self.handed, pos - self.handed);
            self.handed = pos;
        }
    }

    pub fn range(&self, start: u64, len: u64) {
        if let Some(p) = &self.pieces {
            let _ = p.send((start, len));
        }
    }
}
