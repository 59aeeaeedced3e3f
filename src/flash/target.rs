//! The target, opened once. A disk is opened exclusively (O_EXCL), and all
//! that is checked about it is read through that descriptor (its device
//! number, its size by BLKGETSIZE64, its first and last bytes) or from the
//! sysfs directory of the device number the descriptor reports (model,
//! serial, removable, transport, partitions, holders). The write and the
//! readback use the same descriptor.
//!
//! A path is only a name: swap the card while the question is open, or
//! unplug a reader and plug in another disk, and `/dev/sdX` or the open
//! descriptor can lead to another medium. So after the question the
//! [`Identity`] is read again and compared with the one the question showed;
//! any difference stops the flash before a byte is written.

use super::candidates::{self, Device, Refusal};
use crate::io::direct::{AlignedBuf, DiskFile};
use nasforge_engine::machine::mounts::SystemUse;
use nasforge_engine::machine::signature::{self, Ends, Signature, WINDOW};
use nasforge_engine::machine::sysfs::{self, read_u64};
use sha2::{Digest, Sha256};
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// BLKGETDISKSEQ, `_IOR(0x12, 128, u64)` (asm-generic layout, Linux 5.15+):
/// the sequence number of the disk instance behind a descriptor, which the
/// kernel bumps at every media change and every new device.
const BLKGETDISKSEQ: libc::c_ulong = 0x8008_1280;

/// What a named target turned out to be, open.
pub enum Target {
    Disk {
        device: Box<Device>,
        disk: DiskFile,
        /// As read when the device was checked, before the question.
        identity: Identity,
    },
    /// A regular file, written dd-style. `disk` is None only for a file
    /// that does not exist yet, in a dry run (nothing is created then).
    File { disk: Option<DiskFile> },
}

/// What tells one disk from another, read through the open descriptor and
/// the sysfs directory of its device number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    devnum: (u32, u32),
    /// BLKGETDISKSEQ on the descriptor; None on kernels without it.
    diskseq: Option<u64>,
    /// `diskseq` in sysfs: equal to the descriptor's unless the device
    /// number now belongs to another disk.
    sysfs_diskseq: Option<u64>,
    /// BLKGETSIZE64 on the descriptor.
    pub size: u64,
    sysfs_size: Option<u64>,
    model: Option<String>,
    serial: Option<String>,
    /// sha256 of the first and last MiB, read past the page cache.
    ends: [u8; 32],
}

impl Identity {
    pub fn read(disk: &DiskFile) -> io::Result<Identity> {
        let meta = disk.file().metadata()?;
        if !meta.file_type().is_block_device() {
            return Err(io::Error::other("no longer a block device"));
        }
        let devnum = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
        let sys = sysfs::block_dir(Path::new("/"), devnum).ok_or_else(|| {
            io::Error::other(format!(
                "device {}:{} is gone from /sys/dev/block",
                devnum.0, devnum.1
            ))
        })?;
        let size = disk.size()?;
        let mut ends = Sha256::new();
        let window = WINDOW.min(size);
        for offset in [0, size - window] {
            let mut buf = AlignedBuf::new(window as usize);
            disk.read_exact_at(&mut buf, offset)?;
            ends.update(&buf[..]);
        }
        Ok(Identity {
            devnum,
            diskseq: diskseq(disk),
            sysfs_diskseq: read_u64(&sys.join("diskseq")),
            size,
            sysfs_size: read_u64(&sys.join("size")).and_then(|s| s.checked_mul(512)),
            model: candidates::model(&sys),
            serial: candidates::serial(&sys),
            ends: ends.finalize().into(),
        })
    }

    /// Why sysfs may be describing another disk than the descriptor's.
    fn disagreement(&self) -> Option<String> {
        if let (Some(fd), Some(sys)) = (self.diskseq, self.sysfs_diskseq)
            && fd != sys
        {
            return Some(format!(
                "the open device is disk instance {fd} but sysfs now shows instance {sys} under {}:{} (the disk was removed and another took its number)",
                self.devnum.0, self.devnum.1
            ));
        }
        if self.sysfs_size != Some(self.size) {
            return Some(format!(
                "the open device holds {} bytes but sysfs says {}",
                self.size,
                self.sysfs_size
                    .map_or("nothing".into(), |s| format!("{s} bytes"))
            ));
        }
        None
    }

    /// What differs between `self` (shown with the question) and `now`.
    pub fn changes(&self, now: &Identity) -> Vec<String> {
        let text = |v: &Option<String>| v.as_deref().unwrap_or("none").to_string();
        let seq = |v: Option<u64>| v.map_or("none".into(), |s| s.to_string());
        let mut out = Vec::new();
        let mut differs = |what: &str, was: String, is: String| {
            if was != is {
                out.push(format!("{what} was {was}, is now {is}"));
            }
        };
        differs(
            "the device number",
            format!("{}:{}", self.devnum.0, self.devnum.1),
            format!("{}:{}", now.devnum.0, now.devnum.1),
        );
        differs(
            "the disk instance (diskseq)",
            seq(self.diskseq),
            seq(now.diskseq),
        );
        differs(
            "the size",
            format!("{} bytes", self.size),
            format!("{} bytes", now.size),
        );
        differs("the model", text(&self.model), text(&now.model));
        differs("the serial", text(&self.serial), text(&now.serial));
        if self.ends != now.ends {
            out.push("its first or last MiB holds other bytes than when it was checked".into());
        }
        out.extend(now.disagreement());
        out
    }
}

fn diskseq(disk: &DiskFile) -> Option<u64> {
    let mut seq: u64 = 0;
    // SAFETY: BLKGETDISKSEQ writes one u64 through the pointer.
    let rc = unsafe { libc::ioctl(disk.file().as_raw_fd(), BLKGETDISKSEQ as _, &mut seq) };
    (rc == 0).then_some(seq)
}

/// The signatures in `[offset, offset+len)` of an open target, read past
/// the page cache.
pub fn probe(disk: &DiskFile, offset: u64, len: u64) -> io::Result<Vec<Signature>> {
    let window = WINDOW.min(len);
    let mut head = AlignedBuf::new(window as usize);
    let mut tail = AlignedBuf::new(window as usize);
    disk.read_exact_at(&mut head, offset)?;
    disk.read_exact_at(&mut tail, offset + len - window)?;
    Ok(signature::probe(&Ends {
        head: &head,
        tail: &tail,
        size: len,
    }))
}

/// Opens what the user named (`/dev/sdb`, a `/dev/disk/by-id/...` link, or
/// a file path): read-write, or read-only for a dry run (which creates
/// nothing). A partition, a character device or a missing path under /dev
/// is an error, never a file to create.
pub fn open(named: &Path, write: bool) -> Result<Target, String> {
    let shown = named.display();
    match fs::metadata(named) {
        Ok(meta) if meta.file_type().is_block_device() => open_disk(named, write),
        Ok(meta) if meta.is_file() => {
            let file = OpenOptions::new()
                .read(true)
                .write(write)
                .open(named)
                .map_err(|e| format!("opening {shown}: {e}"))?;
            if !file.metadata().is_ok_and(|m| m.is_file()) {
                return Err(format!(
                    "{shown} changed while it was opened (it is no longer a regular file); nothing was written"
                ));
            }
            let disk = DiskFile::new(file).map_err(|e| format!("opening {shown}: {e}"))?;
            Ok(Target::File { disk: Some(disk) })
        }
        Ok(meta) if meta.is_dir() => Err(format!(
            "{shown} is a directory; name a disk such as /dev/sdX (see nasforge flash --list) or an image file to write"
        )),
        Ok(_) => Err(format!(
            "{shown} is neither a block device nor a regular file"
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if named.starts_with("/dev") {
                return Err(format!(
                    "{shown} does not exist; is the card inserted? `nasforge flash --list` shows the disks there are"
                ));
            }
            let disk = if write {
                // create_new: whatever appeared there since the check (a
                // device node, a link) is refused, not opened.
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(named)
                    .map_err(|e| format!("creating {shown}: {e}"))?;
                Some(DiskFile::new(file).map_err(|e| format!("opening {shown}: {e}"))?)
            } else {
                None
            };
            Ok(Target::File { disk })
        }
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

fn open_disk(named: &Path, write: bool) -> Result<Target, String> {
    let shown = named.display();
    let disk = DiskFile::open_device(named, write).map_err(|e| refused_open(named, &e))?;
    let meta = disk
        .file()
        .metadata()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !meta.file_type().is_block_device() {
        return Err(format!(
            "{shown} changed while it was opened (it is no longer a block device); nothing was written"
        ));
    }
    let devnum = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let sys = sysfs::block_dir(Path::new("/"), devnum).ok_or_else(|| {
        format!(
            "{shown}: block device {}:{} is not in /sys/dev/block",
            devnum.0, devnum.1
        )
    })?;
    if sys.join("partition").exists() {
        return Err(partition_refusal(named, &sys));
    }
    let mut device = candidates::read_device(&sys, &SystemUse::read(Path::new("/")))
        .ok_or_else(|| format!("{shown}: cannot read its size from {}", sys.display()))?;
    let identity = Identity::read(&disk).map_err(|e| format!("reading {shown}: {e}"))?;
    if let Some(why) = identity.disagreement() {
        return Err(format!(
            "{shown}: {why}; the disk is changing under nasforge, so it is not written. Run the command again once the card stays put"
        ));
    }
    device.size = identity.size;
    device.probe(|offset, len| probe(&disk, offset, len));
    Ok(Target::Disk {
        device: Box::new(device),
        disk,
        identity,
    })
}

fn partition_refusal(named: &Path, sys: &Path) -> String {
    let disk = sys.parent().map(sysfs::name_of).unwrap_or_default();
    format!(
        "refusing to write {}: {}",
        named.display(),
        Refusal::Partition { disk }.explain()
    )
}

/// Why the disk could not be opened, in the user's terms. Nothing was
/// opened, so nothing can be written: the path is looked at again only to
/// say who uses the disk (the system, a mount, swap, md/dm), which the
/// kernel's refusal does not.
fn refused_open(named: &Path, e: &io::Error) -> String {
    let shown = named.display();
    let sys = fs::metadata(named)
        .ok()
        .filter(|m| m.file_type().is_block_device())
        .and_then(|m| {
            sysfs::block_dir(
                Path::new("/"),
                (libc::major(m.rdev()), libc::minor(m.rdev())),
            )
        });
    if let Some(sys) = &sys
        && sys.join("partition").exists()
    {
        return partition_refusal(named, sys);
    }
    let device = sys.and_then(|s| candidates::read_device(&s, &SystemUse::read(Path::new("/"))));
    let mut reasons: Vec<String> = device
        .iter()
        .flat_map(|d| &d.in_use)
        .map(|u| Refusal::InUse(u.clone()).explain())
        .collect();
    let what = device.map_or(String::new(), |d| format!(" ({})", d.summary()));
    let kernel = match e.raw_os_error() {
        Some(libc::EBUSY) => {
            if reasons.is_empty() {
                reasons.push("another program holds it open exclusively (a partitioner, mkfs, a virtual machine, another flash); close it and try again".into());
            }
            "the kernel refused to open it exclusively (O_EXCL: EBUSY), as it does while the disk or one of its partitions is mounted, active swap, part of an md/dm device or held open exclusively by another program".to_string()
        }
        Some(libc::EROFS) => {
            reasons.push(Refusal::ReadOnly.explain());
            "it cannot be opened for writing".to_string()
        }
        Some(libc::ENOMEDIUM) => "it has no medium; is the card inserted?".to_string(),
        // SAFETY: geteuid has no preconditions.
        Some(libc::EACCES) | Some(libc::EPERM) if unsafe { libc::geteuid() } != 0 => format!(
            "opening it was refused ({e}); writing a disk needs root (sudo nasforge flash ...)"
        ),
        _ => format!("opening it failed: {e}"),
    };
    if reasons.is_empty() {
        return format!("{shown}{what}: {kernel}; nothing was written");
    }
    format!(
        "refusing to write {shown}{what}: {kernel}:\n  - {}\nnothing was written",
        reasons.join("\n  - ")
    )
}

/// Reads the identity again, through the same descriptor, and compares it
/// with the one shown before the question. Err names every difference.
pub fn recheck(name: &str, disk: &DiskFile, shown: &Identity) -> Result<(), String> {
    let changes = match Identity::read(disk) {
        Ok(now) => shown.changes(&now),
        Err(e) => vec![format!("it can no longer be read ({e})")],
    };
    if changes.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{name} changed while the question was open, so it may not be the disk you confirmed:\n  - {}\nnothing was written. A card swapped, or a reader re-plugged, at the prompt can put another disk behind the same name; check which card is in the reader and run the command again",
        changes.join("\n  - ")
    ))
}
