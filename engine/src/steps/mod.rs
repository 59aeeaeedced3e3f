//! The plan as ordered steps. Each step is data: the actions it performs
//! (commands, file writes, a GPT) and a guard that looks at the system just
//! before it runs, so a step that already happened is skipped and a disk
//! that changed since planning is refused rather than overwritten.
//!
//! The steps of the arrays (`storage`) come before those of the shares
//! (`shares`); `guard` holds the checks that run before each step.

mod action;
mod care;
mod guard;
mod shares;
mod storage;
pub mod usb;

pub use action::{Action, Cmd, reboot_cmd, shell_quote};
pub use guard::{Check, Guard};
pub use storage::{filesystem_device, mkfs, mount_unit};
pub(crate) use storage::{partition_step, wipe_step};

use crate::planner::Plan;
use crate::spec::Level;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Stable key such as `partition:sda`, shown in logs and the journal.
    pub id: String,
    pub title: String,
    pub guard: Guard,
    pub actions: Vec<Action>,
    /// Run after `actions` whether they succeeded or not (the udev exec
    /// queue must be restarted even when `mdadm --create` fails).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<Action>,
}

/// Inputs the steps need beyond the plan: decided at the edge (hostname
/// read from /etc/hostname, random UUIDs) so generation stays pure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    pub hostname: String,
    /// Filesystem UUID for each array, in plan order.
    pub fs_uuids: Vec<String>,
}

impl Step {
    /// The step ends with a reboot: the executor stops after it, and after
    /// the reboot its guard must find its work in effect.
    pub fn reboots(&self) -> bool {
        matches!(self.actions.last(), Some(Action::Reboot))
    }
}

impl Context {
    pub fn random(hostname: &str, plan: &Plan) -> Context {
        Context {
            hostname: hostname.to_string(),
            fs_uuids: plan
                .arrays
                .iter()
                .map(|_| uuid::Uuid::new_v4().to_string())
                .collect(),
        }
    }
}

fn run(argv: &[&str]) -> Action {
    Action::Run(Cmd::new(argv))
}

pub fn generate(plan: &Plan, ctx: &Context) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, array) in plan.arrays.iter().enumerate() {
        storage::array_steps(array, &ctx.fs_uuids[i], &ctx.hostname, &mut steps);
    }
    let md = plan.arrays.iter().any(|a| a.spec.level != Level::Single);
    if md {
        steps.extend(storage::mdadm_conf_steps(plan, &ctx.hostname));
    }
    if !plan.arrays.is_empty() || !plan.kept.is_empty() {
        steps.push(storage::fstab_step(plan, ctx));
    }
    for array in &plan.arrays {
        steps.push(storage::mount_step(array));
    }
    for kept in &plan.kept {
        steps.push(storage::kept_mount_step(kept));
    }
    shares::share_steps(plan, &mut steps);
    if md {
        steps.push(storage::monitoring_step());
    }
    if !plan.arrays.is_empty() {
        steps.push(crate::alerts::smartd_step(crate::spec::DEFAULT_TEMPERATURE));
    }
    steps.extend(care::spin_down_step(plan));
    steps
}

/// The share steps alone: after setup (`apply`) they are regenerated whole
/// from the plan with the new share list, as every one rewrites its files.
pub fn share_steps(plan: &Plan) -> Vec<Step> {
    let mut steps = Vec::new();
    shares::share_steps(plan, &mut steps);
    steps
}

/// The steps that build the arrays at `added` (indices into `plan.arrays`)
/// on a NAS whose other arrays are set up: their disks, then mdadm.conf and
/// fstab for every array of `plan` (both files are rewritten whole), then
/// their mounts.
pub fn added_array_steps(plan: &Plan, ctx: &Context, added: &[usize]) -> Vec<Step> {
    let mut steps = Vec::new();
    for &i in added {
        storage::array_steps(&plan.arrays[i], &ctx.fs_uuids[i], &ctx.hostname, &mut steps);
    }
    let md = added
        .iter()
        .any(|&i| plan.arrays[i].spec.level != Level::Single);
    if md {
        steps.extend(storage::mdadm_conf_steps(plan, &ctx.hostname));
    }
    if !added.is_empty() {
        steps.push(storage::fstab_step(plan, ctx));
    }
    for &i in added {
        steps.push(storage::mount_step(&plan.arrays[i]));
    }
    if md {
        steps.push(storage::monitoring_step());
    }
    steps
}
