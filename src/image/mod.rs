//! A disk image file: its partition table and the filesystems in it.

pub mod cpio;
pub mod ext4;
pub mod fat;
pub mod grow;
pub mod seccomp;
pub mod table;

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

pub use table::{Fs, Layout, Partition, TableKind};

pub struct Image {
    pub path: PathBuf,
    pub layout: Layout,
}

impl Image {
    pub fn open(path: &Path) -> Result<Image> {
        let mut f =
            File::open(path).with_context(|| format!("opening image {}", path.display()))?;
        let layout = Layout::read(&mut f)
            .with_context(|| format!("reading the partition table of {}", path.display()))?;
        Ok(Image {
            path: path.to_path_buf(),
            layout,
        })
    }

    pub fn reload(&mut self) -> Result<()> {
        *self = Image::open(&self.path)?;
        Ok(())
    }

    pub fn boot(&self) -> Option<&Partition> {
        self.layout.boot()
    }

    pub fn root(&self) -> Option<&Partition> {
        self.layout.root()
    }

    /// The FAT boot partition, opened read-write when `write` is set.
    pub fn fat(&self, write: bool) -> Result<Option<fat::Fat>> {
        let Some(p) = self.boot() else {
            return Ok(None);
        };
        let f = OpenOptions::new()
            .read(true)
            .write(write)
            .open(&self.path)?;
        Ok(Some(fat::Fat::open(f, p.start, p.size)?))
    }

    pub fn ext4(&self) -> Option<ext4::Ext4> {
        self.root().map(|p| ext4::Ext4::new(&self.path, p.start))
    }
}
