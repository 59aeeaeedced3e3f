//! A pool of disks of any size: each disk a filesystem of its own mounted
//! under /mnt/<pool>, mergerfs joining the data disks at the pool's mount,
//! and SnapRAID's configuration naming data, parity and content files.
//! Pure: the steps write what this module renders.

use crate::planner::ArrayPlan;
use crate::spec::Filesystem;
use crate::spec::pool::disks_dir;
use crate::storage::partition;

/// Where `snapraid` looks when given no `-c`: a person typing
/// `snapraid status` sees the pool nasforge made. One pool per NAS.
pub const SNAPRAID_CONF: &str = "/etc/snapraid.conf";
/// The content file's copy on the system disk; the others are on the
/// data disks nasforge formats (a kept disk gets no file of nasforge's).
pub const OS_CONTENT: &str = "/var/lib/snapraid/snapraid.content";
pub const SETUP_BIN: &str = "/usr/local/sbin/nasforge-setup";

/// One disk of a pool: a data disk (files, a mergerfs branch) or a parity
/// disk (SnapRAID's parity file only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// SnapRAID's name for it: `d1`, `d2`, ... for the disks nasforge
    /// formats, the kept disk's own name, `parity` and `2-parity`. Never
    /// changes for the slot: a replacement disk takes it over, and `snapraid
    /// fix -d NAME` restores by it.
    pub name: String,
    pub mount: String,
    /// The filesystem's device: the member's partition, or the kept disk's.
    pub device: String,
    /// The kernel's name of the disk, for messages.
    pub disk: String,
    pub uuid: String,
    /// 1 or 2 for a parity disk.
    pub parity: Option<usize>,
    pub kept: bool,
}

impl Branch {
    /// Where SnapRAID keeps the parity on a parity disk.
    pub fn parity_file(&self) -> Option<String> {
        self.parity
            .map(|_| format!("{}/snapraid.parity", self.mount))
    }
}

/// The UUID of a formatted member's filesystem: derived from the pool's
/// UUID and the member's slot, so that a step run again after a power cut
/// makes (and recognises) the same filesystem.
pub fn member_uuid(pool_uuid: &str, slot: &str) -> String {
    let base = uuid::Uuid::parse_str(pool_uuid).unwrap_or(uuid::Uuid::NAMESPACE_OID);
    uuid::Uuid::new_v5(&base, slot.as_bytes()).to_string()
}

/// The pool's disks in SnapRAID's order: parity first (`parity`,
/// `2-parity`), then the data disks nasforge formats (`d1`, ... in plan
/// order), then the kept disks that joined.
pub fn branches(array: &ArrayPlan, pool_uuid: &str) -> Vec<Branch> {
    let dir = disks_dir(&array.spec.name);
    let mut out = Vec::new();
    let formatted = |slot: String, mount: String, m: &crate::planner::Member, parity| Branch {
        uuid: member_uuid(pool_uuid, &slot),
        device: partition::partition_path(&m.disk.stable_path(), 1),
        disk: m.disk.name.clone(),
        name: slot,
        mount,
        parity,
        kept: false,
    };
    for (i, m) in array.members.iter().filter(|m| m.parity).enumerate() {
        let level = i + 1;
        let slot = if level == 1 {
            "parity".to_string()
        } else {
            format!("{level}-parity")
        };
        out.push(formatted(
            slot,
            format!("{dir}/parity{level}"),
            m,
            Some(level),
        ));
    }
    for (i, m) in array.members.iter().filter(|m| !m.parity).enumerate() {
        let slot = format!("d{}", i + 1);
        out.push(formatted(slot.clone(), format!("{dir}/{slot}"), m, None));
    }
    for k in &array.joined {
        out.push(Branch {
            name: k.spec.name.clone(),
            mount: k.spec.mount.clone(),
            device: format!("/dev/{}", k.device),
            disk: k.disk.name.clone(),
            uuid: k.uuid.clone(),
            parity: None,
            kept: true,
        });
    }
    out
}

/// mergerfs's options, each from the manual of the version Debian ships
/// (bookworm 2.33.5, trixie 2.40.2):
/// - `allow_other,use_ino`: 2.33's "BASIC SETUP" and FAQ "What settings
///   should I use?"; 2.40 lists both as deprecated no-ops, so the same
///   line serves both releases.
/// - `cache.files=off,dropcacheonclose=true`: "BASIC SETUP" of both, for
///   programs that do not need mmap (Samba and NFS do not).
/// - `category.create=mfs`: new files on the disk with most free space;
///   FAQ: "the average user is probably best off using mfs", and it is not
///   path-preserving, so a rename never fails with EXDEV for SMB clients
///   ("When a program tries to move or rename a file it fails").
/// - `noforget,inodecalc=path-hash`: the NFS sections of both ("Can
///   mergerfs mounts be exported over NFS?"), so a file keeps its inode
///   for NFS clients; the export also needs an `fsid`.
/// - `minfreespace`: a disk with less than this free takes no new file;
///   the default 4G, or a twentieth of the smallest data disk when that is
///   less, so small disks take files at all.
/// - `fsname`: the pool's name in `df` and `mount`.
pub fn mergerfs_options(array: &ArrayPlan) -> String {
    let smallest = array
        .members
        .iter()
        .filter(|m| !m.parity)
        .map(|m| m.disk.size.0)
        .chain(array.joined.iter().map(|k| k.disk.size.0))
        .min()
        .unwrap_or(0);
    let min_free_mib = (smallest / 20 / (1 << 20)).clamp(1, 4096);
    format!(
        "allow_other,use_ino,cache.files=off,dropcacheonclose=true,category.create=mfs,minfreespace={min_free_mib}M,noforget,inodecalc=path-hash,fsname={}",
        array.spec.name
    )
}

/// /etc/snapraid.conf: parity files, content files (one more than the
/// parity levels, each on a different disk, as the manual asks), data
/// disks by name, and the manual's example exclusions.
pub fn snapraid_conf(array: &ArrayPlan, branches: &[Branch]) -> String {
    let mut out = format!(
        "# Written by nasforge-setup for the pool '{}' (mergerfs at {}).\n# Each disk keeps its name: a replacement disk takes the same line.\n",
        array.spec.name, array.spec.mount
    );
    for b in branches {
        if let (Some(level), Some(file)) = (b.parity, b.parity_file()) {
            let key = if level == 1 {
                "parity".to_string()
            } else {
                format!("{level}-parity")
            };
            out += &format!("{key} {file}\n");
        }
    }
    for path in content_files(array, branches) {
        out += &format!("content {path}\n");
    }
    for b in branches.iter().filter(|b| b.parity.is_none()) {
        out += &format!("data {} {}/\n", b.name, b.mount);
    }
    out += "exclude *.unrecoverable\nexclude /lost+found/\nexclude /tmp/\n";
    out
}

/// The content files: the system disk's and one on each data disk nasforge
/// formatted; on the parity disks as well when that makes fewer than
/// parity + 1 (SnapRAID: "at least one copy for each parity disk used plus
/// one").
pub fn content_files(array: &ArrayPlan, branches: &[Branch]) -> Vec<String> {
    let parity = array.spec.parity.unwrap_or(0);
    let mut out = vec![OS_CONTENT.to_string()];
    out.extend(
        branches
            .iter()
            .filter(|b| b.parity.is_none() && !b.kept)
            .map(|b| format!("{}/snapraid.content", b.mount)),
    );
    if out.len() < parity + 1 {
        out.extend(
            branches
                .iter()
                .filter(|b| b.parity.is_some())
                .map(|b| format!("{}/snapraid.content", b.mount)),
        );
    }
    out
}

/// mkfs for one member: no reserved blocks (mergerfs's policies see only
/// the space a user can take, FAQ "tune2fs -m 0"), and on a parity disk
/// few inodes (`-T largefile4`): SnapRAID's manual for parity disks, which
/// leaves room for a parity file as large as a data disk of the same size.
pub fn mkfs(fs: Filesystem, branch: &Branch, label: &str) -> Vec<String> {
    let mut argv: Vec<String> = match fs {
        Filesystem::Xfs => vec![
            "mkfs.xfs".into(),
            "-f".into(),
            "-m".into(),
            format!("uuid={}", branch.uuid),
        ],
        _ => {
            let mut a: Vec<String> = vec!["mkfs.ext4".into(), "-F".into(), "-m".into(), "0".into()];
            if branch.parity.is_some() {
                a.extend(["-T".into(), "largefile4".into()]);
            }
            a.extend(["-U".into(), branch.uuid.clone()]);
            a
        }
    };
    let max_label = if fs == Filesystem::Xfs { 12 } else { 16 };
    if label.len() <= max_label {
        argv.extend(["-L".into(), label.to_string()]);
    }
    argv.push(branch.device.clone());
    argv
}

/// The branches `pool mount` joins: those mounted now. A branch that is
/// not is a lost or late disk whose empty mount point lies on the system
/// disk, where mergerfs would put new files (it has the most free space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joining {
    pub present: Vec<String>,
    pub missing: Vec<String>,
}

pub fn joining(mounts: &crate::machine::mounts::Mounts, branches: &[String]) -> Joining {
    let (present, missing) = branches.iter().cloned().partition(|b| mounts.is_mounted(b));
    Joining { present, missing }
}

/// mergerfs's command line for the branches present.
pub fn mergerfs_argv(options: &str, present: &[String], mount: &str) -> Vec<String> {
    vec![
        "mergerfs".into(),
        "-o".into(),
        options.into(),
        present.join(":"),
        mount.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::mounts::Mounts;

    #[test]
    fn a_branch_that_is_not_mounted_is_left_out() {
        let mounts = Mounts::parse(
            "30 1 8:1 / /mnt/pool/d1 rw - ext4 /dev/sda1 rw\n31 1 8:17 / /srv/photos rw - ext4 /dev/sdb1 rw\n",
        );
        let j = joining(
            &mounts,
            &[
                "/mnt/pool/d1".into(),
                "/mnt/pool/d2".into(),
                "/srv/photos".into(),
            ],
        );
        assert_eq!(j.present, ["/mnt/pool/d1", "/srv/photos"]);
        assert_eq!(j.missing, ["/mnt/pool/d2"]);
        assert_eq!(
            mergerfs_argv("fsname=p", &j.present, "/srv/pool"),
            [
                "mergerfs",
                "-o",
                "fsname=p",
                "/mnt/pool/d1:/srv/photos",
                "/srv/pool"
            ]
        );
    }

    #[test]
    fn a_slot_keeps_its_uuid() {
        let pool = "0b6d3c9e-1111-4222-8333-444455556666";
        assert_eq!(member_uuid(pool, "d1"), member_uuid(pool, "d1"));
        assert_ne!(member_uuid(pool, "d1"), member_uuid(pool, "d2"));
        assert_ne!(member_uuid(pool, "d1"), pool);
    }
}
