//! A `level = "pool"` array's own checks: disks of any size, each with its
//! own filesystem, joined by mergerfs, with SnapRAID's parity on the
//! largest blank ones, and kept disks joining as data disks.

use super::paths::is_under;
use super::storage::{Array, Count, Filesystem, Level, Storage};
use super::{SpecProblem, problem};

/// The directory under which a pool's own disks are mounted.
pub fn disks_dir(pool: &str) -> String {
    format!("/mnt/{pool}")
}

/// SnapRAID takes up to six levels of parity; two already survive any two
/// disks lost together, which is more than a pool of a home's disks needs
/// before backups are the answer.
pub const MAX_PARITY: usize = 2;

/// The pool's problems: its filesystem, parity and kept disks. Other levels
/// are checked to not carry the pool's keys.
pub(super) fn check_pool(at: &str, array: &Array, storage: &Storage, out: &mut Vec<SpecProblem>) {
    if array.level != Level::Pool {
        if array.parity.is_some() {
            out.push(problem(
                format!("{at}.parity"),
                format!("parity is a pool's setting; {} keeps its own redundancy, so remove parity (or write level = \"pool\")", array.level),
            ));
        }
        if !array.keep.is_empty() {
            out.push(problem(
                format!("{at}.keep"),
                format!("only a pool takes disks that hold files as they are; {} erases its members, so remove keep (or write level = \"pool\")", array.level),
            ));
        }
        return;
    }
    if !matches!(array.filesystem, Filesystem::Ext4 | Filesystem::Xfs) {
        out.push(problem(
            format!("{at}.filesystem"),
            format!("each disk of a pool gets a filesystem of its own, ext4 or xfs (SnapRAID and mergerfs are documented on those), not {}; write filesystem = \"ext4\"", array.filesystem),
        ));
    }
    if array.vdevs.is_some() {
        out.push(problem(
            format!("{at}.vdevs"),
            "a pool has no groups of disks: every disk is a filesystem of its own; remove vdevs",
        ));
    }
    if array.spares > 0 {
        out.push(problem(
            format!("{at}.spares"),
            "a pool has no hot spares: a lost disk's files are restored onto a new disk with `nasforge-setup replace`; remove spares",
        ));
    }
    let Some(parity) = array.parity else {
        out.push(problem(
            at.to_string(),
            "a pool needs parity = 1 (the largest disk holds SnapRAID's parity, so one lost disk's files can be restored), 2 (two disks of parity) or 0 (no parity: a lost disk's files are lost); add one of them",
        ));
        return;
    };
    if parity > MAX_PARITY {
        out.push(problem(
            format!("{at}.parity"),
            format!("parity = {parity} is more than a pool here takes: write 1, or 2 to survive two disks lost together"),
        ));
        return;
    }
    check_kept_members(at, array, storage, out);
    check_place(at, array, storage, out);
    let Count::Exactly(blank) = array.disks().count else {
        return;
    };
    let kept = array.keep.len();
    if blank + kept < 2 {
        out.push(problem(
            format!("{at}.disks.count"),
            format!("a pool of {} disk joins nothing: it needs two disks or more; raise count, or use level = \"single\" for one disk", blank + kept),
        ));
    } else if parity > blank {
        out.push(problem(
            format!("{at}.parity"),
            format!("parity = {parity} needs {parity} blank disk(s) to hold it, but count = {blank}; kept disks hold files and never parity, so raise count or lower parity"),
        ));
    } else if blank - parity + kept == 0 {
        out.push(problem(
            format!("{at}.parity"),
            format!("parity = {parity} takes all {blank} disks, leaving none for files; raise count or lower parity"),
        ));
    }
}

/// One pool per NAS (SnapRAID's /etc/snapraid.conf is the pool's), and
/// nothing else mounted where its disks go, /mnt/<name>.
fn check_place(at: &str, array: &Array, storage: &Storage, out: &mut Vec<SpecProblem>) {
    let first = storage.arrays.iter().position(|a| a.level == Level::Pool);
    if let Some(j) = first
        && !std::ptr::eq(&storage.arrays[j], array)
    {
        out.push(problem(
            format!("{at}.level"),
            format!("storage.arrays[{j}] is a pool already, and nasforge sets up one pool (SnapRAID's /etc/snapraid.conf is its); add these disks to that pool"),
        ));
    }
    let dir = disks_dir(&array.name);
    let mounts = storage
        .arrays
        .iter()
        .map(|a| a.mount.as_str())
        .chain(storage.disks.iter().map(|d| d.mount.as_str()));
    for mount in mounts {
        if mount == dir || is_under(mount, &dir) || is_under(&dir, mount) {
            out.push(problem(
                format!("{at}.name"),
                format!("the pool's own disks are mounted under {dir}, where {mount} is mounted too; rename the pool or move {mount}"),
            ));
        }
    }
}

/// The kept disks named in `keep`: each listed in `[[storage.disks]]`, once,
/// and in no other pool.
fn check_kept_members(at: &str, array: &Array, storage: &Storage, out: &mut Vec<SpecProblem>) {
    for (k, name) in array.keep.iter().enumerate() {
        if !storage.disks.iter().any(|d| d.name == *name) {
            let known: Vec<&str> = storage.disks.iter().map(|d| d.name.as_str()).collect();
            out.push(problem(
                format!("{at}.keep[{k}]"),
                format!(
                    "no kept disk is named `{}`; {}",
                    name.escape_debug(),
                    if known.is_empty() {
                        "describe the disk in a [[storage.disks]] with keep = true and its name"
                            .to_string()
                    } else {
                        format!("the kept disks are: {}", known.join(", "))
                    }
                ),
            ));
        } else if array.keep[..k].contains(name) {
            out.push(problem(
                format!("{at}.keep[{k}]"),
                format!("`{name}` is listed twice; list each kept disk once"),
            ));
        } else if let Some(j) = storage
            .arrays
            .iter()
            .position(|other| !std::ptr::eq(other, array) && other.keep.contains(name))
        {
            out.push(problem(
                format!("{at}.keep[{k}]"),
                format!(
                    "`{name}` is already a disk of storage.arrays[{j}]; a disk belongs to one pool"
                ),
            ));
        }
    }
}
