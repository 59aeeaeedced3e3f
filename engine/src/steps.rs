//! The plan as ordered steps. Each step is data: the actions it performs
//! (commands, file writes, a GPT) and a guard that looks at the system just
//! before it runs, so a step that already happened is skipped and a disk
//! that changed since planning is refused rather than overwritten.

use crate::machine::disks::{self, Host, Identity};
use crate::machine::signature::{self, Signature};
use crate::planner::{ArrayPlan, CHUNK_KIB, Plan};
use crate::size::Size;
use crate::spec::{Filesystem, Level, Share};
use crate::storage::partition::{self, PartitionKind};
use crate::{shares::avahi, shares::nfs, shares::samba, storage::fstab, storage::mdadm};
use serde::{Deserialize, Serialize};
use std::fmt;

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cmd {
    pub argv: Vec<String>,
    /// Text in stdout that means failure although the exit status is 0
    /// (pdbedit prints "failed" per account and exits 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fails_if_stdout_has: Option<String>,
    /// A device path the command works on that may be gone when the step
    /// is re-run: an old partition that the interrupted run's whole-disk
    /// wipefs already removed. The command is skipped when it is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_if_present: Option<String>,
}

impl Cmd {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Cmd {
        Cmd {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            fails_if_stdout_has: None,
            only_if_present: None,
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self.argv.iter().map(|a| shell_quote(a)).collect();
        f.write_str(&quoted.join(" "))
    }
}

pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Run(Cmd),
    /// Replace a whole file (atomically).
    WriteFile {
        path: String,
        contents: String,
        mode: u32,
    },
    /// Replace nasforge's marked block inside a file the system also uses.
    ManagedBlock {
        path: String,
        contents: String,
    },
    /// Write `header` followed by the output of `cmd` (mdadm.conf's ARRAY
    /// lines come from `mdadm --detail --scan`), without the words that
    /// start with one of `drop`.
    CaptureToFile {
        path: String,
        header: String,
        cmd: Cmd,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        drop: Vec<String>,
    },
    RemoveFile {
        path: String,
    },
    /// Protective MBR + GPT with one partition named `name`, 1 MiB aligned.
    WriteGpt {
        device: String,
        block_size: u64,
        name: String,
        kind: PartitionKind,
    },
    /// BLKRRPART, falling back to `partx -u` when the kernel refuses.
    RereadPartitions {
        device: String,
    },
    /// Zero the first and last MiB, where every signature the safety check
    /// reads lives, after wipefs has removed the ones it knows.
    ZeroEnds {
        device: String,
    },
}

impl fmt::Display for Action {
    /// One line per command, as `plan --dry-run` prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let indent = |text: &str| {
            text.lines()
                .map(|l| format!("    | {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        match self {
            Action::Run(cmd) if cmd.only_if_present.is_some() => {
                write!(f, "{cmd}  # if it still exists")
            }
            Action::Run(cmd) => write!(f, "{cmd}"),
            Action::WriteFile {
                path,
                contents,
                mode,
            } => write!(f, "# write {path} (mode {mode:o}):\n{}", indent(contents)),
            Action::ManagedBlock { path, contents } => write!(
                f,
                "# replace nasforge's block in {path} with:\n{}",
                indent(contents)
            ),
            Action::CaptureToFile {
                path,
                header,
                cmd,
                drop,
            } => {
                let without = if drop.is_empty() {
                    String::new()
                } else {
                    format!(" without {}", drop.join(", "))
                };
                write!(
                    f,
                    "# write {path}:\n{}\n    | <output of `{cmd}`{without}>",
                    indent(header)
                )
            }
            Action::RemoveFile { path } => write!(f, "rm -f {}", shell_quote(path)),
            Action::WriteGpt {
                device,
                block_size,
                name,
                kind,
            } => write!(
                f,
                "# write {device}: protective MBR + GPT ({block_size}-byte sectors), partition 1 '{name}' ({}) from 1 MiB to the last whole MiB",
                kind.describe()
            ),
            Action::RereadPartitions { device } => {
                write!(
                    f,
                    "# re-read {device}'s partition table (BLKRRPART ioctl, else partx -u {device})"
                )
            }
            Action::ZeroEnds { device } => write!(f, "# zero the first and last MiB of {device}"),
        }
    }
}

/// What to check before a step runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "guard", rename_all = "snake_case")]
pub enum Guard {
    /// The step is idempotent by construction (whole-file writes, enables).
    Always,
    /// Wiping: the disk at `device` must be the planned one, not in use by
    /// the running system, and hold nothing beyond what it held when the
    /// plan was made (less, after an interrupted wipe).
    NotInUse {
        device: String,
        disk: Identity,
        held: Vec<Signature>,
    },
    /// Partitioning: the disk at `device` must be the planned one and
    /// blank or carry our table (a run cut short re-runs, which also wipes
    /// the new partition); anything else means it changed since planning.
    Partition {
        device: String,
        disk: Identity,
        block_size: u64,
        name: String,
        kind: PartitionKind,
    },
    /// Done if the md array exists with exactly `members` (partition
    /// paths); refused if an array of other devices has its name.
    ArrayExists {
        device: String,
        members: Vec<String>,
    },
    /// Refused if the array is there with other members than `members`:
    /// it is not the one the setup made.
    OurArray {
        device: String,
        members: Vec<String>,
    },
    /// Done if the filesystem with this UUID is on the device; refused if
    /// any other signature is.
    Filesystem { device: String, uuid: String },
    /// Done if something is mounted there.
    Mounted { mount: String },
    /// Done (nothing to do) if the file is absent.
    FilePresent { path: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Pending,
    Done(String),
    Refuse(String),
}

/// Inputs the steps need beyond the plan: decided at the edge (hostname
/// read from /etc/hostname, random UUIDs) so generation stays pure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    pub hostname: String,
    /// Filesystem UUID for each array, in plan order.
    pub fs_uuids: Vec<String>,
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
/// partition.
pub fn filesystem_device(array: &ArrayPlan) -> String {
    if array.spec.level == Level::Single {
        partition::partition_path(&array.members[0].disk.stable_path(), 1)
    } else {
        mdadm::device(&array.spec.name)
    }
}

pub fn generate(plan: &Plan, ctx: &Context) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, array) in plan.arrays.iter().enumerate() {
        array_steps(array, &ctx.fs_uuids[i], &ctx.hostname, &mut steps);
    }
    let md: Vec<&ArrayPlan> = plan
        .arrays
        .iter()
        .filter(|a| a.spec.level != Level::Single)
        .collect();
    if !md.is_empty() {
        steps.push(Step {
            id: "mdadm-conf".into(),
            title: format!(
                "Write {} so the arrays assemble under their names at boot",
                mdadm::CONF
            ),
            guard: Guard::Always,
            actions: vec![Action::CaptureToFile {
                path: mdadm::CONF.into(),
                header: mdadm::conf_header(&ctx.hostname, &plan.alert),
                cmd: Cmd::new(&["mdadm", "--detail", "--scan"]),
                // A new RAID 5/6 is still building here, and the scan counts
                // the disk being rebuilt as a spare; kept, `spares=1` makes
                // mdmonitor report a missing spare forever after.
                drop: vec!["spares=".into()],
            }],
            always: vec![],
        });
        steps.push(Step {
            id: "initramfs".into(),
            title: "Rebuild the initramfs with the new mdadm.conf".into(),
            guard: Guard::Always,
            // Raspberry Pi OS installs two kernels (rpi-v8, rpi-2712) and `-u`
            // alone rebuilds only the newest: a Pi 5 may boot the other.
            actions: vec![run(&["update-initramfs", "-u", "-k", "all"])],
            always: vec![],
        });
    }
    if !plan.arrays.is_empty() {
        let lines: Vec<String> = plan
            .arrays
            .iter()
            .zip(&ctx.fs_uuids)
            .map(|(a, uuid)| fstab::line(uuid, &a.spec.mount, a.spec.filesystem))
            .collect();
        steps.push(Step {
            id: "fstab".into(),
            title: "Add the arrays to /etc/fstab (by UUID, nofail)".into(),
            guard: Guard::Always,
            actions: vec![
                Action::ManagedBlock {
                    path: "/etc/fstab".into(),
                    contents: lines.join("\n"),
                },
                run(&["systemctl", "daemon-reload"]),
            ],
            always: vec![],
        });
    }
    for array in &plan.arrays {
        let mount = &array.spec.mount;
        let [trigger, settle] = udev_reprobe(&filesystem_device(array));
        steps.push(Step {
            id: format!("mount:{}", array.spec.name),
            title: format!("Mount '{}' at {mount}", array.spec.name),
            guard: Guard::Mounted {
                mount: mount.clone(),
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
        });
    }
    share_steps(plan, &mut steps);
    if !md.is_empty() {
        steps.push(Step {
            id: "raid-monitoring".into(),
            title: "Watch the arrays: mdmonitor and a monthly scrub".into(),
            guard: Guard::Always,
            actions: vec![
                Action::WriteFile {
                    path: mdadm::DEFAULT_FILE.into(),
                    contents: mdadm::default_file().into(),
                    mode: 0o644,
                },
                run(&[
                    "systemctl",
                    "enable",
                    "--now",
                    "mdcheck_start.timer",
                    "mdcheck_continue.timer",
                ]),
                run(&["systemctl", "restart", "mdmonitor.service"]),
            ],
            always: vec![],
        });
    }
    if !plan.arrays.is_empty() {
        steps.push(Step {
            id: "smartd".into(),
            title: "Watch disk health with smartd".into(),
            guard: Guard::Always,
            actions: vec![run(&[
                "systemctl",
                "enable",
                "--now",
                "smartmontools.service",
            ])],
            always: vec![],
        });
    }
    steps
}

fn array_steps(array: &ArrayPlan, uuid: &str, hostname: &str, steps: &mut Vec<Step>) {
    let name = &array.spec.name;
    let kind = if array.spec.level == Level::Single {
        PartitionKind::LinuxFilesystem
    } else {
        PartitionKind::LinuxRaid
    };
    for member in array.members.iter().filter(|m| m.erase) {
        let disk = &member.disk;
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
        steps.push(Step {
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
        });
    }
    let mut partitions = Vec::new();
    for member in &array.members {
        let disk = &member.disk;
        let device = disk.stable_path();
        let part = partition::partition_path(&device, 1);
        steps.push(Step {
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
        });
        partitions.push(part);
    }
    if array.spec.level != Level::Single {
        let device = mdadm::device(name);
        steps.push(Step {
            id: format!("create-array:{name}"),
            title: format!(
                "Create {} array '{name}' from {} partitions",
                array.spec.level,
                partitions.len()
            ),
            guard: Guard::ArrayExists {
                device: device.clone(),
                members: partitions.clone(),
            },
            actions: vec![
                run(&["udevadm", "settle"]),
                // udev probing the new members races mdadm ("Device or
                // resource busy"): hold udev's event queue during create.
                run(&["udevadm", "control", "--stop-exec-queue"]),
                Action::Run(Cmd::new(&mdadm::create(array, hostname, &partitions))),
            ],
            always: vec![
                run(&["udevadm", "control", "--start-exec-queue"]),
                run(&["udevadm", "settle"]),
            ],
        });
        // Disks reused with wipe = true can show the old array's filesystem
        // inside the new one (same partition and data offset), and the mkfs
        // guard refuses any filesystem it did not make: clear the new array
        // first, once it is certain to be the one made from these members.
        steps.push(Step {
            id: format!("clear-array:{name}"),
            title: format!("Clear old signatures from the new array {device}"),
            guard: Guard::OurArray {
                device: device.clone(),
                members: partitions,
            },
            actions: vec![run(&["wipefs", "--all", "--force", &device])],
            always: vec![],
        });
    }
    let device = filesystem_device(array);
    let fs = array.spec.filesystem;
    steps.push(Step {
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
    });
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
    }
    argv.push(device.to_string());
    argv
}

fn share_steps(plan: &Plan, steps: &mut Vec<Step>) {
    if plan.shares.is_empty() {
        return;
    }
    let mut dirs = Vec::new();
    for share in &plan.shares {
        dirs.push(run(&["mkdir", "-p", &share.path]));
        let Some(smb) = &share.smb else { continue };
        if let Some(owner) = smb.users.first() {
            dirs.push(run(&["chown", &format!("{owner}:"), &share.path]));
            dirs.push(run(&["chmod", "2775", &share.path]));
        }
        if smb.timemachine {
            for user in &smb.users {
                let own = format!("{}/{user}", share.path);
                dirs.push(run(&["mkdir", "-p", &own]));
                dirs.push(run(&["chown", &format!("{user}:"), &own]));
                dirs.push(run(&["chmod", "0700", &own]));
            }
        }
    }
    steps.push(Step {
        id: "share-dirs".into(),
        title: "Create the shared directories".into(),
        guard: Guard::Always,
        actions: dirs,
        always: vec![],
    });
    let smb: Vec<(&Share, Option<Size>)> = plan
        .shares
        .iter()
        .filter(|s| s.smb.is_some())
        .map(|s| (s, plan.timemachine_limit(s)))
        .collect();
    if !smb.is_empty() {
        steps.push(Step {
            id: "samba-config".into(),
            title: format!(
                "Configure Samba shares ({})",
                smb.iter()
                    .map(|(s, _)| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            guard: Guard::Always,
            actions: vec![
                Action::WriteFile {
                    path: samba::SHARES_FILE.into(),
                    contents: samba::shares_conf(&smb),
                    mode: 0o644,
                },
                Action::ManagedBlock {
                    path: samba::SMB_CONF.into(),
                    contents: samba::include_line(),
                },
                run(&["testparm", "--suppress-prompt"]),
            ],
            always: vec![],
        });
        steps.push(Step {
            id: "samba-users".into(),
            title: "Import the Samba passwords staged by the image builder".into(),
            guard: Guard::FilePresent {
                path: samba::STAGED_PASSWORDS.into(),
            },
            actions: vec![
                Action::Run(Cmd {
                    fails_if_stdout_has: Some("failed".into()),
                    ..Cmd::new(&samba::import_command())
                }),
                Action::RemoveFile {
                    path: samba::STAGED_PASSWORDS.into(),
                },
            ],
            always: vec![],
        });
        steps.push(Step {
            id: "samba-service".into(),
            title: "Start Samba".into(),
            guard: Guard::Always,
            actions: vec![
                run(&["systemctl", "enable", "smbd.service"]),
                run(&["systemctl", "restart", "smbd.service"]),
            ],
            always: vec![],
        });
    }
    let shares: Vec<&Share> = smb.iter().map(|(s, _)| *s).collect();
    let mut announce = Vec::new();
    if shares.is_empty() {
        // A plan without SMB must not keep announcing an earlier one's.
        announce.push(Action::RemoveFile {
            path: avahi::SERVICE_FILE.into(),
        });
    } else {
        announce.push(Action::WriteFile {
            path: avahi::SERVICE_FILE.into(),
            contents: avahi::service_file(&shares),
            mode: 0o644,
        });
    }
    // One `systemctl enable` for both: each costs seconds on a Pi's SD card.
    let mut units = vec!["systemctl", "enable", "avahi-daemon.service"];
    if !shares.is_empty() {
        units.push("wsdd2.service");
    }
    announce.push(run(&units));
    announce.push(run(&[
        "systemctl",
        "reload-or-restart",
        "avahi-daemon.service",
    ]));
    if !shares.is_empty() {
        // Windows 10 and 11 list a server in Network only through
        // WS-Discovery; wsdd2 reads the names it answers with from smb.conf.
        announce.push(run(&["systemctl", "restart", "wsdd2.service"]));
    }
    steps.push(Step {
        id: "announce".into(),
        title: "Answer to the NAS's name on the network (mDNS, WS-Discovery)".into(),
        guard: Guard::Always,
        actions: announce,
        always: vec![],
    });
    let exported: Vec<_> = plan
        .shares
        .iter()
        .filter(|s| s.nfs.is_some())
        .map(|s| {
            let mount = plan
                .array_of(&s.path)
                .map_or(s.path.as_str(), |a| a.spec.mount.as_str());
            (s, mount)
        })
        .collect();
    if !exported.is_empty() {
        steps.push(Step {
            id: "nfs-exports".into(),
            title: "Export NFS shares".into(),
            guard: Guard::Always,
            actions: vec![
                Action::WriteFile {
                    path: nfs::EXPORTS_FILE.into(),
                    contents: nfs::exports(&exported),
                    mode: 0o644,
                },
                run(&["systemctl", "enable", "--now", "nfs-server.service"]),
                run(&["exportfs", "-ra"]),
            ],
            always: vec![],
        });
    }
}

impl Step {
    /// Looks at the system (through `host`) to decide whether the step
    /// still has to run.
    pub fn check(&self, host: &Host) -> Check {
        match &self.guard {
            Guard::Always => Check::Pending,
            Guard::NotInUse { device, disk, held } => {
                let found = match planned_disk(host, device, disk) {
                    Ok(found) => found,
                    Err(why) => return Check::Refuse(format!("nothing was erased: {why}")),
                };
                if !found.in_use.is_empty() {
                    return Check::Refuse(format!(
                        "{device} ({}) is in use: {}; nothing was erased",
                        found.name,
                        in_use(&found)
                    ));
                }
                // A wipe cut short leaves part of what was there, never more;
                // once wipefs has cleared the magic, the rest of what was
                // there is bytes no probe recognises.
                let new: Vec<String> = found
                    .all_contents()
                    .into_iter()
                    .filter(|(_, s)| {
                        !held.contains(s) && !matches!(s, Signature::Unrecognised { .. })
                    })
                    .map(|(on, s)| format!("{on}: {s}"))
                    .collect();
                if !new.is_empty() {
                    return Check::Refuse(format!(
                        "{device} ({}) now holds {}, which it did not hold when the plan was made (it held {}); nothing was erased. {REPLAN}",
                        found.name,
                        new.join("; "),
                        describe(held)
                    ));
                }
                Check::Pending
            }
            Guard::Partition {
                device,
                disk,
                block_size,
                name,
                kind,
            } => {
                let found = match planned_disk(host, device, disk) {
                    Ok(found) => found,
                    Err(why) => return Check::Refuse(format!("nothing was written: {why}")),
                };
                if !found.in_use.is_empty() {
                    return Check::Refuse(format!(
                        "{device} ({}) is in use: {}; nothing was written",
                        found.name,
                        in_use(&found)
                    ));
                }
                // Our own table means a run of this step was cut short: it
                // runs again (it is idempotent), so the new partition's
                // wipefs is not skipped.
                if found.is_blank()
                    || partition::is_ours(&host.dev_path(device), *block_size, name, *kind)
                {
                    return Check::Pending;
                }
                Check::Refuse(format!(
                    "{device} ({}) now holds {}, which was not there when the plan was made (or was to be erased); nothing was written. {REPLAN}",
                    found.name,
                    found.describe_contents()
                ))
            }
            Guard::ArrayExists { device, members } => {
                let Some(kernel) = disks::kernel_name(host, device) else {
                    return Check::Pending;
                };
                match array_is_ours(host, device, &kernel, members) {
                    Ok(()) => Check::Done(format!(
                        "{device} ({kernel}) exists with the planned members"
                    )),
                    Err(why) => Check::Refuse(why),
                }
            }
            Guard::OurArray { device, members } => {
                // Absent: wipefs runs and reports the missing array itself.
                let Some(kernel) = disks::kernel_name(host, device) else {
                    return Check::Pending;
                };
                match array_is_ours(host, device, &kernel, members) {
                    Ok(()) => Check::Pending,
                    Err(why) => Check::Refuse(why),
                }
            }
            Guard::Filesystem { device, uuid } => {
                let path = host.dev_path(device);
                // What this module's probe misses (f2fs, jfs, bcache...),
                // util-linux's names: a fresh array or partition with no
                // signature is the only thing formatted.
                match signature::read(&path, 0, None).and_then(|mut found| {
                    if found.is_empty() {
                        found = signature::util_linux(&path).map_err(std::io::Error::other)?;
                    }
                    Ok(found)
                }) {
                    // Absent: mkfs runs and reports the missing device itself.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Check::Pending,
                    Err(e) => Check::Refuse(format!("cannot read {device}: {e}")),
                    Ok(found) if found.is_empty() => Check::Pending,
                    Ok(found)
                        if found.iter().any(
                            |s| matches!(s, Signature::Filesystem { uuid: Some(u), .. } if u == uuid),
                        ) =>
                    {
                        Check::Done(format!("{device} already has filesystem {uuid}"))
                    }
                    Ok(found) => Check::Refuse(format!(
                        "{device} holds {}, not the filesystem this setup makes (UUID {uuid}); nothing was formatted. If it is an array or disk from elsewhere, stop or detach it; if it is data you meant to erase, run `wipefs --all {device}`; then start setup again",
                        describe(&found)
                    )),
                }
            }
            Guard::Mounted { mount } => {
                if crate::machine::mounts::Mounts::read(&host.root).is_mounted(mount) {
                    Check::Done(format!("{mount} is mounted"))
                } else {
                    Check::Pending
                }
            }
            Guard::FilePresent { path } => {
                if host.path(path).exists() {
                    Check::Pending
                } else {
                    Check::Done(format!(
                        "{path} is not there (already imported, or the image staged none)"
                    ))
                }
            }
        }
    }
}

/// How a refusal that found the disks changed tells the user to go on.
const REPLAN: &str =
    "Check the disk is the one you meant, then remove /var/lib/nasforge/journal.json to plan again";

fn in_use(disk: &disks::Disk) -> String {
    disk.in_use
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(signatures: &[Signature]) -> String {
    if signatures.is_empty() {
        return "nothing".into();
    }
    signatures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The disk at `device`, if it is the one the step was planned for. Kernel
/// names move between boots, and a disk without a unique by-id link is
/// addressed by its kernel name, so after a power cut another disk can sit
/// at the planned path.
fn planned_disk(host: &Host, device: &str, planned: &Identity) -> Result<disks::Disk, String> {
    let found = disk_by_path(host, device)?;
    let identity = found.identity();
    if identity.same_disk(planned) {
        Ok(found)
    } else {
        Err(format!(
            "{device} is now {identity}, not the disk this step was planned for ({planned}): the disks were renumbered or swapped since planning. Put the planned disk back, or check the disks and remove /var/lib/nasforge/journal.json to plan again"
        ))
    }
}

/// Finds the disk a step names by path, through its by-id link when it has
/// one (kernel names can move between boots).
fn disk_by_path(host: &Host, device: &str) -> Result<disks::Disk, String> {
    let Some(name) = disks::kernel_name(host, device) else {
        return Err(format!("{device} is gone; is the disk still attached?"));
    };
    let inventory = disks::discover(host).map_err(|e| e.to_string())?;
    inventory
        .disks
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| format!("{device} ({name}) is not a disk the system lists any more"))
}

/// Whether the md array at `device` (kernel name `kernel`) is made of
/// exactly the planned partitions; if not, why not.
fn array_is_ours(
    host: &Host,
    device: &str,
    kernel: &str,
    planned: &[String],
) -> Result<(), String> {
    let found = disks::md_members(host, kernel);
    let mut expected = Vec::new();
    let mut missing = Vec::new();
    for part in planned {
        match disks::kernel_name(host, part) {
            Some(name) => expected.push(name),
            None => missing.push(part.as_str()),
        }
    }
    expected.sort();
    if missing.is_empty() && found == expected {
        return Ok(());
    }
    let found = if found.is_empty() {
        "no members the kernel lists".to_string()
    } else {
        found.join(", ")
    };
    let mut planned_text = expected.join(", ");
    if !missing.is_empty() {
        if !planned_text.is_empty() {
            planned_text += ", ";
        }
        planned_text += &format!("{} (not there)", missing.join(", "));
    }
    Err(format!(
        "{device} ({kernel}) is made of {found}, but this setup planned it from {planned_text}: it is not the array this setup creates, so nothing was written to it. It is probably an old array with the same name: stop it (`mdadm --stop {device}`) and take its disks out, or check the disks and remove /var/lib/nasforge/journal.json to plan again with another name"
    ))
}
