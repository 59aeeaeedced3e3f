//! The plan as ordered steps. Each step is data: the actions it performs
//! (commands, file writes, a GPT) and a guard that looks at the system just
//! before it runs, so a step that already happened is skipped and a disk
//! that changed since planning is refused rather than overwritten.

use crate::disks::{self, Host};
use crate::partition::{self, PartitionKind};
use crate::planner::{ArrayPlan, CHUNK_KIB, Plan};
use crate::signature::{self, Signature};
use crate::spec::{Filesystem, Level};
use crate::{fstab, mdadm, nfs, samba};
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
}

impl Cmd {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Cmd {
        Cmd {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            fails_if_stdout_has: None,
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
    /// lines come from `mdadm --detail --scan`).
    CaptureToFile {
        path: String,
        header: String,
        cmd: Cmd,
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
            Action::CaptureToFile { path, header, cmd } => {
                write!(
                    f,
                    "# write {path}:\n{}\n    | <output of `{cmd}`>",
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
    /// Wiping: the disk must not be in use by the running system.
    NotInUse { device: String },
    /// Partitioning: done if our table is there; refused if the disk holds
    /// anything else (it changed since it was planned blank or wiped).
    Partition {
        device: String,
        block_size: u64,
        name: String,
        kind: PartitionKind,
    },
    /// Done if the md array exists.
    ArrayExists { device: String },
    /// Done if the filesystem with this UUID is on the device.
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
            }],
            always: vec![],
        });
        steps.push(Step {
            id: "initramfs".into(),
            title: "Rebuild the initramfs with the new mdadm.conf".into(),
            guard: Guard::Always,
            actions: vec![run(&["update-initramfs", "-u"])],
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
        steps.push(Step {
            id: format!("mount:{}", array.spec.name),
            title: format!("Mount '{}' at {mount}", array.spec.name),
            guard: Guard::Mounted {
                mount: mount.clone(),
            },
            actions: vec![run(&["mkdir", "-p", mount]), run(&["mount", mount])],
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
                run(&[
                    "wipefs",
                    "--all",
                    "--force",
                    &partition::partition_path(&device, p.number),
                ])
            })
            .collect();
        actions.push(run(&["wipefs", "--all", "--force", &device]));
        actions.push(Action::ZeroEnds {
            device: device.clone(),
        });
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
            guard: Guard::ArrayExists { device },
            actions: vec![
                run(&["udevadm", "settle"]),
                // udev probing the new members races mdadm ("Device or
                // resource busy"): hold udev's event queue during create.
                run(&["udevadm", "control", "--stop-exec-queue"]),
                Action::Run(Cmd {
                    argv: mdadm::create(array, hostname, &partitions),
                    fails_if_stdout_has: None,
                }),
            ],
            always: vec![
                run(&["udevadm", "control", "--start-exec-queue"]),
                run(&["udevadm", "settle"]),
            ],
        });
    }
    let device = filesystem_device(array);
    steps.push(Step {
        id: format!("mkfs:{name}"),
        title: format!("Make an {} filesystem on {device}", array.spec.filesystem),
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
        if let Some(owner) = share.smb.as_ref().and_then(|s| s.users.first()) {
            dirs.push(run(&["chown", &format!("{owner}:"), &share.path]));
            dirs.push(run(&["chmod", "2775", &share.path]));
        }
    }
    steps.push(Step {
        id: "share-dirs".into(),
        title: "Create the shared directories".into(),
        guard: Guard::Always,
        actions: dirs,
        always: vec![],
    });
    let smb: Vec<_> = plan.shares.iter().filter(|s| s.smb.is_some()).collect();
    if !smb.is_empty() {
        steps.push(Step {
            id: "samba-config".into(),
            title: format!(
                "Configure Samba shares ({})",
                smb.iter()
                    .map(|s| s.name.as_str())
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
                    argv: samba::import_command(),
                    fails_if_stdout_has: Some("failed".into()),
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
    let exported: Vec<_> = plan
        .shares
        .iter()
        .filter(|s| s.nfs.is_some())
        .map(|s| {
            let mount = plan
                .arrays
                .iter()
                .map(|a| a.spec.mount.as_str())
                .filter(|m| s.path == *m || s.path.starts_with(&format!("{m}/")))
                .max_by_key(|m| m.len())
                .unwrap_or(s.path.as_str());
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
            Guard::NotInUse { device } => match disk_by_path(host, device) {
                Err(e) => Check::Refuse(e),
                Ok(disk) if !disk.in_use.is_empty() => Check::Refuse(format!(
                    "{device} ({}) is in use: {}; nothing was erased",
                    disk.name,
                    disk.in_use
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Ok(_) => Check::Pending,
            },
            Guard::Partition {
                device,
                block_size,
                name,
                kind,
            } => {
                let path = host.dev_path(device);
                if partition::is_ours(&path, *block_size, name, *kind) {
                    return Check::Done(format!("{device} already has partition '{name}'"));
                }
                match disk_by_path(host, device) {
                    Err(e) => Check::Refuse(e),
                    Ok(disk) if !disk.in_use.is_empty() => Check::Refuse(format!(
                        "{device} ({}) is in use: {}; nothing was written",
                        disk.name,
                        disk.in_use
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    Ok(disk) if !disk.is_blank() => Check::Refuse(format!(
                        "{device} ({}) now holds {}, which was not there when the plan was made (or was to be erased); nothing was written. Check the disk is the one you meant, then remove /var/lib/nasforge/journal.json to plan again",
                        disk.name,
                        disk.describe_contents()
                    )),
                    Ok(_) => Check::Pending,
                }
            }
            Guard::ArrayExists { device } => {
                if host.dev_path(device).exists() {
                    Check::Done(format!("{device} exists"))
                } else {
                    Check::Pending
                }
            }
            Guard::Filesystem { device, uuid } => match signature::read(
                &host.dev_path(device),
                0,
                None,
            ) {
                // Absent: mkfs runs and reports the missing device itself.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Check::Pending,
                Ok(found)
                    if found.iter().any(
                        |s| matches!(s, Signature::Filesystem { uuid: Some(u), .. } if u == uuid),
                    ) =>
                {
                    Check::Done(format!("{device} already has filesystem {uuid}"))
                }
                Ok(_) => Check::Pending,
                Err(e) => Check::Refuse(format!("cannot read {device}: {e}")),
            },
            Guard::Mounted { mount } => {
                let mountinfo =
                    std::fs::read_to_string(host.path("/proc/self/mountinfo")).unwrap_or_default();
                if mountinfo
                    .lines()
                    .any(|l| l.split_whitespace().nth(4) == Some(mount.as_str()))
                {
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

/// Finds the disk a step names by path, through its by-id link when it has
/// one (kernel names can move between boots).
fn disk_by_path(host: &Host, device: &str) -> Result<disks::Disk, String> {
    let path = host.dev_path(device);
    if !path.exists() {
        return Err(format!("{device} is gone; is the disk still attached?"));
    }
    // A by-id link points at ../../sdX: one hop gives the kernel name.
    let name = match std::fs::read_link(&path) {
        Ok(target) if device.starts_with("/dev/disk/") => target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        _ => device.trim_start_matches("/dev/").to_string(),
    };
    let inventory = disks::discover(host).map_err(|e| e.to_string())?;
    inventory
        .disks
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| format!("{device} ({name}) is not a disk the system lists any more"))
}
