//! The lock that keeps two nasforge runs out of one cache entry.

use anyhow::{Result, bail};
use std::fs;
use std::path::Path;

/// An exclusive lock on a file in the cache, held while it lives, so two
/// nasforge runs do not extract or build into the same directory.
pub(crate) struct Lock(#[allow(dead_code)] fs::File);

impl Lock {
    pub(crate) fn take(path: &Path) -> Result<Lock> {
        if let Some(d) = path.parent() {
            fs::create_dir_all(d)?;
        }
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this struct owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            eprintln!(
                "{:>10}  waiting for another nasforge using {}",
                "cache",
                path.display()
            );
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
                bail!(
                    "cannot lock {}: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(Lock(f))
    }
}
