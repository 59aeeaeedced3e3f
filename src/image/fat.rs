//! The FAT boot partition, edited in-process with fatfs over a slice of the
//! image file. fatfs 0.3.6 writes files in existing directories cleanly but
//! corrupts new directories (rafalh/rust-fatfs #117), so this module never
//! creates one.

use anyhow::{Context, Result};
use fscommon::{BufStream, StreamSlice};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};

type Disk = StreamSlice<BufStream<File>>;

pub struct Fat {
    fs: fatfs::FileSystem<Disk>,
}

impl Fat {
    /// `file` is a handle on the whole image; the partition is `start..start+size`.
    pub fn open(file: File, start: u64, size: u64) -> Result<Fat> {
        let slice = StreamSlice::new(BufStream::new(file), start, start + size)?;
        let fs = fatfs::FileSystem::new(slice, fatfs::FsOptions::new().update_accessed_date(false))
            .map_err(|e| {
                anyhow::anyhow!(
                    "the boot partition at byte {start} is not a readable FAT filesystem: {e}"
                )
            })?;
        Ok(Fat { fs })
    }

    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.fs.root_dir().open_file(path) {
            Ok(mut f) => {
                let mut buf = Vec::new();
                f.read_to_end(&mut buf)
                    .with_context(|| format!("reading {path} from the boot partition"))?;
                Ok(Some(buf))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("opening {path} on the boot partition")),
        }
    }

    /// Streams a file (a kernel can be tens of MiB).
    pub fn reader(&self, path: &str) -> Result<Option<impl Read + '_>> {
        match self.fs.root_dir().open_file(path) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("opening {path} on the boot partition")),
        }
    }

    /// Creates or replaces a file; its directory must exist.
    pub fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let mut f = self.fs.root_dir().create_file(path).map_err(|e| {
            if e.kind() == ErrorKind::NotFound {
                anyhow::anyhow!(
                    "cannot write {path} on the boot partition: its directory does not exist"
                )
            } else {
                anyhow::anyhow!("cannot write {path} on the boot partition: {e}")
            }
        })?;
        f.truncate()?;
        f.write_all(data)
            .with_context(|| format!("writing {path} on the boot partition (is it full?)"))?;
        f.flush()?;
        Ok(())
    }

    /// Names in the root directory, for `inspect` and kernel discovery.
    pub fn list_root(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for e in self.fs.root_dir().iter() {
            let e = e?;
            let n = e.file_name();
            if n != "." && n != ".." {
                names.push(n);
            }
        }
        Ok(names)
    }

    pub fn free_bytes(&self) -> Result<u64> {
        let s = self.fs.stats()?;
        Ok(s.free_clusters() as u64 * s.cluster_size() as u64)
    }

    /// Flushes the FAT and clears the dirty flag; skipping this leaves a
    /// filesystem fsck complains about.
    pub fn close(self) -> Result<()> {
        self.fs.unmount().context("flushing the boot partition")
    }
}
