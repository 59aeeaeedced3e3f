//! Making room: the image file, the root partition (the last one) and its
//! ext4 grow together. resize2fs works on `image?offset=N`, so no loop device
//! and no root are needed.

use super::table::{Layout, SECTOR, TableKind};
use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

const MIB: u64 = 1 << 20;
/// GPT keeps a backup header and 32 sectors of entries at the end.
const GPT_TAIL: u64 = 33 * SECTOR;

/// Adds at least `extra` bytes to the root partition and its filesystem.
/// Returns the new layout.
pub fn grow_root(image: &Path, layout: &Layout, extra: u64) -> Result<Layout> {
    let root = layout
        .root()
        .context("the image has no ext4 root partition to grow")?
        .clone();
    if layout.partitions.iter().any(|p| p.start > root.start) {
        bail!("the root partition is not the last one on the image, so it cannot grow in place");
    }
    let old_size = layout.disk_size;
    let new_size = (old_size + extra).div_ceil(MIB) * MIB;
    let mut f = OpenOptions::new().read(true).write(true).open(image)?;
    f.set_len(new_size)?;
    match layout.kind {
        TableKind::Mbr => grow_mbr(&mut f, root.start, new_size)?,
        TableKind::Gpt => grow_gpt(&mut f, root.number, old_size, new_size)?,
    }
    f.sync_data()?;
    drop(f);
    let mut f = File::open(image)?;
    let new_layout = Layout::read(&mut f)?;
    let new_root = new_layout
        .root()
        .context("root partition lost while growing")?;
    resize_ext4(image, new_root.start, new_root.size)?;
    Ok(new_layout)
}

fn grow_mbr(f: &mut File, root_start: u64, new_size: u64) -> Result<()> {
    f.seek(SeekFrom::Start(0))?;
    let mut mbr = mbrman::MBR::read_from(f, SECTOR as u32)
        .map_err(|e| anyhow::anyhow!("reading the MBR: {e}"))?;
    let start_lba = (root_start / SECTOR) as u32;
    let idx = mbr
        .iter()
        .find(|(_, p)| p.starting_lba == start_lba && p.is_used())
        .map(|(i, _)| i);
    let Some(idx) = idx else {
        bail!("the root partition is a logical partition; nasforge grows only primary partitions");
    };
    let sectors = new_size / SECTOR - start_lba as u64;
    mbr[idx].sectors = u32::try_from(sectors).context("an MBR partition cannot exceed 2 TiB")?;
    mbr.header
        .write_into(f)
        .map_err(|e| anyhow::anyhow!("writing the MBR: {e}"))?;
    Ok(())
}

fn grow_gpt(f: &mut File, root_number: u32, old_size: u64, new_size: u64) -> Result<()> {
    let mut disk = gpt::GptConfig::new()
        .writable(true)
        .open_from_device(f as &mut File)
        .map_err(|e| anyhow::anyhow!("reading the GPT: {e}"))?;
    let mut parts = disk.take_partitions();
    let last_usable = (new_size - GPT_TAIL) / SECTOR - 1;
    let p = parts
        .get_mut(&root_number)
        .context("root partition missing from the GPT")?;
    p.last_lba = last_usable;
    disk.update_partitions(parts)
        .map_err(|e| anyhow::anyhow!("updating the GPT: {e}"))?;
    disk.write_inplace()
        .map_err(|e| anyhow::anyhow!("writing the GPT: {e}"))?;
    drop(disk);
    // The old backup header now sits inside the root partition; clear it so
    // no tool ever mistakes it for a second table.
    f.seek(SeekFrom::Start(old_size - GPT_TAIL))?;
    f.write_all(&vec![0u8; GPT_TAIL as usize])?;
    // The protective MBR entry records the disk size too.
    let mut mbr = [0u8; 512];
    f.seek(SeekFrom::Start(0))?;
    f.read_exact(&mut mbr)?;
    for i in 0..4 {
        let e = 446 + i * 16;
        if mbr[e + 4] == 0xee {
            let sectors = u32::try_from(new_size / SECTOR - 1).unwrap_or(u32::MAX);
            mbr[e + 12..e + 16].copy_from_slice(&sectors.to_le_bytes());
        }
    }
    f.seek(SeekFrom::Start(0))?;
    f.write_all(&mbr)?;
    Ok(())
}

/// e2fsck first: resize2fs refuses a filesystem that was not checked since
/// its last mount, and a check is what makes the resize safe.
fn resize_ext4(image: &Path, offset: u64, size: u64) -> Result<()> {
    let fs = super::ext4::Ext4::new(image, offset);
    fs.check()?;
    let dev = fs.device();
    let kib = size / 1024;
    let image_len = std::fs::metadata(image)?.len();
    let mut cmd = super::seccomp::e2fsprogs("resize2fs");
    cmd.arg(&dev).arg(format!("{kib}K"));
    // resize2fs ends by truncating a regular file to the filesystem's new size,
    // ignoring `?offset=` (e2fsprogs resize/main.c), which would cut off the
    // last `offset` bytes of the partition it just wrote. A seccomp filter in
    // the child makes that one ftruncate fail with EPERM; resize2fs reports it
    // and still exits 0, with every block in place. Nothing else it does
    // truncates files.
    super::seccomp::answer(&mut cmd, &[(libc::SYS_ftruncate, libc::EPERM)]);
    let out = cmd.output().context("running resize2fs")?;
    if !out.status.success() {
        bail!(
            "resize2fs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if std::fs::metadata(image)?.len() != image_len {
        bail!(
            "resize2fs changed the length of {}; the image is damaged",
            image.display()
        );
    }
    Ok(())
}
