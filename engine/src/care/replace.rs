//! Replacing a member of an array: the failed member leaves the array (when
//! it is still attached), the new disk is partitioned like its siblings and
//! added, and md rebuilds onto it.

use super::{
    ArraySurvey, CareError, CarePlan, Fit, Layout, MemberReport, MemberState, Survey, conf_step,
    find_disk, follow_step, record_step, refuse,
};
use crate::journal::Journal;
use crate::machine::disks::{Disk, Host, Inventory};
use crate::operation::Kind;
use crate::planner::Member;
use crate::spec::Level;
use crate::steps::{Action, CareGuard, Cmd, Guard, Step, partition_step, wipe_step};
use crate::storage::{mdadm, partition};

/// What `nasforge-setup replace` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaceRequest {
    /// The array; the one degraded array when None.
    pub array: Option<String>,
    /// The new disk; the one blank disk that fits when None.
    pub disk: Option<String>,
    /// Disks that may be erased (`--erase`): one holding data is used only
    /// when named here too.
    pub erase: Vec<String>,
}

/// The plan to replace one member of an array, or why it cannot be done.
pub fn replace(
    host: &Host,
    journal: &Journal,
    survey: &Survey,
    inventory: &Inventory,
    request: &ReplaceRequest,
) -> Result<CarePlan, CareError> {
    let md_needs_one = survey.arrays.iter().any(|a| !a.to_replace().is_empty());
    if let Some(pool) =
        super::pool_replace::wanted(host, journal, request.array.as_deref(), md_needs_one)
    {
        return super::pool_replace::replace(
            host,
            journal,
            pool,
            inventory,
            request.disk.as_deref(),
            &request.erase,
        );
    }
    let array = pick_array(survey, request.array.as_deref())?;
    super::refuse_adopted(journal, array.array_name(), Kind::Replace)?;
    if array.level.is_zfs() && array.kernel.is_none() {
        return refuse(format!(
            "the ZFS pool '{}' is not imported, so zpool cannot replace a disk of it: import it (`sudo zpool import {}`), then run replace again",
            array.name, array.name
        ));
    }
    if matches!(array.level, Level::Single | Level::Raid0) {
        return refuse(format!(
            "'{}' is {}, which keeps no second copy: a lost member cannot be rebuilt. Restore it from a backup onto a new array",
            array.name, array.level
        ));
    }
    if let Some(rebuilding) = array
        .members
        .iter()
        .find(|m| m.state == MemberState::Rebuilding)
    {
        return refuse(format!(
            "'{}' is already rebuilding onto {}: wait for it (`nasforge-setup status`)",
            array.name,
            rebuilding.disk.as_deref().unwrap_or("a new member")
        ));
    }
    let Some(old) = array.to_replace().first().copied() else {
        return refuse(format!(
            "every member of '{}' works, so there is nothing to replace (to add disks, use `nasforge-setup grow`)",
            array.name
        ));
    };
    let (new, erase, picked) = pick_disk(host, inventory, array, request)?;
    let steps = steps(journal, array, old, new, erase);
    let title = format!(
        "Replace the {} member of '{}' ({}) with {} ({})",
        if old.state == MemberState::Failed {
            "failed"
        } else {
            "missing"
        },
        array.name,
        old.label(),
        new.name,
        new.summary()
    );
    let mut text = String::new();
    if picked {
        text += &format!(
            "{} is the only blank disk that fits, so it is used.\n",
            new.name
        );
    }
    text += &super::erase_notes(&[(new, erase)]);
    text += &super::numbered(&steps);
    Ok(CarePlan {
        kind: Kind::Replace,
        title,
        text,
        steps,
    })
}

fn pick_array<'a>(survey: &'a Survey, named: Option<&str>) -> Result<&'a ArraySurvey, CareError> {
    if let Some(name) = named {
        if let Some(array) = survey.arrays.iter().find(|a| a.name == name) {
            return Ok(array);
        }
        // A nested array by its own name: the leg that lacks a member.
        let legs: Vec<&ArraySurvey> = survey
            .arrays
            .iter()
            .filter(|a| a.leg_of.as_deref() == Some(name))
            .collect();
        if legs.is_empty() {
            let names: Vec<&str> = survey.arrays.iter().map(|a| a.name.as_str()).collect();
            return refuse(format!(
                "there is no array '{name}' (the arrays are: {})",
                names.join(", ")
            ));
        }
        let needy: Vec<&ArraySurvey> = legs
            .into_iter()
            .filter(|a| !a.to_replace().is_empty())
            .collect();
        return match needy.as_slice() {
            [one] => Ok(one),
            [] => refuse(format!(
                "every member of the legs of '{name}' works, so there is nothing to replace"
            )),
            many => refuse(format!(
                "several legs of '{name}' lack a member ({}): choose one with --array LEG",
                many.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
    }
    let needy: Vec<&ArraySurvey> = survey
        .arrays
        .iter()
        .filter(|a| !a.to_replace().is_empty())
        .collect();
    match needy.as_slice() {
        [one] => Ok(one),
        [] => refuse("no array lacks a member: every disk works"),
        many => refuse(format!(
            "several arrays lack a member ({}): choose one with --array NAME",
            many.iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The new disk, whether it is erased, and whether it was picked for the
/// user.
pub(super) fn pick_disk<'a>(
    host: &Host,
    inventory: &'a Inventory,
    array: &ArraySurvey,
    request: &ReplaceRequest,
) -> Result<(&'a Disk, bool, bool), CareError> {
    let erase: Vec<String> = request
        .erase
        .iter()
        .map(|e| find_disk(host, inventory, e).map(|d| d.name.clone()))
        .collect::<Result<_, _>>()?;
    let (disk, picked) = match &request.disk {
        Some(named) => (find_disk(host, inventory, named)?, false),
        None => {
            let fitting: Vec<&str> = array.fitting().map(|c| c.disk.as_str()).collect();
            match fitting.as_slice() {
                [one] => (find_disk(host, inventory, one)?, true),
                [] => return refuse(no_disk_fits(array)),
                many => {
                    return refuse(format!(
                        "several blank disks fit '{}' ({}): choose one with --disk DEV",
                        array.name,
                        many.join(", ")
                    ));
                }
            }
        }
    };
    if let Some(other) = erase.iter().find(|e| **e != disk.name) {
        return refuse(format!(
            "--erase {other} names a disk this command does not use (it uses {})",
            disk.name
        ));
    }
    let erased = usable(array, disk, &erase)?;
    Ok((disk, erased, picked))
}

/// Whether `disk` may join `array`, and if so whether it is erased first.
pub(super) fn usable(
    array: &ArraySurvey,
    disk: &Disk,
    erase: &[String],
) -> Result<bool, CareError> {
    let Some(candidate) = array.candidates.iter().find(|c| c.disk == disk.name) else {
        return refuse(format!(
            "{} is a member of an array already (see `nasforge-setup status`)",
            disk.name
        ));
    };
    match &candidate.fit {
        Fit::Fits => Ok(false),
        Fit::HoldsData { .. } if erase.contains(&disk.name) => Ok(true),
        Fit::HoldsData { what } => refuse(format!(
            "{} holds {what}. If that may be lost, name it twice: --disk {0} --erase {0}",
            disk.name
        )),
        Fit::TooSmall { short_by } if array.layout == Layout::WholeDisks => refuse(format!(
            "{} ({}) is too small for '{}': it is {short_by} smaller than its smallest member disk ({}), and a new member joins whole, as they are",
            disk.name, disk.size, array.name, array.member_size
        )),
        Fit::TooSmall { short_by } => refuse(format!(
            "{} ({}) is too small for '{}': its partition would be {short_by} smaller than the members' ({})",
            disk.name, disk.size, array.name, array.member_size
        )),
        Fit::InUse { why } => refuse(format!(
            "{} is in use ({why}) and is never written",
            disk.name
        )),
        Fit::Kept { name } => refuse(format!(
            "{} is the disk the recipe keeps as '{name}', with its files: it never joins an array, even named with --erase. Attach a blank disk, or another disk that may be erased",
            disk.name
        )),
    }
}

fn no_disk_fits(array: &ArraySurvey) -> String {
    let mut text = format!(
        "no attached blank disk fits '{}' (it needs {} or more)",
        array.name, array.member_size
    );
    for c in &array.candidates {
        text += &format!("; {}: {}", c.disk, c.fit);
    }
    text + ". Attach a blank disk, or name one that holds data with --disk DEV --erase DEV"
}

/// md's or zpool's steps, then the record of the new disk.
fn steps(
    journal: &Journal,
    array: &ArraySurvey,
    old: &MemberReport,
    new: &Disk,
    erase: bool,
) -> Vec<Step> {
    let mut steps = if array.level.is_zfs() {
        let mut steps = Vec::new();
        if erase {
            steps.push(wipe_step(new));
        }
        steps.extend(super::zpool::replace_steps(array, old, new));
        steps
    } else {
        md_steps(array, old, new, erase)
    };
    steps.push(record_step(
        &recorded(journal, array, old, new, erase),
        &array.name,
    ));
    steps
}

fn md_steps(array: &ArraySurvey, old: &MemberReport, new: &Disk, erase: bool) -> Vec<Step> {
    let md = format!("/dev/md/{}", array.name);
    let mut steps = Vec::new();
    if let (MemberState::Failed, Some(part)) = (old.state, &old.partition) {
        steps.push(Step {
            id: format!("remove:{}", old.disk.as_deref().unwrap_or(&old.was)),
            title: format!(
                "Fail and remove {} ({}) from '{}'",
                part,
                old.label(),
                array.name
            ),
            guard: Guard::Care(CareGuard::Removed {
                array: md.clone(),
                member: part.clone(),
            }),
            actions: vec![Action::Run(Cmd::new(&mdadm::fail_and_remove(&md, part)))],
            always: vec![],
        });
    }
    steps.extend(join_steps(array, new, erase));
    steps.push(follow_step(&array.name, &md, "rebuild"));
    steps.push(conf_step());
    steps
}

/// The setup journal with `new` in `old`'s place.
fn recorded(
    journal: &Journal,
    array: &ArraySurvey,
    old: &MemberReport,
    new: &Disk,
    erase: bool,
) -> Journal {
    let mut recorded = journal.clone();
    if let Some(plan) = recorded
        .plan
        .arrays
        .iter_mut()
        .find(|a| a.spec.name == array.array_name())
    {
        // An adopted array's new member is a whole disk, as the others.
        if let Some(imported) = &mut plan.imported {
            for (disk, _) in imported.partitions.iter_mut() {
                if *disk == old.was {
                    disk.clone_from(&new.name);
                }
            }
            for device in imported.devices.iter_mut() {
                if *device == old.was {
                    device.clone_from(&new.name);
                }
            }
        }
        let mut member = Member {
            disk: new.clone(),
            erase,
            spare: false,
            parity: false,
        };
        // The new disk takes the old one's place in the record, spare or
        // not, so the record keeps the shape setup gave the array.
        match plan.members.iter().position(|m| {
            (m.disk.model.as_ref(), m.disk.serial.as_ref(), m.disk.size)
                == (old.model.as_ref(), old.serial.as_ref(), old.size)
        }) {
            Some(i) => {
                member.spare = plan.members[i].spare;
                member.parity = plan.members[i].parity;
                plan.members[i] = member;
            }
            None => plan.members.push(member),
        }
    }
    recorded
}

/// Erase (when allowed), partition like the siblings (named for the
/// recipe's array, a leg's too), add to the md array; a disk joining an
/// adopted array of whole disks is added whole.
pub(super) fn join_steps(survey: &ArraySurvey, disk: &Disk, erase: bool) -> Vec<Step> {
    let md = survey.device.clone();
    let array = &survey.name;
    let mut steps = Vec::new();
    if erase {
        steps.push(wipe_step(disk));
    }
    let member = if survey.layout == Layout::WholeDisks {
        disk.stable_path()
    } else {
        let (step, part) = partition_step(
            disk,
            survey.array_name(),
            partition::PartitionKind::LinuxRaid,
        );
        steps.push(step);
        part
    };
    steps.push(Step {
        id: format!("add:{}", disk.name),
        title: format!("Add {} ({}) to '{array}'", disk.name, disk.summary()),
        guard: Guard::Care(CareGuard::Added {
            array: md.clone(),
            member: member.clone(),
        }),
        actions: vec![
            Action::Run(Cmd::new(&["udevadm", "settle"])),
            Action::Run(Cmd::new(&mdadm::add(&md, &member))),
        ],
        always: vec![],
    });
    steps
}
