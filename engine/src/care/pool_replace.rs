//! Replacing a lost disk of a pool of disks: the new disk is partitioned
//! and formatted as the lost one was (the same slot, so the same UUID and
//! fstab line), mounted where it was, and SnapRAID restores its files from
//! parity (`snapraid -d NAME fix`), then checks them against their hashes
//! (`-a check`); a data disk then joins the running pool. SnapRAID's
//! manual, "Recovering": reconfigure (nothing to change: the name and
//! mount stay), fix, check.

use super::{CareError, CarePlan, find_disk, numbered, record_step, refuse};
use crate::journal::Journal;
use crate::machine::disks::{Disk, Host, Inventory};
use crate::machine::mounts::Mounts;
use crate::operation::Kind;
use crate::planner::ArrayPlan;
use crate::spec::Level;
use crate::steps::{Action, Cmd, Guard, Step, mount_by_systemd, partition_step, wipe_step};
use crate::storage::partition::PartitionKind;
use crate::storage::pool::{self, Branch};

/// Where `snapraid fix` writes the log of what it restored.
fn fix_log(slot: &str) -> String {
    format!("/var/log/nasforge-snapraid-fix-{slot}.log")
}

/// The pool `replace` is about: the one named, or the one that lost a
/// disk when no array was named and no md array lacks a member.
pub(super) fn wanted(
    host: &Host,
    journal: &Journal,
    named: Option<&str>,
    md_needs_one: bool,
) -> Option<usize> {
    let pools = journal
        .plan
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.spec.level == Level::Pool);
    for (i, array) in pools {
        match named {
            Some(name) if name == array.spec.name => return Some(i),
            None if !md_needs_one && !lost(host, journal, i).is_empty() => return Some(i),
            _ => {}
        }
    }
    None
}

/// The pool's disks nasforge formatted whose mount is gone.
fn lost(host: &Host, journal: &Journal, index: usize) -> Vec<Branch> {
    let mounts = Mounts::read(&host.root);
    let uuid = journal
        .context
        .fs_uuids
        .get(index)
        .map_or("", String::as_str);
    pool::branches(&journal.plan.arrays[index], uuid)
        .into_iter()
        .filter(|b| !mounts.is_mounted(&b.mount))
        .collect()
}

pub(super) fn replace(
    host: &Host,
    journal: &Journal,
    index: usize,
    inventory: &Inventory,
    disk: Option<&str>,
    erase: &[String],
) -> Result<CarePlan, CareError> {
    let array = &journal.plan.arrays[index];
    let name = &array.spec.name;
    let lost = lost(host, journal, index);
    let old = match lost.as_slice() {
        [] => {
            return refuse(format!(
                "every disk of the pool '{name}' is mounted, so there is nothing to replace"
            ));
        }
        [one] => one,
        many => {
            let names: Vec<&str> = many.iter().map(|b| b.name.as_str()).collect();
            return refuse(format!(
                "the pool '{name}' lost several disks ({}): replace them one at a time, data disks first, each with a parity disk still there (SnapRAID restores as many lost disks at once as it has parity)",
                names.join(", ")
            ));
        }
    };
    if old.kept {
        return refuse(format!(
            "'{}' is a kept disk: its files were never nasforge's to format. Restore them by hand onto a disk mounted at {} (`sudo snapraid -d {} -l /root/fix.log fix`), or bring the disk back",
            old.name, old.mount, old.name
        ));
    }
    let was = array
        .members
        .iter()
        .find(|m| m.disk.name == old.disk)
        .map(|m| m.disk.clone());
    let need = needed_size(array, old, was.as_ref());
    let (new, erased) = pick(host, journal, inventory, disk, erase, need, name)?;
    let mut recorded = journal.clone();
    let plan = &mut recorded.plan.arrays[index];
    if let Some(m) = plan.members.iter_mut().find(|m| m.disk.name == old.disk) {
        m.disk = new.clone();
        m.erase = erased;
    }
    let uuid = journal
        .context
        .fs_uuids
        .get(index)
        .map_or("", String::as_str);
    let branch = pool::branches(plan, uuid)
        .into_iter()
        .find(|b| b.name == old.name)
        .expect("the slot is the same in the record");
    let mut steps = Vec::new();
    if erased {
        steps.push(wipe_step(new));
    }
    steps.extend(restore_steps(array, &branch, new));
    steps.push(record_step(&recorded, name));
    let title = format!(
        "Replace the lost {} disk '{}' of the pool '{name}' ({}) with {} ({})",
        if branch.parity.is_some() {
            "parity"
        } else {
            "data"
        },
        old.name,
        was.as_ref().map_or_else(|| old.disk.clone(), Disk::summary),
        new.name,
        new.summary()
    );
    let mut text = format!(
        "The files come back as they were at the last sync; files changed since on '{}' are lost.\n",
        old.name
    );
    text += &super::erase_notes(&[(new, erased)]);
    text += &numbered(&steps);
    Ok(CarePlan {
        kind: Kind::Replace,
        title,
        text,
        steps,
    })
}

/// A data disk's replacement holds what the lost one held; a parity
/// disk's, the largest data disk's parity.
fn needed_size(array: &ArrayPlan, old: &Branch, was: Option<&Disk>) -> u64 {
    if old.parity.is_some() {
        array
            .members
            .iter()
            .filter(|m| !m.parity)
            .map(|m| m.disk.size.0)
            .chain(array.joined.iter().map(|k| k.disk.size.0))
            .max()
            .unwrap_or(0)
    } else {
        was.map_or(0, |d| d.size.0)
    }
}

fn pick<'a>(
    host: &Host,
    journal: &Journal,
    inventory: &'a Inventory,
    named: Option<&str>,
    erase: &[String],
    need: u64,
    pool: &str,
) -> Result<(&'a Disk, bool), CareError> {
    let taken = |d: &Disk| {
        journal
            .plan
            .arrays
            .iter()
            .flat_map(|a| a.members.iter().map(|m| &m.disk))
            .chain(journal.plan.kept.iter().map(|k| &k.disk))
            .any(|m| m.identity().same_disk(&d.identity()))
    };
    let fits = |d: &Disk| d.size.0 >= need && d.in_use.is_empty() && !taken(d);
    let disk = match named {
        Some(n) => find_disk(host, inventory, n)?,
        None => {
            let blank: Vec<&Disk> = inventory
                .disks
                .iter()
                .filter(|d| fits(d) && d.is_blank())
                .collect();
            match blank.as_slice() {
                [one] => *one,
                [] => {
                    return refuse(format!(
                        "no attached blank disk can take the lost disk's place in '{pool}' (it needs {} or more); attach one, or name one that holds data with --disk DEV --erase DEV",
                        crate::size::Size(need)
                    ));
                }
                many => {
                    let names: Vec<&str> = many.iter().map(|d| d.name.as_str()).collect();
                    return refuse(format!(
                        "several blank disks fit ({}): choose one with --disk DEV",
                        names.join(", ")
                    ));
                }
            }
        }
    };
    if taken(disk) {
        return refuse(format!(
            "{} is a disk of an array, a pool or a kept disk already",
            disk.name
        ));
    }
    if !disk.in_use.is_empty() {
        return refuse(format!("{} is in use and is never written", disk.name));
    }
    if disk.size.0 < need {
        return refuse(format!(
            "{} ({}) is smaller than the {} the lost disk's place needs",
            disk.name,
            disk.size,
            crate::size::Size(need)
        ));
    }
    let erased = erase.iter().any(|e| disk.is_named(e));
    if !disk.is_blank() && !erased {
        return refuse(format!(
            "{} holds {}. If that may be lost, name it twice: --disk {0} --erase {0}",
            disk.name,
            disk.describe_contents()
        ));
    }
    Ok((disk, erased))
}

/// Partition, format with the slot's UUID, mount, restore, check, join.
fn restore_steps(array: &ArrayPlan, branch: &Branch, new: &Disk) -> Vec<Step> {
    let pool = &array.spec.name;
    let slot = &branch.name;
    let (partition, _) = partition_step(new, pool, PartitionKind::LinuxFilesystem);
    let mut steps = vec![
        partition,
        Step {
            id: format!("mkfs:{pool}-{slot}"),
            title: format!(
                "Make the {} filesystem of '{pool}' disk {slot} on {}",
                array.spec.filesystem, new.name
            ),
            guard: Guard::Filesystem {
                device: branch.device.clone(),
                uuid: branch.uuid.clone(),
            },
            actions: vec![Action::Run(Cmd::new(&pool::mkfs(
                array.spec.filesystem,
                branch,
                &format!("{pool}-{slot}"),
            )))],
            always: vec![],
        },
        mount_by_systemd(
            &format!("{pool}-{slot}"),
            format!("Mount it at {}", branch.mount),
            &branch.mount,
            &branch.device,
        ),
        Step {
            id: format!("fix:{pool}-{slot}"),
            title: format!(
                "Restore {slot}'s files from parity (snapraid -d {slot} fix, log in {})",
                fix_log(slot)
            ),
            guard: Guard::Always,
            actions: vec![Action::Run(Cmd::new(&[
                "snapraid",
                "-d",
                slot,
                "-l",
                &fix_log(slot),
                "fix",
            ]))],
            always: vec![],
        },
    ];
    if branch.parity.is_none() {
        steps.push(Step {
            id: format!("check:{pool}-{slot}"),
            title: format!(
                "Check every restored file of {slot} against its hash (snapraid -d {slot} -a check)"
            ),
            guard: Guard::Always,
            actions: vec![Action::Run(Cmd::new(&[
                "snapraid", "-d", slot, "-a", "check",
            ]))],
            always: vec![],
        });
        // SnapRAID saves no owners or modes (snapraid(1), LIMITATIONS): it
        // restores files as root, mode 0600, which no share user may read.
        // They take the pool's folder's owner and group, writable by both,
        // as files written through the shares are.
        steps.push(Step {
            id: format!("owners:{pool}-{slot}"),
            title: format!(
                "Give {slot}'s restored files the owner and group of {}, readable and writable by both",
                array.spec.mount
            ),
            guard: Guard::Always,
            actions: vec![
                Action::Run(Cmd::new(&[
                    "chown",
                    "-R",
                    &format!("--reference={}", array.spec.mount),
                    &branch.mount,
                ])),
                Action::Run(Cmd::new(&["chmod", "-R", "ug+rwX", &branch.mount])),
                Action::Run(Cmd::new(&[
                    "chmod",
                    &format!("--reference={}", array.spec.mount),
                    &branch.mount,
                ])),
            ],
            always: vec![],
        });
        steps.push(Step {
            id: format!("join:{pool}-{slot}"),
            title: format!(
                "Join {} to the running pool at {}",
                branch.mount, array.spec.mount
            ),
            guard: Guard::Always,
            actions: vec![Action::Run(Cmd::new(&[
                pool::SETUP_BIN,
                "pool",
                "join",
                &array.spec.mount,
                &branch.mount,
            ]))],
            always: vec![],
        });
    }
    steps
}
