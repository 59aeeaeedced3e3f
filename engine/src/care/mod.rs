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
    ArraySurvey, Candidate, Fit, MemberReport, MemberState, Survey, partition_bytes, survey_of,
};
pub use survey::{cannot_grow, nested_cannot_grow};

use crate::journal::{self, Journal, JournalError};
use crate::machine::disks::{self, DiscoveryError, Disk, Host, Inventory};
use crate::machine::md::MdState;
use crate::machine::zfs;
use crate::machine::zfs_report::parse_zpool_status;
use crate::operation::{Kind, Operation};
use crate::steps::{Action, Step};

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

/// An adopted array's members are whole disks or any partition, which the
/// replace and grow steps (one nasforge partition per disk) do not make.
fn refuse_adopted(journal: &Journal, name: &str) -> Result<(), CareError> {
    let Some(array) = journal.plan.arrays.iter().find(|a| a.spec.name == name) else {
        return Ok(());
    };
    match &array.imported {
        Some(i) if array.spec.is_zfs() => refuse(format!(
            "'{name}' was adopted as another machine made it (pool id {}); replace and grow of an adopted pool are not built yet: use zpool on it itself (zpool-replace(8), zpool-attach(8))",
            i.uuid
        )),
        Some(i) => refuse(format!(
            "'{name}' was adopted as another machine made it (UUID {}); replace and grow of an adopted array are not built yet: use mdadm on /dev/md/{name} itself (mdadm(8), --add and --grow)",
            i.uuid
        )),
        None => Ok(()),
    }
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
