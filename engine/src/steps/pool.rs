//! The steps of a pool: each blank disk partitioned and formatted as a
//! filesystem of its own, mounted under /mnt/<pool> (by fstab, with the
//! arrays'), then SnapRAID's configuration and the service that joins the
//! data disks with mergerfs at the pool's mount.

use super::storage::mount_by_systemd;
use super::{Action, Cmd, Guard, Step, enable, partition_step, run};
use crate::planner::ArrayPlan;
use crate::storage::partition::PartitionKind;
use crate::storage::pool::{self, Branch};

/// Partition and format the disks nasforge takes (never a kept disk).
pub(super) fn disk_steps(array: &ArrayPlan, pool_uuid: &str, steps: &mut Vec<Step>) {
    let name = &array.spec.name;
    let branches = pool::branches(array, pool_uuid);
    for b in branches.iter().filter(|b| !b.kept) {
        let Some(member) = array.members.iter().find(|m| m.disk.name == b.disk) else {
            continue;
        };
        let (step, _) = partition_step(&member.disk, name, PartitionKind::LinuxFilesystem);
        steps.push(step);
        let label = format!("{name}-{}", b.name);
        let role = match b.parity {
            Some(_) => "parity",
            None => "data",
        };
        steps.push(Step {
            id: format!("mkfs:{name}-{}", b.name),
            title: format!(
                "Make the {} filesystem of '{name}' {role} disk {} on {}",
                array.spec.filesystem, b.name, b.disk
            ),
            guard: Guard::Filesystem {
                device: b.device.clone(),
                uuid: b.uuid.clone(),
            },
            actions: vec![Action::Run(Cmd::new(&pool::mkfs(
                array.spec.filesystem,
                b,
                &label,
            )))],
            always: vec![],
        });
    }
}

/// fstab's lines for the pool's own disks (kept disks have theirs).
pub(super) fn fstab_lines(array: &ArrayPlan, pool_uuid: &str) -> Vec<String> {
    pool::branches(array, pool_uuid)
        .iter()
        .filter(|b| !b.kept)
        .map(|b| crate::storage::fstab::line(&b.uuid, &b.mount, array.spec.filesystem))
        .collect()
}

/// Each disk mounted, SnapRAID's configuration written, and the pool
/// mounted by its service, enabled for every boot.
pub(super) fn mount_steps(array: &ArrayPlan, pool_uuid: &str, steps: &mut Vec<Step>) {
    let name = &array.spec.name;
    let branches = pool::branches(array, pool_uuid);
    for b in branches.iter().filter(|b| !b.kept) {
        steps.push(mount_by_systemd(
            &format!("{name}-{}", b.name),
            format!("Mount '{name}' disk {} ({}) at {}", b.name, b.disk, b.mount),
            &b.mount,
            &b.device,
        ));
    }
    steps.push(snapraid_step(array, &branches));
    let unit = pool::unit_name(name);
    steps.push(Step {
        id: format!("mount:{name}"),
        title: format!(
            "Join the data disks of '{name}' with mergerfs at {}",
            array.spec.mount
        ),
        guard: Guard::Mounted {
            mount: array.spec.mount.clone(),
        },
        actions: vec![
            run(&["mkdir", "-p", &array.spec.mount]),
            Action::WriteFile {
                path: format!("/etc/systemd/system/{unit}"),
                contents: pool::unit(array, &branches),
                mode: 0o644,
            },
            run(&["systemctl", "daemon-reload"]),
            enable(&[unit.as_str()], true),
        ],
        always: vec![],
    });
}

fn snapraid_step(array: &ArrayPlan, branches: &[Branch]) -> Step {
    Step {
        id: format!("snapraid-conf:{}", array.spec.name),
        title: format!(
            "Write {} for '{}' (parity, content files, data disks)",
            pool::SNAPRAID_CONF,
            array.spec.name
        ),
        guard: Guard::Always,
        actions: vec![
            run(&["mkdir", "-p", "/var/lib/snapraid"]),
            Action::WriteFile {
                path: pool::SNAPRAID_CONF.into(),
                contents: pool::snapraid_conf(array, branches),
                mode: 0o644,
            },
        ],
        always: vec![],
    }
}
