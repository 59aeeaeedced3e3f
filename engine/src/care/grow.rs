//! Growing an array with more disks: raid1 gets more mirrors, raid5 and
//! raid6 are reshaped onto more members and their filesystem grown after,
//! a ZFS pool gets whole vdevs of its shape (`zpool::grow`).

use super::replace::{join_steps, usable};
use super::survey::{cannot_grow, nested_cannot_grow};
use super::{
    ArraySurvey, CareError, CarePlan, Survey, conf_step, find_disk, follow_step, numbered,
    record_step, refuse,
};
use crate::journal::Journal;
use crate::machine::disks::{Disk, Host, Inventory};
use crate::operation::Kind;
use crate::planner::Member;
use crate::spec::{Filesystem, Level};
use crate::steps::{Action, CareGuard, Cmd, Guard, Step, mount_unit};
use crate::storage::mdadm;

/// What `nasforge-setup grow` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrowRequest {
    pub array: String,
    /// The disks to add, as named on the command line.
    pub disks: Vec<String>,
    /// Disks that may be erased: one holding data is used only when named
    /// here too.
    pub erase: Vec<String>,
}

/// The plan to add `request.disks` to an array, or why it cannot be done.
pub fn grow(
    host: &Host,
    journal: &Journal,
    survey: &Survey,
    inventory: &Inventory,
    request: &GrowRequest,
) -> Result<CarePlan, CareError> {
    let Some(array) = survey.arrays.iter().find(|a| a.name == request.array) else {
        if survey
            .arrays
            .iter()
            .any(|a| a.leg_of.as_deref() == Some(request.array.as_str()))
        {
            return refuse(nested_cannot_grow(&request.array));
        }
        let names: Vec<&str> = survey.arrays.iter().map(|a| a.name.as_str()).collect();
        return refuse(format!(
            "there is no array '{}' (the arrays are: {})",
            request.array,
            names.join(", ")
        ));
    };
    super::refuse_adopted(journal, &array.name, Kind::Grow)?;
    check_growable(array)?;
    if request.disks.is_empty() {
        return refuse("name the disks to add with --disk DEV (once per disk)");
    }
    let mut new: Vec<(&Disk, bool)> = Vec::new();
    for named in &request.disks {
        let disk = find_disk(host, inventory, named)?;
        if new.iter().any(|(d, _)| d.name == disk.name) {
            return refuse(format!("{} is named twice", disk.name));
        }
        let erase = resolved(host, inventory, &request.erase)?;
        new.push((disk, usable(array, disk, &erase)?));
    }
    if let Some(stray) = resolved(host, inventory, &request.erase)?
        .into_iter()
        .find(|e| !new.iter().any(|(d, _)| d.name == *e))
    {
        return refuse(format!(
            "--erase {stray} names a disk this command does not add"
        ));
    }
    if array.level.is_zfs() {
        return super::zpool::grow(journal, array, &new);
    }
    let count = array.expected + new.len();
    let steps = steps(journal, array, &new, count);
    let names: Vec<&str> = new.iter().map(|(d, _)| d.name.as_str()).collect();
    let title = format!(
        "Grow '{}' ({}) from {} to {count} disks with {}",
        array.name,
        array.level,
        array.expected,
        names.join(", ")
    );
    let mut text = String::new();
    if array.level == Level::Raid1 {
        text += "A raid1 keeps one copy per disk: the new disks become more mirrors, the capacity stays the same.\n";
    } else {
        text += "md reshapes the array onto the new disks (the data stays readable meanwhile, a power cut resumes it), then the filesystem is grown.\n";
    }
    text += &super::erase_notes(&new);
    text += &numbered(&steps);
    Ok(CarePlan {
        kind: Kind::Grow,
        title,
        text,
        steps,
    })
}

fn resolved(
    host: &Host,
    inventory: &Inventory,
    names: &[String],
) -> Result<Vec<String>, CareError> {
    names
        .iter()
        .map(|e| find_disk(host, inventory, e).map(|d| d.name.clone()))
        .collect()
}

/// Levels that cannot grow, and arrays that must first be whole and quiet.
fn check_growable(array: &ArraySurvey) -> Result<(), CareError> {
    if let Some(of) = &array.leg_of {
        return refuse(format!(
            "'{}' is a leg of '{of}': {}",
            array.name,
            nested_cannot_grow(of)
        ));
    }
    let why = cannot_grow(array.level);
    if let Some(why) = why {
        return refuse(format!("'{}' is {}: {why}", array.name, array.level));
    }
    if array.kernel.is_none() && array.level.is_zfs() {
        return refuse(format!(
            "the ZFS pool '{}' is not imported, so zpool cannot add to it: import it (`sudo zpool import {0}`), then run grow again",
            array.name
        ));
    }
    if array.kernel.is_none() {
        return refuse(format!(
            "'{}' is not assembled (see `cat /proc/mdstat`)",
            array.name
        ));
    }
    if array.degraded {
        return refuse(format!(
            "'{}' is degraded ({} of {} disks working): replace the missing member first (`nasforge-setup replace`)",
            array.name, array.working, array.expected
        ));
    }
    if let Some(sync) = &array.sync {
        return refuse(format!(
            "'{}' is busy, {sync}: wait for it to finish",
            array.name
        ));
    }
    Ok(())
}

fn steps(journal: &Journal, array: &ArraySurvey, new: &[(&Disk, bool)], count: usize) -> Vec<Step> {
    let md = format!("/dev/md/{}", array.name);
    let mut steps: Vec<Step> = new
        .iter()
        .flat_map(|(disk, erase)| join_steps(array, disk, *erase))
        .collect();
    steps.push(Step {
        id: format!("grow:{}", array.name),
        title: format!("Make '{}' an array of {count} disks", array.name),
        guard: Guard::Care(CareGuard::RaidDevices {
            array: md.clone(),
            count,
        }),
        actions: vec![Action::Run(Cmd::new(&mdadm::grow_raid_devices(&md, count)))],
        always: vec![],
    });
    let what = if array.level == Level::Raid1 {
        "rebuild"
    } else {
        "reshape"
    };
    steps.push(follow_step(&array.name, &md, what));
    if array.level != Level::Raid1 {
        steps.push(grow_filesystem_step(array, &md));
    }
    steps.push(conf_step());
    let mut recorded = journal.clone();
    if let Some(plan) = recorded
        .plan
        .arrays
        .iter_mut()
        .find(|a| a.spec.name == array.name)
    {
        plan.members.extend(new.iter().map(|(disk, erase)| Member {
            disk: (*disk).clone(),
            erase: *erase,
            spare: false,
            parity: false,
        }));
    }
    steps.push(record_step(&recorded, &array.name));
    steps
}

/// The filesystem takes the array's new size, mounted; each tool grows to
/// the device's size and does nothing when it already fills it. After a
/// power cut the resume runs at boot while systemd may still be checking
/// the filesystem or waiting for an array mdadm's last-resort timer starts
/// late, and resize2fs refuses an unmounted ext4 not checked since (seen
/// on the emulated board): starting the mount unit waits for that mount.
fn grow_filesystem_step(array: &ArraySurvey, md: &str) -> Step {
    let argv: Vec<&str> = match array.filesystem {
        Filesystem::Ext4 => vec!["resize2fs", md],
        Filesystem::Xfs => vec!["xfs_growfs", &array.mount],
        Filesystem::Btrfs => vec!["btrfs", "filesystem", "resize", "max", &array.mount],
        Filesystem::Zfs => unreachable!("a pool grows by zpool::grow"),
    };
    Step {
        id: format!("grow-filesystem:{}", array.name),
        title: format!(
            "Grow the {} filesystem of '{}' to the array's new size",
            array.filesystem, array.name
        ),
        guard: Guard::Always,
        actions: vec![
            Action::Run(Cmd::new(&["systemctl", "start", &mount_unit(&array.mount)])),
            Action::Run(Cmd::new(&argv)),
        ],
        always: vec![],
    }
}
