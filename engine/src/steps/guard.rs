//! The check before each step: is it done already, still to do, or has
//! the machine changed since planning so that running it would destroy
//! something?

use super::Step;
use crate::command::Cmd;
use crate::machine::disks::{self, Host, Identity};
use crate::machine::md::MdState;
use crate::machine::signature::{self, Signature};
use crate::machine::zfs;
use crate::machine::zfs::imported;
use crate::machine::zfs_report::{parse_zfs_list, parse_zpool_status, whole_disk_path};
use crate::size::Size;
use crate::storage::partition::{self, PartitionKind};
use crate::storage::zpool;
use serde::{Deserialize, Serialize};

/// What to check before a step runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "guard", rename_all = "snake_case")]
pub enum Guard {
    /// The step is idempotent by construction (whole-file writes, enables).
    Always,
    /// Done when the kernel runs with every `usb-storage.quirks` entry
    /// (`quirks`), which the step wrote to `files` (see steps::usb).
    UsbQuirks {
        quirks: Vec<crate::spec::UsbQuirk>,
        files: Vec<String>,
    },
    /// Wiping: the disk at `device` must be the planned one, not in use by
    /// the running system, and hold nothing beyond what it held when the
    /// plan was made (less, after an interrupted wipe).
    NotInUse {
        device: String,
        disk: Identity,
        held: Vec<Signature>,
    },
    /// Partitioning: the disk at `device` must be the planned one and
    /// blank or carry our table (a run cut short re-runs, which also wipes
    /// the new partition); anything else means it changed since planning.
    Partition {
        device: String,
        disk: Identity,
        block_size: u64,
        name: String,
        kind: PartitionKind,
    },
    /// Done if the md array exists with exactly `members` (partition
    /// paths); refused if an array of other devices has its name.
    ArrayExists {
        device: String,
        members: Vec<String>,
    },
    /// Adopting an md array another machine made: done when `device` is
    /// assembled from exactly `members`, writable, with a `filesystem` on
    /// it by udev's probe; refused when an array of other devices has the
    /// name. Assembled read-only (a run cut short) is still to do.
    Adopted {
        device: String,
        members: Vec<String>,
        filesystem: String,
    },
    /// Adopting a ZFS pool another machine made: done when `pool` is
    /// imported here with the GUID `id` and its top dataset's mountpoint
    /// is `mount`; refused when a pool of that name with another GUID is.
    PoolAdopted {
        pool: String,
        id: String,
        mount: String,
    },
    /// Refused if the array is there with other members than `members`:
    /// it is not the one the setup made.
    OurArray {
        device: String,
        members: Vec<String>,
    },
    /// Done if the filesystem with this UUID is on the device; refused if
    /// any other signature is.
    Filesystem { device: String, uuid: String },
    /// Done if something is mounted there.
    Mounted { mount: String },
    /// Creating a ZFS pool: done when `pool` is imported with exactly
    /// these disks; refused when a pool of that name has other disks, or
    /// a disk is not the planned one, is in use, or holds anything but what
    /// the plan erases.
    Pool {
        pool: String,
        members: Vec<PoolMember>,
    },
    /// A share's ZFS dataset: done when it exists with `quota`; refused
    /// when it is missing and `path` is a directory holding files, which a
    /// dataset mounted there would hide.
    Dataset {
        dataset: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quota: Option<Size>,
    },
    /// Done (nothing to do) if the file is absent.
    FilePresent { path: String },
    /// The checks of a replace or grow after setup (`care`).
    Care(CareGuard),
    /// Partitioning the disk the system is mirrored onto: the planned disk,
    /// not in use, blank or holding only the partition table of a run cut
    /// short (the step before erased what the recipe allowed erasing).
    MirrorDisk { device: String, disk: Identity },
    /// Done when the system runs from the mirror: the root holds `marker`,
    /// which only the mirror's copy of it ever does.
    OnMirror { marker: String },
    /// Wiping the old root partition: refused unless the system runs from
    /// the mirror (`marker`) and nothing uses `partition`; done when it is
    /// in the md array `array` already.
    OldRoot {
        marker: String,
        array: String,
        partition: String,
    },
}

/// The checks before a replace or grow step, so a step the power cut
/// caught after it took effect is not repeated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "care", rename_all = "snake_case")]
pub enum CareGuard {
    /// Done when `member` (a partition path) is not in the md array
    /// `array`, or is gone.
    Removed { array: String, member: String },
    /// Done when `member` is in the md array `array`.
    Added { array: String, member: String },
    /// Done when the md array `array` is made for `count` members.
    RaidDevices { array: String, count: usize },
    /// Done when `disk` (a whole disk's path) is one of the ZFS pool
    /// `pool`'s disks, as `zpool status -P` lists them.
    InPool { pool: String, disk: String },
}

impl CareGuard {
    pub fn check(&self, host: &Host) -> Check {
        match self {
            CareGuard::Removed { array, member } => match member_of(host, array, member) {
                Some(true) => Check::Pending,
                _ => Check::Done(format!("{member} is no longer in {array}")),
            },
            CareGuard::Added { array, member } => match member_of(host, array, member) {
                Some(true) => Check::Done(format!("{member} is in {array}")),
                _ => Check::Pending,
            },
            CareGuard::RaidDevices { array, count } => match MdState::read(host, array) {
                Some(md) if md.raid_disks == *count => {
                    Check::Done(format!("{array} is made for {count} members"))
                }
                Some(_) => Check::Pending,
                None => Check::Refuse(format!(
                    "{array} is not assembled: check `cat /proc/mdstat`, assemble it (`mdadm --assemble --scan`), then run `sudo nasforge-setup resume`"
                )),
            },
            CareGuard::InPool { pool, disk } => {
                match zfs::read(host, "zpool", &["status", "-P", pool]) {
                    Ok(Some(text)) => match parse_zpool_status(&text) {
                        Some(report)
                            if report
                                .every_disk()
                                .iter()
                                .filter_map(|v| v.path())
                                .any(|p| whole_disk_path(p) == *disk) =>
                        {
                            Check::Done(format!("{disk} is in the pool {pool}"))
                        }
                        Some(_) => Check::Pending,
                        None => Check::Refuse(format!(
                            "zpool does not report the pool {pool}: import it (`sudo zpool import {pool}`), then run `sudo nasforge-setup resume`"
                        )),
                    },
                    Ok(None) => Check::Refuse(
                        "zpool is not installed (zfsutils-linux), so the pool cannot be read"
                            .into(),
                    ),
                    Err(why) => Check::Refuse(format!(
                        "{why}: import the pool (`sudo zpool import {pool}`), then run `sudo nasforge-setup resume`"
                    )),
                }
            }
        }
    }
}

/// Whether the partition at `member` is one of md array `array`'s devices;
/// None when either is not there.
fn member_of(host: &Host, array: &str, member: &str) -> Option<bool> {
    let md = disks::kernel_name(host, array)?;
    let part = disks::kernel_name(host, member)?;
    Some(disks::md_members(host, &md).contains(&part))
}

/// A whole disk `zpool create` is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolMember {
    /// Its stable path, as on zpool's command line.
    pub device: String,
    pub disk: Identity,
    /// What it held at planning that the plan erases (nothing for a blank
    /// disk).
    pub held: Vec<Signature>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Pending,
    Done(String),
    Refuse(String),
}

impl Step {
    /// Looks at the system (through `host`) to decide whether the step
    /// still has to run.
    pub fn check(&self, host: &Host) -> Check {
        match &self.guard {
            Guard::Always => Check::Pending,
            Guard::UsbQuirks { quirks, .. } => super::usb::check(host, quirks),
            Guard::NotInUse { device, disk, held } => check_wipe(host, device, disk, held),
            Guard::Partition {
                device,
                disk,
                block_size,
                name,
                kind,
            } => check_partition(host, device, disk, *block_size, name, *kind),
            Guard::ArrayExists { device, members } => {
                let Some(kernel) = disks::kernel_name(host, device) else {
                    return Check::Pending;
                };
                match array_is_ours(host, device, &kernel, members) {
                    Ok(()) => Check::Done(format!(
                        "{device} ({kernel}) exists with the planned members"
                    )),
                    Err(why) => Check::Refuse(why),
                }
            }
            Guard::Adopted {
                device,
                members,
                filesystem,
            } => check_adopted(host, device, members, filesystem),
            Guard::PoolAdopted { pool, id, mount } => check_pool_adopted(host, pool, id, mount),
            Guard::OurArray { device, members } => {
                // Absent: wipefs runs and reports the missing array itself.
                let Some(kernel) = disks::kernel_name(host, device) else {
                    return Check::Pending;
                };
                match array_is_ours(host, device, &kernel, members) {
                    Ok(()) => Check::Pending,
                    Err(why) => Check::Refuse(why),
                }
            }
            Guard::Filesystem { device, uuid } => check_filesystem(host, device, uuid),
            Guard::Mounted { mount } => {
                if crate::machine::mounts::Mounts::read(&host.root).is_mounted(mount) {
                    Check::Done(format!("{mount} is mounted"))
                } else {
                    Check::Pending
                }
            }
            Guard::Pool { pool, members } => check_pool(host, pool, members),
            Guard::Dataset {
                dataset,
                path,
                quota,
            } => check_dataset(host, dataset, path, *quota),
            Guard::Care(guard) => guard.check(host),
            Guard::MirrorDisk { device, disk } => check_mirror_disk(host, device, disk),
            Guard::OnMirror { marker } => {
                if host.path(marker).exists() {
                    Check::Done(format!(
                        "the system runs from the mirror ({marker} is there)"
                    ))
                } else {
                    Check::Pending
                }
            }
            Guard::OldRoot {
                marker,
                array,
                partition,
            } => check_old_root(host, marker, array, partition),
            Guard::FilePresent { path } => {
                if host.path(path).exists() {
                    Check::Pending
                } else {
                    Check::Done(format!(
                        "{path} is not there (already imported, or the image staged none)"
                    ))
                }
            }
        }
    }
}

impl Step {
    /// The `mdadm --assemble` that brings back the array this step makes,
    /// when it is not running but every planned member carries an md
    /// superblock: made in a boot that ended before mdadm.conf listed it,
    /// so nothing assembled it at this boot (`AUTO -all`). The members were
    /// wiped and partitioned for it by the plan, so a superblock on them
    /// is the one this step wrote. The array's device and the command;
    /// None when there is nothing to assemble.
    pub fn unassembled_array(&self, host: &Host) -> Option<(&str, Cmd)> {
        let Guard::ArrayExists { device, members } = &self.guard else {
            return None;
        };
        if disks::kernel_name(host, device).is_some() {
            return None;
        }
        let written = |member: &String| {
            signature::read(&host.dev_path(member), 0, None).is_ok_and(|found| {
                found
                    .iter()
                    .any(|s| matches!(s, Signature::MdMember { .. }))
            })
        };
        members.iter().all(written).then(|| {
            let mut argv = vec!["mdadm", "--assemble", device];
            argv.extend(members.iter().map(String::as_str));
            (device.as_str(), Cmd::new(&argv))
        })
    }

    /// What is still missing when a step that rebooted the board finds its
    /// work not in effect afterwards, for the refusal that follows.
    pub fn not_in_effect(&self, host: &Host) -> String {
        match &self.guard {
            Guard::UsbQuirks { quirks, files } => super::usb::not_in_effect(host, quirks, files),
            _ => format!("its check still finds \"{}\" to do", self.title),
        }
    }
}

/// The planned disk at `device`, if nothing uses it; else the refusal,
/// which says nothing was `done` to it.
fn unused_planned_disk(
    host: &Host,
    device: &str,
    disk: &Identity,
    done: &str,
) -> Result<disks::Disk, Check> {
    let found = planned_disk(host, device, disk)
        .map_err(|why| Check::Refuse(format!("nothing was {done}: {why}")))?;
    if !found.in_use.is_empty() {
        return Err(Check::Refuse(format!(
            "{device} ({}) is in use: {}; nothing was {done}",
            found.name,
            in_use(&found)
        )));
    }
    Ok(found)
}

/// Wiping: the planned disk, not in use, holding nothing new.
fn check_wipe(host: &Host, device: &str, disk: &Identity, held: &[Signature]) -> Check {
    let found = match unused_planned_disk(host, device, disk, "erased") {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    // A wipe cut short leaves part of what was there, never more;
    // once wipefs has cleared the magic, the rest of what was
    // there is bytes no probe recognises.
    let new: Vec<String> = found
        .all_contents()
        .into_iter()
        .filter(|(_, s)| !held.contains(s) && !matches!(s, Signature::Unrecognised { .. }))
        .map(|(on, s)| format!("{on}: {s}"))
        .collect();
    if !new.is_empty() {
        return Check::Refuse(format!(
            "{device} ({}) now holds {}, which it did not hold when the plan was made (it held {}); nothing was erased. {REPLAN}",
            found.name,
            new.join("; "),
            describe(held)
        ));
    }
    Check::Pending
}

fn check_mirror_disk(host: &Host, device: &str, disk: &Identity) -> Check {
    let found = match unused_planned_disk(host, device, disk, "written") {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let unexpected = found.all_contents().into_iter().any(|(_, s)| {
        !matches!(
            s,
            Signature::PartitionTable { .. } | Signature::Unrecognised { .. }
        )
    });
    if unexpected {
        return Check::Refuse(format!(
            "{device} ({}) now holds {}, which was not there when the plan was made (or was to be erased); nothing was written. {REPLAN}",
            found.name,
            found.describe_contents()
        ));
    }
    Check::Pending
}

fn check_old_root(host: &Host, marker: &str, array: &str, partition: &str) -> Check {
    if !host.path(marker).exists() {
        return Check::Refuse(format!(
            "the system does not run from the mirror ({marker} is not on the root filesystem), so {partition} may still hold it; nothing was erased. Check `findmnt /` and `cat /proc/mdstat`"
        ));
    }
    if member_of(host, array, partition) == Some(true) {
        return Check::Done(format!("{partition} is in {array}"));
    }
    let Some(name) = disks::kernel_name(host, partition) else {
        return Check::Refuse(format!(
            "{partition} is gone; is the disk the system ran from still attached?"
        ));
    };
    let mounts = crate::machine::mounts::Mounts::read(&host.root);
    let source = format!("/dev/{name}");
    if let Some(m) = mounts.iter().find(|m| m.source == source) {
        return Check::Refuse(format!(
            "{partition} ({name}) is mounted at {}; nothing was erased",
            m.at
        ));
    }
    Check::Pending
}

/// Partitioning: the planned disk, not in use, blank or with our table.
fn check_partition(
    host: &Host,
    device: &str,
    disk: &Identity,
    block_size: u64,
    name: &str,
    kind: PartitionKind,
) -> Check {
    let found = match unused_planned_disk(host, device, disk, "written") {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    // Our own table means a run of this step was cut short: it
    // runs again (it is idempotent), so the new partition's
    // wipefs is not skipped.
    if found.is_blank() || partition::is_ours(&host.dev_path(device), block_size, name, kind) {
        return Check::Pending;
    }
    Check::Refuse(format!(
        "{device} ({}) now holds {}, which was not there when the plan was made (or was to be erased); nothing was written. {REPLAN}",
        found.name,
        found.describe_contents()
    ))
}

/// Formatting: nothing on the device, or the filesystem this setup made.
fn check_filesystem(host: &Host, device: &str, uuid: &str) -> Check {
    let path = host.dev_path(device);
    // What this module's probe misses (f2fs, jfs, bcache...),
    // util-linux's names: a fresh array or partition with no
    // signature is the only thing formatted.
    match signature::read(&path, 0, None).and_then(|mut found| {
        if found.is_empty() {
            found = signature::util_linux(&path).map_err(std::io::Error::other)?;
        }
        Ok(found)
    }) {
        // Absent: mkfs runs and reports the missing device itself.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Check::Pending,
        Err(e) => Check::Refuse(format!("cannot read {device}: {e}")),
        Ok(found) if found.is_empty() => Check::Pending,
        Ok(found)
            if found
                .iter()
                .any(|s| matches!(s, Signature::Filesystem { uuid: Some(u), .. } if u == uuid)) =>
        {
            Check::Done(format!("{device} already has filesystem {uuid}"))
        }
        Ok(found) => Check::Refuse(format!(
            "{device} holds {}, not the filesystem this setup makes (UUID {uuid}); nothing was formatted. If it is an array or disk from elsewhere, stop or detach it; if it is data you meant to erase, run `wipefs --all {device}`; then start setup again",
            describe(&found)
        )),
    }
}

/// Creating a pool: not there yet and every disk as planned, or there
/// already with exactly these disks.
fn check_pool(host: &Host, pool: &str, members: &[PoolMember]) -> Check {
    match imported(host, pool) {
        Err(why) => {
            return Check::Refuse(format!(
                "cannot tell whether a pool '{pool}' exists: {why}; nothing was created"
            ));
        }
        Ok(Some(true)) => return pool_is_ours(host, pool, members),
        Ok(_) => {}
    }
    for m in members {
        let found = match planned_disk(host, &m.device, &m.disk) {
            Ok(found) => found,
            Err(why) => return Check::Refuse(format!("nothing was written: {why}")),
        };
        if !found.in_use.is_empty() {
            return Check::Refuse(format!(
                "{} ({}) is in use: {}; nothing was written",
                m.device,
                found.name,
                in_use(&found)
            ));
        }
        let new: Vec<&Signature> = found
            .all_contents()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| !m.held.contains(s) && !matches!(s, Signature::Unrecognised { .. }))
            .collect();
        if new.contains(&&Signature::ZfsMember) {
            return Check::Refuse(format!(
                "{} ({}) carries a ZFS label, but no pool '{pool}' is imported. If it is the pool this setup created before the board lost power, import it (`sudo zpool import -d /dev/disk/by-id {pool}`) and start setup again; if it is another pool's disk, take it out. Nothing was written",
                m.device, found.name
            ));
        }
        if !new.is_empty() {
            return Check::Refuse(format!(
                "{} ({}) now holds {}, which was not there when the plan was made (or was to be erased); nothing was written. {REPLAN}",
                m.device,
                found.name,
                found.describe_contents()
            ));
        }
    }
    Check::Pending
}

/// Whether the imported pool `pool` is made of exactly the planned disks,
/// compared by kernel name: zpool may show a disk by another of its paths
/// than the one it was created with.
fn pool_is_ours(host: &Host, pool: &str, members: &[PoolMember]) -> Check {
    let report = match zfs::read(host, "zpool", &["status", "-P", pool]) {
        Ok(Some(text)) => parse_zpool_status(&text),
        Ok(None) => None,
        Err(why) => return Check::Refuse(format!("pool '{pool}' is imported, but {why}")),
    };
    let Some(report) = report else {
        return Check::Refuse(format!(
            "pool '{pool}' is imported, but `zpool status -P {pool}` says nothing this setup can read; nothing was written"
        ));
    };
    let kernel = |path: &str| disks::kernel_name(host, path).unwrap_or_else(|| path.to_string());
    let mut found: Vec<String> = report
        .every_disk()
        .iter()
        .map(|v| {
            v.path()
                .map_or(v.name.clone(), |p| kernel(&whole_disk_path(p)))
        })
        .collect();
    let mut planned: Vec<String> = members.iter().map(|m| kernel(&m.device)).collect();
    found.sort();
    // A hot spare standing in for a failed disk shows in its vdev and
    // among the spares.
    found.dedup();
    planned.sort();
    if found == planned {
        return Check::Done(format!(
            "pool '{pool}' is imported with the planned disks ({})",
            planned.join(", ")
        ));
    }
    Check::Refuse(format!(
        "pool '{pool}' exists, made of {}, but this setup planned it from {}: it is not the pool this setup creates, so nothing was written. It is probably an old pool with the same name: export it (`sudo zpool export {pool}`) and take its disks out, or check the disks and remove /var/lib/nasforge/journal.json to plan again with another name",
        found.join(", "),
        planned.join(", ")
    ))
}

/// A share's dataset: there with its quota, or missing and safe to mount.
fn check_dataset(host: &Host, dataset: &str, path: &str, quota: Option<Size>) -> Check {
    let listed = zfs::read(
        host,
        "zfs",
        &[
            "list",
            "-H",
            "-p",
            "-o",
            "name,used,avail,quota,mountpoint",
            dataset,
        ],
    );
    if let Ok(Some(text)) = listed
        && let Some(found) = parse_zfs_list(&text)
            .into_iter()
            .find(|d| d.name == dataset)
    {
        return if found.quota == quota {
            Check::Done(format!(
                "{dataset} exists (quota {})",
                zpool::quota_value(quota)
            ))
        } else {
            Check::Pending
        };
    }
    let holds_files = std::fs::read_dir(host.path(path)).is_ok_and(|mut d| d.next().is_some());
    if holds_files {
        return Check::Refuse(format!(
            "{path} is a directory holding files, and the dataset {dataset} mounted there would hide them; nothing was created. Move the files out (or the share elsewhere), then run this again"
        ));
    }
    Check::Pending
}

/// How a refusal that found the disks changed tells the user to go on.
const REPLAN: &str =
    "Check the disk is the one you meant, then remove /var/lib/nasforge/journal.json to plan again";

fn in_use(disk: &disks::Disk) -> String {
    disk.in_use
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(signatures: &[Signature]) -> String {
    if signatures.is_empty() {
        return "nothing".into();
    }
    signatures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The disk at `device`, if it is the one the step was planned for. Kernel
/// names move between boots, and a disk without a unique by-id link is
/// addressed by its kernel name, so after a power cut another disk can sit
/// at the planned path.
fn planned_disk(host: &Host, device: &str, planned: &Identity) -> Result<disks::Disk, String> {
    let found = disk_by_path(host, device)?;
    let identity = found.identity();
    if identity.same_disk(planned) {
        Ok(found)
    } else {
        Err(format!(
            "{device} is now {identity}, not the disk this step was planned for ({planned}): the disks were renumbered or swapped since planning. Put the planned disk back, or check the disks and remove /var/lib/nasforge/journal.json to plan again"
        ))
    }
}

/// Finds the disk a step names by path, through its by-id link when it has
/// one (kernel names can move between boots).
fn disk_by_path(host: &Host, device: &str) -> Result<disks::Disk, String> {
    let Some(name) = disks::kernel_name(host, device) else {
        return Err(format!("{device} is gone; is the disk still attached?"));
    };
    let inventory = disks::discover(host).map_err(|e| e.to_string())?;
    inventory
        .disks
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| format!("{device} ({name}) is not a disk the system lists any more"))
}

fn check_adopted(host: &Host, device: &str, members: &[String], filesystem: &str) -> Check {
    let Some(kernel) = disks::kernel_name(host, device) else {
        return Check::Pending;
    };
    if let Err(why) = array_is_ours(host, device, &kernel, members) {
        return Check::Refuse(why);
    }
    let block = host.path("/sys/block").join(&kernel);
    let state = crate::machine::sysfs::read_trimmed(&block.join("md/array_state"));
    let writable = matches!(
        state.as_deref(),
        Some("clean" | "active" | "active-idle" | "write-pending")
    );
    let fstype = crate::machine::sysfs::read_trimmed(&block.join("dev"))
        .and_then(|d| crate::machine::sysfs::parse_devnum(&d))
        .map(|(major, minor)| {
            crate::machine::udev::Record::read(&host.path("/run/udev/data"), major, minor)
        })
        .and_then(|r| r.get("ID_FS_TYPE").map(str::to_string));
    if writable && fstype.as_deref() == Some(filesystem) {
        Check::Done(format!(
            "{device} ({kernel}) runs from the planned members with its {filesystem} filesystem"
        ))
    } else {
        Check::Pending
    }
}

fn check_pool_adopted(host: &Host, pool: &str, id: &str, mount: &str) -> Check {
    match imported(host, pool) {
        Err(why) => {
            return Check::Refuse(format!(
                "cannot tell whether a pool '{pool}' is imported: {why}; nothing was imported"
            ));
        }
        Ok(Some(true)) => {}
        Ok(_) => return Check::Pending,
    }
    let get = |tool: &str, property: &str| {
        zfs::read(host, tool, &["get", "-H", "-o", "value", property, pool])
            .ok()
            .flatten()
            .map(|v| v.trim().to_string())
    };
    if get("zpool", "guid").as_deref() != Some(id) {
        return Check::Refuse(format!(
            "a pool called '{pool}' is imported here already, and it is not the one to adopt (id {id}); nothing was imported. Export it (`sudo zpool export {pool}`) or adopt the other by its id under this name elsewhere"
        ));
    }
    if get("zfs", "mountpoint").as_deref() == Some(mount) {
        Check::Done(format!(
            "pool '{pool}' (id {id}) is imported, mounted at {mount}"
        ))
    } else {
        Check::Pending
    }
}

/// Whether the md array at `device` (kernel name `kernel`) is made of
/// exactly the planned partitions; if not, why not.
fn array_is_ours(
    host: &Host,
    device: &str,
    kernel: &str,
    planned: &[String],
) -> Result<(), String> {
    let found = disks::md_members(host, kernel);
    let mut expected = Vec::new();
    let mut missing = Vec::new();
    for part in planned {
        match disks::kernel_name(host, part) {
            Some(name) => expected.push(name),
            None => missing.push(part.as_str()),
        }
    }
    expected.sort();
    if missing.is_empty() && found == expected {
        return Ok(());
    }
    let found = if found.is_empty() {
        "no members the kernel lists".to_string()
    } else {
        found.join(", ")
    };
    let mut planned_text = expected.join(", ");
    if !missing.is_empty() {
        if !planned_text.is_empty() {
            planned_text += ", ";
        }
        planned_text += &format!("{} (not there)", missing.join(", "));
    }
    Err(format!(
        "{device} ({kernel}) is made of {found}, but this setup planned it from {planned_text}: it is not the array this setup creates, so nothing was written to it. It is probably an old array with the same name: stop it (`mdadm --stop {device}`) and take its disks out, or check the disks and remove /var/lib/nasforge/journal.json to plan again with another name"
    ))
}
