//! A ZFS pool's disks cared for as an md array's are: the survey reads
//! each recorded disk's state from `zpool status -P -p` (ZFS keeps no
//! sysfs tree of its vdevs), and `replace` puts a new disk in a missing or
//! failed one's place with `zpool replace`, by the new disk's by-id path,
//! then follows the resilver until ZFS detaches the old disk; `grow` adds
//! whole vdevs of the pool's shape with `zpool add`.

use super::{ArraySurvey, Candidate, CareError, CarePlan, MemberReport, MemberState};
use super::{numbered, record_step, refuse};
use crate::journal::Journal;
use crate::machine::disks::{Disk, Inventory};
use crate::machine::md::SyncProgress;
use crate::machine::zfs_report::{PoolReport, Scan, Vdev, whole_disk_path};
use crate::operation::Kind;
use crate::planner::{ArrayPlan, Member};
use crate::size::Size;
use crate::spec::Level;
use crate::steps::{Action, CareGuard, Cmd, Guard, Step, wipe_step};
use crate::storage::zpool;

/// The survey of the pool `array` from zpool's `report` of it (None when
/// the pool is not imported), with the other disks as `candidates`.
pub(super) fn survey(
    array: &ArrayPlan,
    report: Option<&PoolReport>,
    member_size: Size,
    inventory: &Inventory,
    candidates: Vec<Candidate>,
) -> ArraySurvey {
    let spec = &array.spec;
    let leaves: Vec<&Vdev> = report.map(PoolReport::every_disk).unwrap_or_default();
    let mut members: Vec<MemberReport> = array
        .members
        .iter()
        .map(|m| member_report(&m.disk, inventory, &leaves))
        .collect();
    // A disk zpool lists that the record does not: the new disk of a
    // replace under way, or one added by hand.
    for leaf in &leaves {
        let Some(path) = leaf.path() else { continue };
        if members
            .iter()
            .any(|m| m.partition.as_deref() == Some(leaf.name.as_str()))
        {
            continue;
        }
        let whole = whole_disk_path(path);
        let disk = inventory.disks.iter().find(|d| d.is_named_by(&whole));
        let name = disk.map_or_else(|| path.to_string(), |d| d.name.clone());
        members.push(MemberReport {
            model: disk.and_then(|d| d.model.clone()),
            serial: disk.and_then(|d| d.serial.clone()),
            size: disk.map_or(Size(0), |d| d.size),
            disk: Some(name.clone()),
            was: name,
            partition: Some(leaf.name.clone()),
            state: leaf_state(leaf, true),
        });
    }
    let expected = array.members.iter().filter(|m| !m.spare).count();
    let working = members
        .iter()
        .filter(|m| m.state == MemberState::Working)
        .count()
        .min(expected);
    ArraySurvey {
        name: spec.name.clone(),
        leg_of: None,
        level: spec.level,
        filesystem: spec.filesystem,
        mount: spec.mount.clone(),
        device: spec.name.clone(),
        kernel: report.map(|r| r.state.clone()),
        expected,
        working,
        degraded: report.is_some_and(|r| r.state != "ONLINE") || working < expected,
        sync: report.and_then(|r| match &r.scan {
            Scan::Running {
                what,
                percent,
                paused: false,
                ..
            } => Some(SyncProgress {
                action: what.clone(),
                percent: percent.unwrap_or(0.0),
                minutes_left: None,
            }),
            _ => None,
        }),
        members,
        member_size,
        layout: super::Layout::Partition,
        candidates,
    }
}

/// A recorded disk's state: its leaf in the pool, found by the by-id path
/// zpool was given (a missing disk's row carries it as "was ..."): the one
/// nasforge gave it, or for a pool made elsewhere any of the disk's links.
fn member_report(planned: &Disk, inventory: &Inventory, leaves: &[&Vdev]) -> MemberReport {
    let found = inventory
        .disks
        .iter()
        .find(|d| d.identity().same_disk(&planned.identity()));
    let leaf = leaves.iter().find(|v| {
        v.path().is_some_and(|p| {
            let whole = whole_disk_path(p);
            planned.is_named_by(&whole) || found.is_some_and(|d| d.is_named_by(&whole))
        })
    });
    let state = match leaf {
        Some(leaf) => leaf_state(leaf, found.is_some()),
        None if found.is_none() => MemberState::Missing,
        None => MemberState::NotInArray,
    };
    MemberReport {
        model: planned.model.clone(),
        serial: planned.serial.clone(),
        size: planned.size,
        disk: found.map(|d| d.name.clone()),
        was: planned.name.clone(),
        partition: leaf.map(|v| v.name.clone()),
        state,
    }
}

/// zpool's word for a disk, as the survey's states say it. A disk gone
/// from the machine is missing whatever zpool last saw of it.
fn leaf_state(leaf: &Vdev, attached: bool) -> MemberState {
    let resilvering = leaf
        .note
        .as_deref()
        .is_some_and(|n| n.contains("resilvering"));
    match leaf.state.as_str() {
        _ if !attached => MemberState::Missing,
        "ONLINE" if resilvering => MemberState::Rebuilding,
        "ONLINE" | "INUSE" => MemberState::Working,
        "AVAIL" => MemberState::Spare,
        _ => MemberState::Failed,
    }
}

/// `zpool replace` of `old` (as zpool names it: its path, or its GUID
/// once the disk is gone) by `new`, then the resilver followed to its end.
pub(super) fn replace_steps(array: &ArraySurvey, old: &MemberReport, new: &Disk) -> Vec<Step> {
    let pool = &array.name;
    let old_name = old.partition.clone().unwrap_or_else(|| old.was.clone());
    let path = new.stable_path();
    vec![
        Step {
            id: format!("zpool-replace:{}", new.name),
            title: format!(
                "Replace {} ({}) in the pool '{pool}' with {} ({})",
                old_name,
                old.label(),
                new.name,
                new.summary()
            ),
            guard: Guard::Care(CareGuard::InPool {
                pool: pool.clone(),
                disk: path.clone(),
            }),
            actions: vec![
                Action::Run(Cmd::new(&["udevadm", "settle"])),
                Action::Run(Cmd::new(&["zpool", "replace", pool, &old_name, &path])),
            ],
            always: vec![],
        },
        Step {
            id: format!("follow:{pool}"),
            title: format!("Follow the resilver of '{pool}' until the old disk is detached"),
            guard: Guard::Always,
            actions: vec![Action::FollowResilver { pool: pool.clone() }],
            always: vec![],
        },
    ]
}

/// The plan to add `new` (each with whether it is erased first) to the
/// pool as whole vdevs of the width its vdevs have: a raidz2 of six grows
/// by six disks at a time (or twelve, two vdevs), a mirror by another
/// mirror, a stripe by any number of disks.
pub(super) fn grow(
    journal: &Journal,
    array: &ArraySurvey,
    new: &[(&Disk, bool)],
) -> Result<CarePlan, CareError> {
    let pool = &array.name;
    let Some(planned) = journal.plan.arrays.iter().find(|a| a.spec.name == *pool) else {
        return refuse(format!("the setup journal has no pool '{pool}'"));
    };
    let vdevs = planned.groups();
    let width = match array.level {
        Level::Stripe => 1,
        _ => vdevs.first().map_or(1, Vec::len),
    };
    if !new.len().is_multiple_of(width) {
        return refuse(format!(
            "'{pool}' is {} {} vdev(s) of {width} disks, and ZFS grows a pool by whole vdevs: with the same redundancy in each, add {width} disks (or {}), not {}",
            vdevs.len(),
            array.level,
            2 * width,
            new.len()
        ));
    }
    let groups: Vec<Vec<String>> = new
        .chunks(width)
        .map(|c| c.iter().map(|(d, _)| d.stable_path()).collect())
        .collect();
    let mut steps: Vec<Step> = new
        .iter()
        .filter(|(_, erase)| *erase)
        .map(|(d, _)| wipe_step(d))
        .collect();
    let names: Vec<&str> = new.iter().map(|(d, _)| d.name.as_str()).collect();
    let added = if array.level == Level::Stripe {
        format!("{} more disk(s) striped", new.len())
    } else {
        format!("{} more {} vdev(s)", groups.len(), array.level)
    };
    steps.push(Step {
        id: format!("zpool-add:{pool}:{}", names.join(",")),
        title: format!("Add {} to the pool '{pool}' as {added}", names.join(", ")),
        guard: Guard::Care(CareGuard::InPool {
            pool: pool.clone(),
            disk: groups[0][0].clone(),
        }),
        actions: vec![
            Action::Run(Cmd::new(&["udevadm", "settle"])),
            Action::Run(Cmd::new(&zpool::add(
                pool,
                array.level,
                planned.ashift.unwrap_or(12),
                &groups,
            ))),
        ],
        always: vec![],
    });
    let mut recorded = journal.clone();
    if let Some(plan) = recorded
        .plan
        .arrays
        .iter_mut()
        .find(|a| a.spec.name == *pool)
    {
        // Spares stay last in the record, as setup lists them.
        let at = plan
            .members
            .iter()
            .position(|m| m.spare)
            .unwrap_or(plan.members.len());
        plan.members.splice(
            at..at,
            new.iter().map(|(disk, erase)| Member {
                disk: (*disk).clone(),
                erase: *erase,
                spare: false,
                parity: false,
            }),
        );
        if array.level != Level::Stripe {
            plan.spec.vdevs = Some(vdevs.len() + groups.len());
        }
    }
    steps.push(record_step(&recorded, pool));
    let mut text = format!(
        "ZFS adds {added} beside the pool's {} vdev(s): the space is there at once, new writes spread over every vdev, and what is stored stays where it is (no reshape). A vdev added to a pool with raidz cannot be taken out again.\n",
        vdevs.len()
    );
    text += &super::erase_notes(new);
    text += &numbered(&steps);
    let before = planned.active().count();
    Ok(CarePlan {
        kind: Kind::Grow,
        title: format!(
            "Grow '{pool}' ({}) from {before} to {} disks with {}",
            array.level,
            before + new.len(),
            names.join(", ")
        ),
        text,
        steps,
    })
}
