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
    steps.push(care_step(name));
    let unit_name = unit_name(name);
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
                path: format!("/etc/systemd/system/{unit_name}"),
                contents: unit(array, &branches),
                mode: 0o644,
            },
            run(&["systemctl", "daemon-reload"]),
            enable(&[unit_name.as_str()], true),
        ],
        always: vec![],
    });
}

/// The nightly sync and the weekly scrub, at night and apart, so that
/// they never wait on each other's lock; a board that was off runs a
/// missed one at boot (`Persistent`).
const CARE: [(&str, &str, &str); 2] = [
    (
        "sync",
        "bring the pool's parity up to date (snapraid sync)",
        "*-*-* 03:00",
    ),
    (
        "scrub",
        "check a part of the pool against its parity (snapraid scrub)",
        "Sun *-*-* 05:00",
    ),
];

fn care_step(pool: &str) -> Step {
    let mut actions = Vec::new();
    let mut timers = Vec::new();
    for (what, description, calendar) in CARE {
        let unit = format!("nasforge-pool-{what}");
        actions.push(Action::WriteFile {
            path: format!("/etc/systemd/system/{unit}.service"),
            contents: format!(
                "# Written by nasforge-setup.\n[Unit]\nDescription=nasforge: {description}\nAfter={}\n\n[Service]\nType=oneshot\nExecStart={} pool {what}\nNice=10\nIOSchedulingClass=idle\n",
                unit_name(pool),
                pool::SETUP_BIN
            ),
            mode: 0o644,
        });
        actions.push(Action::WriteFile {
            path: format!("/etc/systemd/system/{unit}.timer"),
            contents: format!(
                "# Written by nasforge-setup.\n[Unit]\nDescription=nasforge: {description}\n\n[Timer]\nOnCalendar={calendar}\nRandomizedDelaySec=30min\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"
            ),
            mode: 0o644,
        });
        timers.push(format!("{unit}.timer"));
    }
    actions.push(run(&["systemctl", "daemon-reload"]));
    actions.push(enable(&timers, true));
    Step {
        id: format!("pool-care:{pool}"),
        title: format!("Sync '{pool}''s parity nightly and scrub it weekly (systemd timers)"),
        guard: Guard::Always,
        actions,
        always: vec![],
    }
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

/// The systemd service that mounts the pool: `nasforge-setup pool mount`
/// joins the branches that are mounted (a lost disk's empty mount point
/// on the system disk must never take files) and runs mergerfs, which
/// forks once the mount is there, so Samba and NFS start after it.
pub fn unit_name(pool: &str) -> String {
    format!("nasforge-pool-{pool}.service")
}

pub fn unit(array: &ArrayPlan, branches: &[Branch]) -> String {
    let data: Vec<&Branch> = branches.iter().filter(|b| b.parity.is_none()).collect();
    let mounts: Vec<String> = data.iter().map(|b| super::mount_unit(&b.mount)).collect();
    let paths: Vec<&str> = data.iter().map(|b| b.mount.as_str()).collect();
    format!(
        "# Written by nasforge-setup.\n[Unit]\nDescription=nasforge pool '{name}': mergerfs over its disks at {mount}\n# Wanted, not required: a lost disk's mount fails and the pool\n# serves the other disks' files.\nWants={units}\nAfter={units}\nBefore=smbd.service nfs-server.service\n\n[Service]\nType=forking\nExecStart={bin} pool mount --options {opts} {mount} {paths}\nExecStop=/bin/umount {mount}\n\n[Install]\nWantedBy=multi-user.target\n",
        name = array.spec.name,
        mount = array.spec.mount,
        units = mounts.join(" "),
        bin = pool::SETUP_BIN,
        opts = pool::mergerfs_options(array),
        paths = paths.join(" "),
    )
}
