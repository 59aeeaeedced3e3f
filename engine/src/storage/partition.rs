//! One GPT partition per member disk, written in-process with the `gpt`
//! crate, and the kernel asked to re-read it.
//!
//! The crate leaves three things to the caller: alignment
//! (without it the partition starts at LBA 34), the protective MBR, and
//! telling the kernel. All three are done here.

use gpt::disk::LogicalBlockSize;
use gpt::mbr::ProtectiveMBR;
use gpt::partition_types;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::Path;
use uuid::Uuid;

const MIB: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionKind {
    /// A member of an md array.
    LinuxRaid,
    /// A filesystem directly on the partition (level `single`).
    LinuxFilesystem,
}

impl PartitionKind {
    fn gpt_type(self) -> partition_types::Type {
        match self {
            PartitionKind::LinuxRaid => partition_types::LINUX_RAID,
            PartitionKind::LinuxFilesystem => partition_types::LINUX_FS,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            PartitionKind::LinuxRaid => "Linux RAID",
            PartitionKind::LinuxFilesystem => "Linux filesystem",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: the GPT library failed: {message}")]
    Gpt { path: String, message: String },
    #[error("{path}: logical block size {size} is not 512 or 4096, which GPT here supports")]
    BlockSize { path: String, size: u64 },
    #[error("{path}: the disk is too small for a 1 MiB-aligned partition")]
    TooSmall { path: String },
}

/// Where the partition went, in logical blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub first_lba: u64,
    pub last_lba: u64,
}

/// Replaces whatever partition table `path` had with a protective MBR and a
/// GPT holding one partition named `name`, from 1 MiB to the last whole MiB.
pub fn write_single(
    path: &Path,
    block_size: u64,
    name: &str,
    kind: PartitionKind,
) -> Result<Layout, PartitionError> {
    let shown = path.display().to_string();
    let io = |source| PartitionError::Io {
        path: shown.clone(),
        source,
    };
    let gpt_err = |e: gpt::GptError| PartitionError::Gpt {
        path: shown.clone(),
        message: e.to_string(),
    };
    let lb = LogicalBlockSize::try_from(block_size).map_err(|_| PartitionError::BlockSize {
        path: shown.clone(),
        size: block_size,
    })?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    let blocks = crate::machine::signature::device_size(&file).map_err(io)? / block_size;

    let mut disk = gpt::GptConfig::new()
        .writable(true)
        .logical_block_size(lb)
        .create_from_device(file, None)
        .map_err(gpt_err)?;
    let header = disk.header().clone();
    let per_mib = MIB / block_size;
    let first = header.first_usable.div_ceil(per_mib) * per_mib;
    let end = (header.last_usable + 1) / per_mib * per_mib;
    if end <= first {
        return Err(PartitionError::TooSmall { path: shown });
    }
    disk.add_partition_at(name, 1, first, end - first, kind.gpt_type(), 0)
        .map_err(gpt_err)?;
    let mut file = disk.write().map_err(gpt_err)?;
    let protective = ProtectiveMBR::with_lb_size(u32::try_from(blocks - 1).unwrap_or(u32::MAX));
    protective
        .overwrite_lba0(&mut file)
        .map_err(|e| PartitionError::Gpt {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    file.sync_all().map_err(io)?;
    Ok(Layout {
        first_lba: first,
        last_lba: end - 1,
    })
}

/// Whether `path` already carries exactly the table [`write_single`] makes
/// for `name`: how a resumed setup recognises its own work.
pub fn is_ours(path: &Path, block_size: u64, name: &str, kind: PartitionKind) -> bool {
    let Ok(table) = File::open(path)
        .map_err(GptReadError::Io)
        .and_then(|mut f| read_gpt(&mut f, block_size))
    else {
        return false;
    };
    matches!(&table.partitions[..], [p] if p.name == name && p.type_guid == kind.gpt_type().guid)
}

/// A GPT as [`read_gpt`] found it: the primary header and its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GptTable {
    pub disk_guid: Uuid,
    pub partitions: Vec<GptPartition>,
}

/// A used GPT entry. `first_lba <= last_lba` holds; whether the range fits
/// the disk is the caller's to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GptPartition {
    /// 1-based index in the entry array, as the kernel numbers partitions.
    pub number: u32,
    pub type_guid: Uuid,
    pub first_lba: u64,
    pub last_lba: u64,
    pub name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum GptReadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("logical block size {0} is not 512 or 4096")]
    BlockSize(u64),
    #[error("no GPT header (no \"EFI PART\" signature in the second block)")]
    NoSignature,
    #[error("the primary GPT header is damaged ({0})")]
    Header(&'static str),
    #[error(
        "the GPT's partition entries are {0} bytes; only the standard 128-byte entries are read"
    )]
    EntrySize(u32),
    #[error("the GPT's entry array ({entries} entries at block {start}) does not fit the disk")]
    Entries { entries: u32, start: u64 },
    #[error("GPT partition {0} ends before it starts")]
    Backwards(u32),
}

/// What every partitioning tool writes and UEFI requires.
const GPT_ENTRY_SIZE: u32 = 128;
/// The entry array is read whole to check its CRC, so its size is capped well
/// above the 128 entries tools write and far below a memory problem.
const GPT_MAX_ENTRIES: u32 = 8192;

/// Reads the primary GPT of `dev` with `block_size`-byte blocks, validating
/// everything before use: a crafted header is an error, never a panic, an
/// overflow or an allocation the size of the disk. The `gpt` crate is not used
/// here because it asserts 128-byte entries and sizes its buffers from the
/// header.
pub fn read_gpt<D: Read + Seek>(dev: &mut D, block_size: u64) -> Result<GptTable, GptReadError> {
    if block_size != 512 && block_size != 4096 {
        return Err(GptReadError::BlockSize(block_size));
    }
    let len = dev.seek(SeekFrom::End(0))?;
    if len < 2 * block_size {
        return Err(GptReadError::NoSignature);
    }
    let mut header = vec![0u8; block_size as usize];
    dev.seek(SeekFrom::Start(block_size))?;
    dev.read_exact(&mut header)?;
    if &header[..8] != b"EFI PART" {
        return Err(GptReadError::NoSignature);
    }
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let header_size = u32_at(&header, 12) as usize;
    if !(92..=header.len()).contains(&header_size) {
        return Err(GptReadError::Header("its size field is out of range"));
    }
    let stored_crc = u32_at(&header, 16);
    header[16..20].fill(0);
    if crc32fast::hash(&header[..header_size]) != stored_crc {
        return Err(GptReadError::Header("its CRC does not match"));
    }
    let entry_size = u32_at(&header, 84);
    if entry_size != GPT_ENTRY_SIZE {
        return Err(GptReadError::EntrySize(entry_size));
    }
    let start = u64_at(&header, 72);
    let entries = u32_at(&header, 80);
    let array_len = u64::from(entries) * u64::from(GPT_ENTRY_SIZE);
    let fits = start
        .checked_mul(block_size)
        .and_then(|offset| offset.checked_add(array_len))
        .is_some_and(|end| end <= len);
    if entries > GPT_MAX_ENTRIES || !fits {
        return Err(GptReadError::Entries { entries, start });
    }
    let mut array = vec![0u8; array_len as usize];
    dev.seek(SeekFrom::Start(start * block_size))?;
    dev.read_exact(&mut array)?;
    if crc32fast::hash(&array) != u32_at(&header, 88) {
        return Err(GptReadError::Header(
            "the CRC of its entry array does not match",
        ));
    }
    let mut partitions = Vec::new();
    for (number, entry) in (1..).zip(array.chunks_exact(GPT_ENTRY_SIZE as usize)) {
        let type_guid = guid(&entry[..16]);
        if type_guid.is_nil() {
            continue;
        }
        let (first_lba, last_lba) = (u64_at(entry, 32), u64_at(entry, 40));
        if last_lba < first_lba {
            return Err(GptReadError::Backwards(number));
        }
        let name: Vec<u16> = entry[56..128]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&c| c != 0)
            .collect();
        partitions.push(GptPartition {
            number,
            type_guid,
            first_lba,
            last_lba,
            name: String::from_utf16_lossy(&name),
        });
    }
    Ok(GptTable {
        disk_guid: guid(&header[56..72]),
        partitions,
    })
}

/// GPT stores the first three GUID fields little-endian.
fn guid(bytes: &[u8]) -> Uuid {
    Uuid::from_bytes_le(bytes.try_into().expect("a 16-byte slice"))
}

/// BLKRRPART: the kernel drops and re-reads the disk's partitions.
const BLKRRPART: libc::c_ulong = 0x125f;

/// Asks the kernel to re-read the partition table. Fails when the disk is
/// busy or does not support it (a loop device without partition scanning);
/// the caller then falls back to `partx -u`.
pub fn reread(path: &Path) -> std::io::Result<()> {
    let file = File::open(path)?;
    // SAFETY: BLKRRPART takes no argument and only reads the fd.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKRRPART as _, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether the kernel lists partition `number` of the disk `device` (a
/// path under /dev, possibly a by-id link), judged from sysfs under `sys`.
/// Some kernels answer BLKRRPART with success and add nothing (seen on loop
/// devices), so the re-read is checked rather than trusted.
pub fn kernel_has_partition(sys: &Path, device: &Path, number: u32) -> bool {
    let Some(name) = std::fs::canonicalize(device)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    else {
        return false;
    };
    let part = partition_path(&name, number);
    sys.join("class/block").join(&name).join(&part).exists()
        || sys.join("block").join(&name).join(&part).exists()
}

/// Device path of partition `number` of `disk`: `/dev/sda` → `/dev/sda1`,
/// `/dev/nvme0n1` → `/dev/nvme0n1p1`, a by-id link → `<link>-part1`.
pub fn partition_path(disk: &str, number: u32) -> String {
    if disk.starts_with("/dev/disk/") {
        format!("{disk}-part{number}")
    } else if disk.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{disk}p{number}")
    } else {
        format!("{disk}{number}")
    }
}

/// The device md holds of `member`: partition 1 of its disk, which
/// nasforge made; for an adopted array the whole disk or the partition its
/// superblock is on.
pub fn member_device(array: &crate::planner::ArrayPlan, member: &crate::planner::Member) -> String {
    let stable = member.disk.stable_path();
    let number = match &array.imported {
        Some(i) => i
            .partitions
            .iter()
            .find(|(disk, _)| *disk == member.disk.name)
            .and_then(|(_, n)| *n),
        None => Some(1),
    };
    match number {
        Some(n) => partition_path(&stable, n),
        None => stable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_partitions_like_the_kernel_and_udev() {
        assert_eq!(partition_path("/dev/sda", 1), "/dev/sda1");
        assert_eq!(partition_path("/dev/nvme0n1", 1), "/dev/nvme0n1p1");
        assert_eq!(partition_path("/dev/mmcblk0", 2), "/dev/mmcblk0p2");
        assert_eq!(partition_path("/dev/loop3", 1), "/dev/loop3p1");
        assert_eq!(
            partition_path("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", 1),
            "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1"
        );
    }

    #[test]
    fn aligns_to_a_mebibyte_and_writes_a_protective_mbr() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("disk.img");
        let f = File::create(&img).unwrap();
        f.set_len(64 * MIB + 12345 * 512).unwrap();
        let layout = write_single(&img, 512, "nasforge-data", PartitionKind::LinuxRaid).unwrap();
        assert_eq!(layout.first_lba, 2048);
        assert_eq!((layout.last_lba + 1) % 2048, 0, "ends on a MiB boundary");
        let bytes = std::fs::read(&img).unwrap();
        assert_eq!(&bytes[510..512], &[0x55, 0xaa]);
        assert_eq!(bytes[446 + 4], 0xee, "protective MBR partition type");
        assert!(is_ours(
            &img,
            512,
            "nasforge-data",
            PartitionKind::LinuxRaid
        ));
        assert!(!is_ours(
            &img,
            512,
            "nasforge-other",
            PartitionKind::LinuxRaid
        ));
        assert!(!is_ours(
            &img,
            512,
            "nasforge-data",
            PartitionKind::LinuxFilesystem
        ));
    }

    #[test]
    fn four_k_sector_disks_start_at_lba_256() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("disk4k.img");
        File::create(&img).unwrap().set_len(64 * MIB).unwrap();
        let layout =
            write_single(&img, 4096, "nasforge-x", PartitionKind::LinuxFilesystem).unwrap();
        assert_eq!(layout.first_lba, 256);
        assert!(is_ours(
            &img,
            4096,
            "nasforge-x",
            PartitionKind::LinuxFilesystem
        ));
    }
}
