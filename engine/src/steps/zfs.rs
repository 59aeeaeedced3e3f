//! The steps of a ZFS pool, instead of md's partition, mdadm, mkfs,
//! mdadm.conf and fstab: erase what the recipe allowed erasing, load the
//! module, `zpool create` over whole disks, import and mount it at every
//! boot, one dataset per share, and ZED and a monthly scrub to watch it.

use super::guard::PoolMember;
use super::{Action, Guard, Step, enable, run, wipe_step};
use crate::paths::{KERNEL_GUARD, ZEDLET};
use crate::planner::{ArrayPlan, Plan};
use crate::storage::zpool;

/// The pool's disks erased (when the recipe allowed it) and the pool made.
pub(super) fn pool_steps(array: &ArrayPlan, steps: &mut Vec<Step>) {
    for member in array.members.iter().filter(|m| m.erase) {
        steps.push(wipe_step(&member.disk));
    }
    steps.push(create_step(array));
}

/// zpool loads the module itself when /dev/zfs is missing, but an explicit
/// modprobe fails with the kernel's own reason (a module built for another
/// kernel) before anything is written.
pub(super) fn module_step() -> Step {
    Step {
        id: "zfs-module".into(),
        title: "Load the ZFS kernel module".into(),
        guard: Guard::Always,
        actions: vec![run(&["modprobe", "zfs"])],
        always: vec![],
    }
}

/// ZFS's modules come from a package built for the kernel the board
/// boots (nasforge-zfs-modules-<release>): the kernel's packages are held
/// before a pool exists, so no upgrade boots a kernel without them and
/// leaves the pool unimported. Status and the hourly check say when an
/// update waits behind the hold.
///
/// A hold stops apt from choosing a newer kernel, not anyone from
/// installing one (`apt-mark unhold`, `dpkg -i`): the guard that Debian's
/// kernel packages run before they unpack refuses a kernel whose ZFS
/// modules are not installed.
pub(super) fn hold_kernel_step() -> Step {
    Step {
        id: "hold-kernel".into(),
        title: "Hold the kernel's packages: ZFS's modules are built for this kernel".into(),
        guard: Guard::Always,
        actions: vec![
            Action::HoldKernel,
            Action::WriteFile {
                path: KERNEL_GUARD.into(),
                contents: include_str!("../../../files/board/kernel-guard").into(),
                mode: 0o755,
            },
        ],
        always: vec![],
    }
}

fn create_step(array: &ArrayPlan) -> Step {
    let name = &array.spec.name;
    let vdevs = array.spec.vdev_count();
    let members = array
        .members
        .iter()
        .map(|m| PoolMember {
            device: m.disk.stable_path(),
            disk: m.disk.identity(),
            held: if m.erase {
                m.disk
                    .all_contents()
                    .into_iter()
                    .map(|(_, s)| s.clone())
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    Step {
        id: format!("create-pool:{name}"),
        title: format!(
            "Create ZFS pool '{name}' ({} over {} disk(s){}{}) mounted at {}",
            array.spec.level,
            array.active().count(),
            if vdevs > 1 {
                format!(" in {vdevs} vdevs")
            } else {
                String::new()
            },
            match array.spares().count() {
                0 => String::new(),
                n => format!(", {n} hot spare(s)"),
            },
            array.spec.mount
        ),
        guard: Guard::Pool {
            pool: name.clone(),
            members,
        },
        // zpool waits for udev's links to the partitions it writes; a
        // settle first lets the events of the erase steps finish.
        actions: vec![
            run(&["udevadm", "settle"]),
            Action::CreatePool {
                argv: zpool::create(array),
            },
        ],
        always: vec![],
    }
}

/// The pools imported from the cache file and mounted at every boot,
/// right after they exist: a power cut later in setup finds them again.
pub(super) fn boot_step() -> Step {
    Step {
        id: "zfs-boot".into(),
        title: "Import and mount the ZFS pools at every boot".into(),
        guard: Guard::Always,
        actions: vec![enable(&zpool::BOOT_UNITS, false)],
        always: vec![],
    }
}

/// zpool create mounts the pool, and zfs-mount.service at boot; this
/// mounts it when neither has (a pool imported by hand with -N). An
/// adopted pool's datasets below the top one are mounted with it.
pub(super) fn mount_step(array: &ArrayPlan) -> Step {
    let name = &array.spec.name;
    let mount = if array.imported.is_some() {
        run(&["zfs", "mount", "-a"])
    } else {
        run(&["zfs", "mount", name])
    };
    Step {
        id: format!("mount:{name}"),
        title: format!("Mount pool '{name}' at {}", array.spec.mount),
        guard: Guard::Mounted {
            mount: array.spec.mount.clone(),
        },
        actions: vec![mount],
        always: vec![],
    }
}

/// A dataset for each share below a pool's mount, with its quota: each
/// share gets its own quota, snapshots and `zfs list` line.
pub(super) fn dataset_steps(plan: &Plan) -> Vec<Step> {
    zpool::share_datasets(plan)
        .into_iter()
        .map(|(share, dataset)| Step {
            id: format!("dataset:{}", share.name),
            title: match share.quota {
                Some(q) => format!(
                    "ZFS dataset {dataset} for share '{}', at most {}",
                    share.name,
                    q.exact()
                ),
                None => format!("ZFS dataset {dataset} for share '{}'", share.name),
            },
            guard: Guard::Dataset {
                dataset: dataset.clone(),
                path: share.path.clone(),
                quota: share.quota,
            },
            actions: vec![Action::ZfsDataset {
                dataset,
                quota: share.quota,
            }],
            always: vec![],
        })
        .collect()
}

/// ZED hands the pools' events to nasforge's alerts, and each pool is
/// scrubbed monthly (zfsutils-linux's timer, on the first Sunday).
pub(super) fn monitoring_step(plan: &Plan) -> Step {
    let timers: Vec<String> = plan
        .arrays
        .iter()
        .filter(|a| a.spec.is_zfs())
        .map(|a| zpool::scrub_timer(&a.spec.name))
        .collect();
    Step {
        id: "zfs-monitoring".into(),
        title: "Watch the pools: ZED reports to nasforge's alerts, and a monthly scrub".into(),
        guard: Guard::Always,
        actions: vec![
            Action::WriteFile {
                path: ZEDLET.into(),
                contents: super::alerts::zedlet().into(),
                mode: 0o755,
            },
            enable(&[zpool::ZED_SERVICE], false),
            // ZED reads its zedlets when it starts.
            run(&["systemctl", "restart", zpool::ZED_SERVICE]),
            enable(&timers, true),
        ],
        always: vec![],
    }
}
