//! The recipe's `[[storage.disks]]`: disks (or one partition of them) that
//! already hold someone's files and are shared as they are, `keep = true`.
//! Such a disk is mounted by UUID with `nofail`, never partitioned or
//! formatted.

use super::storage::DiskMatch;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeptDisk {
    /// What the disk is called in the plan, status and logs ("media"); the
    /// same rules as an array's name, and unique among arrays and disks.
    pub name: String,
    /// Which disk: the same rules as an array's `disks`, matching exactly one.
    #[serde(rename = "match")]
    pub disk: DiskMatch,
    /// The partition number holding the filesystem; unset when the whole
    /// disk is the filesystem or exactly one partition holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// The filesystem the disk is expected to hold. Optional: when set, the
    /// image builder checks that the board can mount it and stages what it
    /// needs, and setup refuses a disk that holds another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<KeptFilesystem>,
    pub mount: String,
    /// Must be `true`: the entry's whole point is that nothing on the disk
    /// is erased, and saying so is how a reader of the recipe knows.
    pub keep: bool,
}

/// Filesystems a disk that already holds files may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeptFilesystem {
    Ext4,
    Xfs,
    Btrfs,
    Exfat,
    Ntfs,
}

impl fmt::Display for KeptFilesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeptFilesystem::Ext4 => "ext4",
            KeptFilesystem::Xfs => "xfs",
            KeptFilesystem::Btrfs => "btrfs",
            KeptFilesystem::Exfat => "exfat",
            KeptFilesystem::Ntfs => "ntfs",
        })
    }
}
