//! Care after setup: replacing a disk of an array and growing an array
//! with more disks. `survey` compares what the setup journal recorded with
//! what is attached and what md (or zpool, for a ZFS pool) reports; `replace` and `grow` turn a
//! request into an [`Operation`](crate::operation::Operation) of guarded
//! steps, which `operation::start` runs and `operation::resume` finishes
//! after a power cut. The last step of each records the new members in the
//! setup journal, so the next survey names them.

mod grow;
pub mod parity;
mod pool_replace;
mod replace;
mod survey;
mod zpool;

pub use grow::{GrowRequest, grow};
pub use replace::{ReplaceRequest, replace};
pub use survey::{
    ArraySurvey, Candidate, Fit, Layout, MemberReport, MemberState, Survey, partition_bytes,
    survey_of,
};
pub use survey::{cannot_grow, nested_cannot_grow};

use crate::journal::{self, Journal, JournalError};
use crate::machine::disks::{self, DiscoveryError, Disk, Host, Inventory};
use crate::machine::md::MdState;
use crate::machine::zfs;
use crate::machine::zfs_report::parse_zpool_status;
use crate::operation::{Kind, Operation};
use crate::steps::{Action, Step};
use crate::storage::partition;

/// What the arrays look like now (see [`Survey`]).
pub fn survey(host: &Host, journal: &Journal) -> Result<Survey, CareError> {
    let inventory = disks::discover(host)?;
    Ok(survey_of(
        &journal.plan,
        &inventory,
        &|device| MdState::read(host, device),
        &|pool| {
            zfs::read(host, "zpool", &["status", "-P", "-p", pool])
                .ok()
                .flatten()
                .and_then(|text| parse_zpool_status(&text))
        },
    ))
}

#[derive(Debug, thiserror::Error)]
pub enum CareError {
    #[error(transparent)]
    NotSetUp(#[from] journal::Unfinished),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The request cannot be done as asked; nothing was changed.
    #[error("{0}; nothing was changed")]
    Refused(String),
}

fn refuse<T>(why: impl Into<String>) -> Result<T, CareError> {
    Err(CareError::Refused(why.into()))
}

/// What nasforge does not do to an adopted array or pool: growth is left
/// to zpool and mdadm; a lost disk of a pool is replaced as in nasforge's
/// own (zpool partitions the new one), and a lost member of an md array of
/// whole disks by a whole disk, as the others are, but one on another
/// system's partitions (a Synology's `sdX5`) is not, since nasforge does
/// not copy that layout.
fn refuse_adopted(journal: &Journal, name: &str, kind: Kind) -> Result<(), CareError> {
    let Some(array) = journal.plan.arrays.iter().find(|a| a.spec.name == name) else {
        return Ok(());
    };
    let Some(i) = &array.imported else {
        return Ok(());
    };
    if array.spec.is_zfs() {
        if kind == Kind::Replace {
            return Ok(());
        }
        return refuse(format!(
            "'{name}' was adopted as another machine made it (pool id {}); nasforge replaces a lost disk of it, but leaves growing it to zpool: add a vdev of the pool's shape (zpool-add(8)), or widen a mirror (zpool-attach(8))",
            i.uuid
        ));
    }
    if kind == Kind::Grow {
        return refuse(format!(
            "'{name}' was adopted as another machine made it (UUID {}); nasforge replaces a lost member of it but does not reshape it: grow it with mdadm itself (mdadm(8): --add, then --grow --raid-devices), then the filesystem",
            i.uuid
        ));
    }
    let on_partitions: Vec<String> = i
        .partitions
        .iter()
        .filter_map(|(disk, n)| n.map(|n| partition::partition_path(disk, n)))
        .collect();
    if on_partitions.is_empty() {
        return Ok(());
    }
    refuse(format!(
        "'{name}' was adopted as another machine made it (UUID {}), on partitions that machine made ({}); nasforge does not copy that layout onto a new disk. Give the new disk a partition at least as large as a member's (`sfdisk -l` on a member's disk shows them), then add it: `sudo mdadm /dev/md/{name} --add /dev/<partition>`",
        i.uuid,
        on_partitions.join(", ")
    ))
}

/// The review's line for each disk that is erased first.
fn erase_notes(new: &[(&Disk, bool)]) -> String {
    new.iter()
        .filter(|(_, erase)| *erase)
        .map(|(d, _)| {
            format!(
                "{} holds {}: it is ERASED (you named it with --erase).\n",
                d.name,
                d.describe_contents()
            )
        })
        .collect()
}

/// A replace or grow as it is shown before anything runs, and its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct CarePlan {
    pub kind: Kind,
    /// One line: "Replace the missing member of 'data' (WDC … (WD-3)) with sdd".
    pub title: String,
    /// What will happen, in words, for the review.
    pub text: String,
    pub steps: Vec<Step>,
}

impl CarePlan {
    pub fn into_operation(self) -> Operation {
        let text = format!("{}\n{}", self.title, self.text);
        Operation::new(self.kind, self.title, text, self.steps)
    }
}

/// A disk named on the command line as [`disks::is_named`] reads it, or by
/// another link to its device node.
pub fn find_disk<'a>(
    host: &Host,
    inventory: &'a Inventory,
    named: &str,
) -> Result<&'a disks::Disk, CareError> {
    if let Some(disk) = inventory.disks.iter().find(|d| d.is_named(named)) {
        return Ok(disk);
    }
    let path = if named.starts_with('/') {
        named.to_string()
    } else {
        format!("/dev/{named}")
    };
    let kernel = disks::kernel_name(host, &path)
        .unwrap_or_else(|| path.trim_start_matches("/dev/").to_string());
    inventory
        .disks
        .iter()
        .find(|d| d.name == kernel)
        .map_or_else(
            || {
                let names: Vec<&str> = inventory.disks.iter().map(|d| d.name.as_str()).collect();
                refuse(format!(
                    "no disk `{named}` is attached (the disks are: {}); name one as sdd, /dev/sdd, /dev/disk/by-id/... or its serial",
                    names.join(", ")
                ))
            },
            Ok,
        )
}

/// The last step of a replace or grow: the setup journal with the array's
/// new members, so surveys and status name them from now on.
fn record_step(journal: &Journal, array: &str) -> Step {
    let text = serde_json::to_string_pretty(journal).expect("a journal is plain data");
    Step {
        id: format!("record-members:{array}"),
        title: format!("Record the new members of '{array}' in {}", journal::PATH),
        guard: crate::steps::Guard::Always,
        actions: vec![Action::WriteFile {
            path: journal::PATH.into(),
            contents: text,
            mode: 0o600,
        }],
        always: vec![],
    }
}

/// mdadm.conf's ARRAY lines follow the array; the initramfs only when they
/// changed.
fn conf_step() -> Step {
    Step {
        id: "mdadm-conf".into(),
        title: format!(
            "Update {} and the initramfs if the arrays' lines changed",
            crate::storage::mdadm::CONF
        ),
        guard: crate::steps::Guard::Always,
        actions: vec![Action::RefreshMdadmConf],
        always: vec![],
    }
}

/// Waits for md's rebuild or reshape, printing its progress.
fn follow_step(array: &str, device: &str, what: &str) -> Step {
    Step {
        id: format!("follow:{array}"),
        title: format!("Follow the {what} of '{array}' until it is done"),
        guard: crate::steps::Guard::Always,
        actions: vec![Action::FollowSync {
            device: device.to_string(),
        }],
        always: vec![],
    }
}

/// The steps as a numbered list, for the review.
fn numbered(steps: &[Step]) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  {}. {}\n", i + 1, s.title))
        .collect()
}
