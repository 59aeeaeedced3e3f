//! The plan as ordered steps. Each step is data: the actions it performs
//! (commands, file writes, a GPT) and a guard that looks at the system just
//! before it runs, so a step that already happened is skipped and a disk
//! that changed since planning is refused rather than overwritten.
//!
//! The steps of the arrays (`storage`, and `zfs` for ZFS pools) come
//! before those of the shares (`shares`); `guard` holds the checks that run
//! before each step.

mod action;
pub mod alerts;
mod guard;
mod import;
mod mirror;
mod pool;
mod shares;
mod spindown;
mod storage;
pub mod usb;
mod zfs;

pub use action::{
    Action, Cmd, adopt_import, enable_argv, needs_no_enabling, reboot_cmd, shell_quote, start_argv,
};
pub use guard::{CareGuard, Check, Guard, PoolMember};
pub(crate) use storage::mount_by_systemd;
pub use storage::{filesystem_device, mkfs, mount_unit};
pub(crate) use storage::{partition_step, wipe_step};

use crate::planner::{ArrayPlan, Plan};
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
    /// The mirrored system's new root filesystem (`plan.system_mirror`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_uuid: Option<String>,
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
            system_uuid: plan
                .system_mirror
                .as_ref()
                .map(|_| uuid::Uuid::new_v4().to_string()),
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

/// See [`Action::EnableUnits`].
pub(crate) fn enable<S: AsRef<str>>(units: &[S], now: bool) -> Action {
    Action::EnableUnits {
        units: units.iter().map(|u| u.as_ref().to_string()).collect(),
        now,
    }
}

/// An md array (mdadm.conf, the initramfs, mdmonitor): not `single`, not
/// a ZFS pool or a pool of disks.
fn is_md(array: &ArrayPlan) -> bool {
    !matches!(array.spec.level, Level::Single | Level::Pool) && !array.spec.is_zfs()
}

fn is_pool(array: &ArrayPlan) -> bool {
    array.spec.level == Level::Pool
}

fn pool_fstab_lines(plan: &Plan, ctx: &Context) -> Vec<String> {
    plan.arrays
        .iter()
        .zip(&ctx.fs_uuids)
        .filter(|(a, _)| is_pool(a))
        .flat_map(|(a, uuid)| pool::fstab_lines(a, uuid))
        .collect()
}

/// The arrays at `indices` built: each md array's or single disk's
/// steps, and the ZFS module, the pools, and their import at boot.
fn build_steps(plan: &Plan, ctx: &Context, indices: &[usize], steps: &mut Vec<Step>) {
    if indices.iter().any(|&i| plan.arrays[i].spec.is_zfs()) {
        steps.push(zfs::module_step());
        steps.push(zfs::hold_kernel_step());
    }
    for &i in indices {
        let array = &plan.arrays[i];
        if array.imported.is_some() {
            continue;
        } else if array.spec.is_zfs() {
            zfs::pool_steps(array, steps);
        } else if is_pool(array) {
            pool::disk_steps(array, &ctx.fs_uuids[i], steps);
        } else {
            storage::array_steps(array, &ctx.fs_uuids[i], &ctx.hostname, steps);
        }
    }
    if indices.iter().any(|&i| plan.arrays[i].spec.is_zfs()) {
        steps.push(zfs::boot_step());
    }
}

/// The mount steps of an md array, single disk, ZFS pool or pool of
/// disks.
fn mount_steps(array: &ArrayPlan, uuid: &str, steps: &mut Vec<Step>) {
    if array.spec.is_zfs() {
        steps.push(zfs::mount_step(array));
    } else if is_pool(array) {
        pool::mount_steps(array, uuid, steps);
    } else {
        steps.push(storage::mount_step(array));
    }
}

/// Whether fstab lists anything: a filesystem not on a ZFS pool (pools
/// mount themselves).
fn needs_fstab(plan: &Plan) -> bool {
    plan.arrays.iter().any(|a| !a.spec.is_zfs()) || !plan.kept.is_empty()
}

pub fn generate(plan: &Plan, ctx: &Context) -> Vec<Step> {
    let mut steps = Vec::new();
    // Adopted arrays first of all: one that is not what the recipe says
    // stops setup before anything is written anywhere.
    for array in plan.arrays.iter().filter(|a| a.imported.is_some()) {
        import::adopt_step(array, &mut steps);
    }
    // Then: what the steps below write to the system (mdadm.conf, fstab,
    // smb.conf) goes to the mirrored root, not to the one left behind.
    if let (Some(mirror), Some(uuid)) = (&plan.system_mirror, &ctx.system_uuid) {
        mirror::steps(mirror, uuid, &ctx.hostname, &plan.alert, &mut steps);
    }
    let all: Vec<usize> = (0..plan.arrays.len()).collect();
    build_steps(plan, ctx, &all, &mut steps);
    // The mirror's own steps wrote mdadm.conf and the initramfs for it:
    // rebuilt again only for arrays of the data (minutes on a slow board).
    let md = plan.arrays.iter().any(is_md);
    if md {
        steps.extend(storage::mdadm_conf_steps(plan, &ctx.hostname));
    }
    if needs_fstab(plan) {
        steps.push(storage::fstab_step(plan, ctx, pool_fstab_lines(plan, ctx)));
    }
    // A pool joins kept disks: they are mounted before it.
    for (array, uuid) in plan.arrays.iter().zip(&ctx.fs_uuids) {
        if !is_pool(array) {
            mount_steps(array, uuid, &mut steps);
        }
    }
    for kept in &plan.kept {
        steps.push(storage::kept_mount_step(kept));
    }
    for (array, uuid) in plan.arrays.iter().zip(&ctx.fs_uuids) {
        if is_pool(array) {
            mount_steps(array, uuid, &mut steps);
        }
    }
    shares::share_steps(plan, &mut steps);
    if md || plan.system_mirror.is_some() {
        steps.push(storage::monitoring_step());
    }
    if plan.arrays.iter().any(|a| a.spec.is_zfs()) {
        steps.push(zfs::monitoring_step(plan));
    }
    if !plan.arrays.is_empty() {
        steps.push(alerts::smartd_step(crate::spec::DEFAULT_TEMPERATURE));
    }
    steps.extend(spindown::spin_down_step(plan));
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
    // Adopted first, as at setup: one that is not what the recipe says
    // stops the run before anything else is written.
    for &i in added.iter().filter(|&&i| plan.arrays[i].imported.is_some()) {
        import::adopt_step(&plan.arrays[i], &mut steps);
    }
    build_steps(plan, ctx, added, &mut steps);
    let md = added.iter().any(|&i| is_md(&plan.arrays[i]));
    if md {
        steps.extend(storage::mdadm_conf_steps(plan, &ctx.hostname));
    }
    if added.iter().any(|&i| !plan.arrays[i].spec.is_zfs()) {
        steps.push(storage::fstab_step(plan, ctx, pool_fstab_lines(plan, ctx)));
    }
    for &i in added {
        mount_steps(&plan.arrays[i], &ctx.fs_uuids[i], &mut steps);
    }
    if md {
        steps.push(storage::monitoring_step());
    }
    if added.iter().any(|&i| plan.arrays[i].spec.is_zfs()) {
        steps.push(zfs::monitoring_step(plan));
    }
    steps
}
