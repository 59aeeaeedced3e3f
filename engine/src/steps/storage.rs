//! The steps that turn disks into mounted filesystems: erase, partition,
//! assemble the md array, format, record in mdadm.conf and fstab, mount,
//! then watch the arrays and disks.

use super::{Action, Cmd, Context, Guard, Step, enable, run};
use crate::machine::disks::Disk;
use crate::machine::signature;
use crate::planner::{ArrayPlan, KeptPlan, Plan};
use crate::spec::{Array, Filesystem, Level};
use crate::storage::fstab;
use crate::storage::mdadm::{self, CHUNK_KIB, MdCreate};
use crate::storage::partition::{self, PartitionKind};

fn part_name(array: &str) -> String {
    format!("nasforge-{array}")
}

/// A change event for `device`, then a wait for every event sent so far:
/// udev's record of the device (what it holds, its by-uuid link) is fresh.
fn udev_reprobe(device: &str) -> [Action; 2] {
    [
        run(&["udevadm", "trigger", "--action=change", device]),
        run(&["udevadm", "settle"]),
    ]
}

/// systemd's name for the mount unit of `path` (`systemd-escape --path
/// --suffix=mount`); spec paths are absolute and limited to `A-Za-z0-9._-/`.
pub fn mount_unit(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return "-.mount".into();
    }
    let mut out = String::new();
    for (i, part) in trimmed.split('/').filter(|p| !p.is_empty()).enumerate() {
        if i > 0 {
            out.push('-');
        }
        for (j, c) in part.chars().enumerate() {
            if c.is_ascii_alphanumeric()
                || c == '_'
                || c == ':'
                || (c == '.' && !(i == 0 && j == 0))
            {
                out.push(c);
            } else {
                out += &format!("\\x{:02x}", c as u32);
            }
        }
    }
    out + ".mount"
}

/// The device the filesystem goes on: the md array, or the single disk's
/// partition; a ZFS pool's name stands for its root dataset.
pub fn filesystem_device(array: &ArrayPlan) -> String {
    if array.spec.is_zfs() {
        array.spec.name.clone()
    } else if array.spec.level == Level::Single {
        partition::partition_path(&array.members[0].disk.stable_path(), 1)
    } else {
        array.spec.md_device()
    }
}

/// One array's steps: erase the disks the recipe allowed erasing,
/// partition every member, create and clear the md array (not for
/// `single`), make the filesystem.
pub(super) fn array_steps(array: &ArrayPlan, uuid: &str, hostname: &str, steps: &mut Vec<Step>) {
    let name = &array.spec.name;
    let kind = if array.spec.level == Level::Single {
        PartitionKind::LinuxFilesystem
    } else {
        PartitionKind::LinuxRaid
    };
    for member in array.members.iter().filter(|m| m.erase) {
        steps.push(wipe_step(&member.disk));
    }
    let mut partitions = Vec::new();
    for member in &array.members {
        let (step, part) = partition_step(&member.disk, name, kind);
        steps.push(step);
        partitions.push(part);
    }
    if array.spec.level != Level::Single {
        for md in mdadm::arrays(array, &partitions) {
            steps.extend(md_steps(&array.spec, &md, hostname));
        }
    }
    steps.push(mkfs_step(array, uuid));
}

pub(crate) fn wipe_step(disk: &Disk) -> Step {
    let device = disk.stable_path();
    let mut actions: Vec<Action> = disk
        .partitions
        .iter()
        .map(|p| {
            let part = partition::partition_path(&device, p.number);
            Action::Run(Cmd {
                only_if_present: Some(part.clone()),
                ..Cmd::new(&["wipefs", "--all", "--force", &part])
            })
        })
        .collect();
    actions.push(run(&["wipefs", "--all", "--force", &device]));
    actions.push(Action::ZeroEnds {
        device: device.clone(),
    });
    // udev probes a disk again only when it notices the write, in its
    // own time: until then its record still names what was erased, and
    // the partition step's check right after would refuse the disk. A
    // change event of our own, then settle (which waits for every event
    // the kernel has sent so far), leaves no such window.
    actions.extend(udev_reprobe(&device));
    Step {
        id: format!("wipe:{}", disk.name),
        title: format!(
            "Erase {} ({}): it held {}",
            disk.name,
            disk.summary(),
            disk.describe_contents()
        ),
        guard: Guard::NotInUse {
            device: device.clone(),
            disk: disk.identity(),
            held: disk
                .all_contents()
                .into_iter()
                .map(|(_, s)| s.clone())
                .collect(),
        },
        actions,
        always: vec![],
    }
}

/// The step that partitions a member, and the path of its partition.
pub(crate) fn partition_step(disk: &Disk, name: &str, kind: PartitionKind) -> (Step, String) {
    let device = disk.stable_path();
    let part = partition::partition_path(&device, 1);
    let step = Step {
        id: format!("partition:{}", disk.name),
        title: format!("Partition {} ({}) for '{name}'", disk.name, disk.summary()),
        guard: Guard::Partition {
            device: device.clone(),
            disk: disk.identity(),
            block_size: disk.logical_block_size,
            name: part_name(name),
            kind,
        },
        actions: vec![
            Action::WriteGpt {
                device: device.clone(),
                block_size: disk.logical_block_size,
                name: part_name(name),
                kind,
            },
            Action::RereadPartitions {
                device: device.clone(),
            },
            run(&["udevadm", "settle"]),
            // Old signatures inside the new partition's range would
            // otherwise reappear in it and make mdadm or mkfs hesitate.
            run(&["wipefs", "--all", "--force", &part]),
        ],
        always: vec![],
    };
    (step, part)
}

/// Create one md array of `spec` (the array itself, a leg, or the raid0
/// over the legs), then clear what old arrays left inside it. A leg is
/// cleared before the raid0 over it is made: afterwards its start holds
/// the raid0's superblock.
fn md_steps(spec: &Array, md: &MdCreate, hostname: &str) -> [Step; 2] {
    let name = &md.name;
    let device = md.device();
    let members = md.members();
    let what = if md.name == spec.name { "array" } else { "leg" };
    let from = match (md.devices.first(), md.spares.len()) {
        (Some(first), _) if first.starts_with("/dev/md/") => {
            let legs: Vec<&str> = md
                .devices
                .iter()
                .map(|d| d.trim_start_matches("/dev/md/"))
                .collect();
            format!("over its legs {}", legs.join(" and "))
        }
        (_, 0) => format!("from {} partitions", md.devices.len()),
        (_, spares) => format!(
            "from {} partitions and {spares} hot spare(s)",
            md.devices.len()
        ),
    };
    let create = Step {
        id: format!("create-array:{name}"),
        title: format!("Create {} {what} '{name}' {from}", md.level),
        guard: Guard::ArrayExists {
            device: device.clone(),
            members: members.clone(),
        },
        actions: vec![
            run(&["udevadm", "settle"]),
            // udev probing the new members races mdadm ("Device or
            // resource busy"): hold udev's event queue during create.
            run(&["udevadm", "control", "--stop-exec-queue"]),
            Action::Run(Cmd::new(&mdadm::create(md, hostname))),
        ],
        always: vec![
            run(&["udevadm", "control", "--start-exec-queue"]),
            run(&["udevadm", "settle"]),
        ],
    };
    // Disks reused with wipe = true can show the old array's filesystem
    // inside the new one (same partition and data offset), and the mkfs
    // guard refuses any filesystem it did not make: clear the new array
    // first, once it is certain to be the one made from these members.
    let clear = Step {
        id: format!("clear-array:{name}"),
        title: format!("Clear old signatures from the new {what} {device}"),
        guard: Guard::OurArray {
            device: device.clone(),
            members,
        },
        actions: vec![run(&["wipefs", "--all", "--force", &device])],
        always: vec![],
    };
    [create, clear]
}

fn mkfs_step(array: &ArrayPlan, uuid: &str) -> Step {
    let name = &array.spec.name;
    let device = filesystem_device(array);
    let fs = array.spec.filesystem;
    Step {
        id: format!("mkfs:{name}"),
        title: format!(
            "Make {} {fs} filesystem on {device}",
            signature::a_or_an(&fs.to_string())
        ),
        guard: Guard::Filesystem {
            device: device.clone(),
            uuid: uuid.to_string(),
        },
        actions: vec![Action::Run(Cmd::new(&mkfs(array, uuid, &device)))],
        always: vec![],
    }
}

/// mkfs with the stripe geometry of the array, so filesystem allocation
/// lines up with md chunks (stride = chunk / 4 KiB block, stripe width =
/// stride × data disks).
pub fn mkfs(array: &ArrayPlan, uuid: &str, device: &str) -> Vec<String> {
    let name = &array.spec.name;
    let striped = array.spec.level.is_striped();
    let data_disks = array.data_disks().max(1) as u64;
    let mut argv: Vec<String> = Vec::new();
    let mut push = |args: &[&str]| argv.extend(args.iter().map(|s| s.to_string()));
    match array.spec.filesystem {
        Filesystem::Ext4 => {
            push(&["mkfs.ext4", "-F"]);
            if name.len() <= 16 {
                push(&["-L", name]);
            }
            push(&["-U", uuid]);
            if striped {
                let stride = CHUNK_KIB / 4;
                push(&[
                    "-E",
                    &format!("stride={stride},stripe_width={}", stride * data_disks),
                ]);
            }
        }
        Filesystem::Xfs => {
            push(&["mkfs.xfs", "-f"]);
            if name.len() <= 12 {
                push(&["-L", name]);
            }
            push(&["-m", &format!("uuid={uuid}")]);
            if striped {
                push(&["-d", &format!("su={CHUNK_KIB}k,sw={data_disks}")]);
            }
        }
        Filesystem::Btrfs => {
            push(&["mkfs.btrfs", "-f", "-L", name, "-U", uuid]);
        }
        Filesystem::Zfs => unreachable!("a ZFS pool is made by zpool create, not mkfs"),
    }
    argv.push(device.to_string());
    argv
}

/// mdadm.conf, so the arrays assemble under their names at boot, and an
/// initramfs that carries it.
pub(super) fn mdadm_conf_steps(plan: &Plan, hostname: &str) -> [Step; 2] {
    [
        Step {
            id: "mdadm-conf".into(),
            title: format!(
                "Write {} so the arrays assemble under their names at boot",
                mdadm::CONF
            ),
            guard: Guard::Always,
            actions: vec![Action::CaptureToFile {
                path: mdadm::CONF.into(),
                header: mdadm::conf_header(
                    hostname,
                    &plan.alert,
                    plan.arrays.iter().any(|a| a.spec.is_nested()),
                ),
                cmd: Cmd::new(&["mdadm", "--detail", "--scan"]),
                // A new RAID 5/6 is still building here, and the scan counts
                // the disk being rebuilt as a spare; kept, `spares=1` makes
                // mdmonitor report a missing spare forever after. Real hot
                // spares are not counted either: once md has rebuilt onto
                // one (or its monitor moved it to another leg) the count
                // would be wrong for good.
                drop: vec!["spares=".into()],
                first: mdadm::leg_lines(plan),
            }],
            always: vec![],
        },
        Step {
            id: "initramfs".into(),
            title: "Rebuild the initramfs with the new mdadm.conf".into(),
            guard: Guard::Always,
            // Raspberry Pi OS installs two kernels (rpi-v8, rpi-2712) and `-u`
            // alone rebuilds only the newest: a Pi 5 may boot the other.
            actions: vec![Action::RebuildInitramfs],
            always: vec![],
        },
    ]
}

/// `pool_lines`: the lines of the pools' own disks.
pub(super) fn fstab_step(plan: &Plan, ctx: &Context, pool_lines: Vec<String>) -> Step {
    let lines: Vec<String> = plan
        .arrays
        .iter()
        .zip(&ctx.fs_uuids)
        .filter(|(a, _)| !a.spec.is_zfs())
        .filter(|(a, _)| a.spec.level != Level::Pool)
        .map(|(a, uuid)| match a.imported {
            // Its filesystem's UUID is read only once it is assembled; the
            // name is as fixed, by its UUID on mdadm.conf's ARRAY line.
            Some(_) => fstab::adopted_line(&a.spec.md_device(), &a.spec.mount, a.spec.filesystem),
            None => fstab::line(uuid, &a.spec.mount, a.spec.filesystem),
        })
        .chain(pool_lines)
        .chain(
            plan.kept
                .iter()
                .map(|k| fstab::kept_line(&k.uuid, &k.spec.mount, &k.mount_type())),
        )
        .collect();
    let filesystems = plan.arrays.iter().any(|a| !a.spec.is_zfs());
    let what = match (!filesystems, plan.kept.is_empty()) {
        (false, true) => "the arrays",
        (true, false) => "the kept disks",
        _ => "the arrays and kept disks",
    };
    let by = if plan.arrays.iter().any(|a| a.imported.is_some()) {
        "by UUID or md name"
    } else {
        "by UUID"
    };
    Step {
        id: "fstab".into(),
        title: format!("Add {what} to /etc/fstab ({by}, nofail)"),
        guard: Guard::Always,
        actions: vec![
            Action::ManagedBlock {
                path: "/etc/fstab".into(),
                contents: lines.join("\n"),
            },
            run(&["systemctl", "daemon-reload"]),
        ],
        always: vec![],
    }
}

pub(super) fn mount_step(array: &ArrayPlan) -> Step {
    let title = format!("Mount '{}' at {}", array.spec.name, array.spec.mount);
    mount_by_systemd(
        &array.spec.name,
        title,
        &array.spec.mount,
        &filesystem_device(array),
    )
}

/// A kept disk mounted as it is: its mount point made, nothing on the disk
/// written by nasforge.
pub(super) fn kept_mount_step(kept: &KeptPlan) -> Step {
    let label = kept
        .label
        .as_deref()
        .map(|l| format!(" '{l}'"))
        .unwrap_or_default();
    let title = format!(
        "Mount the kept disk '{}' ({}{label} on {}, nothing erased) at {}",
        kept.spec.name, kept.filesystem, kept.device, kept.spec.mount
    );
    mount_by_systemd(
        &kept.spec.name,
        title,
        &kept.spec.mount,
        &format!("/dev/{}", kept.device),
    )
}

pub(crate) fn mount_by_systemd(name: &str, title: String, mount: &str, device: &str) -> Step {
    let [trigger, settle] = udev_reprobe(device);
    Step {
        id: format!("mount:{name}"),
        title,
        guard: Guard::Mounted {
            mount: mount.to_string(),
        },
        // systemd binds an fstab mount to its by-uuid device unit and
        // unmounts at once a filesystem mounted by hand while that unit
        // is not yet active (an array started late by mdadm's last-resort
        // timer): the shares then land on the SD card. Udev is asked to
        // look at the device again, and systemd mounts it once the device
        // is there, or fails the step after its device timeout.
        actions: vec![
            run(&["mkdir", "-p", mount]),
            trigger,
            settle,
            run(&["systemctl", "start", &mount_unit(mount)]),
        ],
        always: vec![],
    }
}

pub(super) fn monitoring_step() -> Step {
    Step {
        id: "raid-monitoring".into(),
        title: "Watch the arrays: mdmonitor and a monthly scrub".into(),
        guard: Guard::Always,
        actions: vec![
            Action::WriteFile {
                path: mdadm::DEFAULT_FILE.into(),
                contents: mdadm::default_file().into(),
                mode: 0o644,
            },
            enable(&["mdcheck_start.timer", "mdcheck_continue.timer"], true),
            run(&["systemctl", "restart", "mdmonitor.service"]),
        ],
        always: vec![],
    }
}
