//! The recipe's `[[storage.disks]]`: disks (or one partition of them) that
//! already hold someone's files and are shared as they are, `keep = true`.
//! Such a disk is mounted by UUID with `nofail`, never partitioned or
//! formatted.

use super::paths::is_under;
use super::storage::{Count, Storage, check_mount, check_patterns, is_valid_name};
use super::{SpecProblem, problem};
pub use crate::machine::filesystems::KeptFilesystem;

/// Each kept disk's own problems, and its name and mount against the
/// arrays' and the other kept disks'.
pub(super) fn check_kept(storage: &Storage, out: &mut Vec<SpecProblem>) {
    for (i, kept) in storage.disks.iter().enumerate() {
        let at = format!("storage.disks[{i}]");
        if !kept.keep {
            out.push(problem(
                format!("{at}.keep"),
                "a disk listed in [[storage.disks]] is shared as it is, and `keep = true` says so; to build on it instead, put it in an array with wipe = true",
            ));
        }
        if !is_valid_name(&kept.name) {
            out.push(problem(
                format!("{at}.name"),
                format!("`{}` cannot name a disk; use 1 to 32 letters, digits, '-' or '_', e.g. \"media\"", kept.name.escape_debug()),
            ));
        }
        check_mount(&at, &kept.mount, &kept.name, out);
        check_patterns(&format!("{at}.match"), &kept.disk, out);
        if !matches!(kept.disk.count, Count::All | Count::Exactly(1)) {
            out.push(problem(
                format!("{at}.match.count"),
                "a kept disk is one disk: leave count out (or write count = 1) and list each disk in its own [[storage.disks]]",
            ));
        }
        if kept.partition == Some(0) {
            out.push(problem(
                format!("{at}.partition"),
                "partitions are numbered from 1, as in /dev/sdb1",
            ));
        }
        let arrays = storage
            .arrays
            .iter()
            .map(|a| (a.name.as_str(), a.mount.as_str(), "storage.arrays"));
        let earlier = storage.disks[..i]
            .iter()
            .map(|k| (k.name.as_str(), k.mount.as_str(), "storage.disks"));
        for (j, (name, mount, table)) in arrays.enumerate().chain(earlier.enumerate()) {
            if name == kept.name {
                out.push(problem(
                    format!("{at}.name"),
                    format!("the name `{name}` is already used by {table}[{j}]; every array and kept disk needs its own name"),
                ));
            }
            if mount == kept.mount {
                out.push(problem(
                    format!("{at}.mount"),
                    format!("{mount} is already the mount point of {table}[{j}]; give each its own directory"),
                ));
            } else if is_under(&kept.mount, mount) || is_under(mount, &kept.mount) {
                out.push(problem(
                    format!("{at}.mount"),
                    format!("{} and {mount} ({table}[{j}]) are nested, so one hides the other if mounted out of order; use side-by-side directories such as /srv/a and /srv/b", kept.mount),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_and_the_wizard_keep_the_same_filesystems() {
        assert_eq!(
            KeptFilesystem::from_fstype("ext3"),
            Some(KeptFilesystem::Ext4)
        );
        assert_eq!(
            KeptFilesystem::from_fstype("ntfs"),
            Some(KeptFilesystem::Ntfs)
        );
        assert_eq!(KeptFilesystem::from_fstype("vfat"), None);
        assert_eq!(KeptFilesystem::from_fstype("hfsplus"), None);
    }
}
