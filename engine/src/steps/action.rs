//! What a step does: commands to run, files to write, a GPT to lay down,
//! each printable as `plan --dry-run` shows it.

pub use crate::command::{Cmd, shell_quote};
use crate::storage::mdadm::ScanLine;
use crate::storage::partition::PartitionKind;
use crate::storage::zpool;
use serde::{Deserialize, Serialize};
use std::fmt;

/// `systemctl enable --no-reload UNITS...`, as [`Action::EnableUnits`] runs
/// it. Every unit it enables came with a package the first boot installed
/// (and reloaded systemd after), so the manager knows them all already: the
/// links only matter at the next boot, and what must run now is started by
/// name. A reload was 7 to 12 seconds of every such step on the emulated
/// board.
pub fn enable_argv<S: AsRef<str>>(units: &[S]) -> Vec<String> {
    let mut argv = vec![
        "systemctl".to_string(),
        "enable".to_string(),
        "--no-reload".to_string(),
    ];
    argv.extend(units.iter().map(|u| u.as_ref().to_string()));
    argv
}

/// `systemctl start UNITS...`, as [`Action::EnableUnits`] runs it with `now`.
pub fn start_argv<S: AsRef<str>>(units: &[S]) -> Vec<String> {
    let mut argv = vec!["systemctl".to_string(), "start".to_string()];
    argv.extend(units.iter().map(|u| u.as_ref().to_string()));
    argv
}

/// What `systemctl is-enabled` prints for a unit that needs no enabling:
/// enabled for good, an alias of one, or one without an [Install] section.
pub fn needs_no_enabling(is_enabled: &str) -> bool {
    matches!(is_enabled.trim(), "enabled" | "alias" | "static")
}

/// The command behind [`Action::Reboot`].
pub fn reboot_cmd() -> Cmd {
    Cmd::new(&["systemctl", "reboot"])
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
    /// start with one of `drop`, and the lines of the arrays in `first`
    /// first, with their words added (see [`crate::storage::mdadm::scan_lines`]).
    CaptureToFile {
        path: String,
        header: String,
        cmd: Cmd,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        drop: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        first: Vec<ScanLine>,
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
    /// Wait until md's rebuild or reshape of `device` ends, printing its
    /// progress and md's estimate every few seconds.
    FollowSync {
        device: String,
    },
    /// Wait until ZFS has resilvered `pool` onto the disk `zpool replace`
    /// gave it and detached the old one, printing the progress.
    FollowResilver {
        pool: String,
    },
    /// Rewrite the ARRAY lines of mdadm.conf from `mdadm --detail --scan`
    /// and rebuild the initramfs, only when those lines changed.
    RefreshMdadmConf,
    /// `update-initramfs -u -k all`, when an initramfs in /boot carries
    /// mdadm. One built before mdadm was installed (nasforge's first boot
    /// defers mdadm's trigger) assembles no array, so none can come up
    /// under a stale name from it; the next rebuild (a kernel update)
    /// takes the mdadm.conf written by then.
    RebuildInitramfs,
    /// `systemctl reboot`, as a step's last action: the executor records it
    /// in the journal first and stops after it (see `executor::Ended`).
    Reboot,
    /// `systemctl enable` for those of `units` that `systemctl is-enabled`
    /// does not call enabled, then with `now` `systemctl start` for all of
    /// them. Most are enabled already by their packages' scripts, and every
    /// enable asks update-rc.d (perl) about the unit's init script: seconds
    /// each on the emulated board.
    EnableUnits {
        units: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        now: bool,
    },
    /// A share's folder made below the mount of its array, pool, dataset
    /// or kept disk without following a link, then owned by `owner`'s
    /// login (`chown owner:`) and given `mode` (see [`crate::share_dir`]).
    ShareDir {
        mount: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
    },
    /// A share's ZFS dataset with its quota: `zfs create` when it is not
    /// there, else `zfs set quota=` (a quota changed by `apply`).
    ZfsDataset {
        dataset: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quota: Option<crate::size::Size>,
    },
    /// `zpool create`, tried once more with `-f` after `udevadm settle`
    /// when a disk it had just partitioned was briefly gone (see
    /// [`zpool::create_raced_udev`]); the step's guard had found every
    /// disk blank or erased by this setup, which is all `-f` skips.
    CreatePool {
        argv: Vec<String>,
    },
    /// `apt-mark hold` for every kernel package installed when the step
    /// runs (see [`crate::machine::updates::is_kernel`]): ZFS's modules
    /// are built for the kernel the board boots, and an upgrade that
    /// installed another kernel would boot it without them.
    HoldKernel,
    /// An md array another machine made, started as it is: assembled
    /// read-only from `devices` (`--run` when members are missing), its
    /// filesystem checked to be `filesystem`, and only then made writable.
    /// A different filesystem stops it again with nothing written. Never
    /// `--force` or `--update`: the superblocks keep their name and events,
    /// so the disks can go back to the old machine.
    AdoptArray {
        device: String,
        uuid: String,
        devices: Vec<String>,
        run: bool,
        filesystem: String,
    },
    /// A ZFS pool another machine made, imported as it is by its id, with
    /// nothing mounted (`-N`), into the cache file the boot imports from
    /// (`-f` when it was last used elsewhere), unless it is imported
    /// already; then its top dataset's mountpoint set to `mount` when it
    /// says otherwise. Never `-F`, `-X` or `zpool upgrade`.
    AdoptPool {
        pool: String,
        id: String,
        force: bool,
        mount: String,
    },
}

/// How an adopted pool is imported: by id, from the disks' stable links,
/// into the cache file, nothing mounted yet.
pub fn adopt_import(id: &str, force: bool) -> Cmd {
    let mut argv = vec![
        "zpool",
        "import",
        "-N",
        "-d",
        "/dev/disk/by-id",
        "-o",
        "cachefile=/etc/zfs/zpool.cache",
    ];
    if force {
        argv.push("-f");
    }
    argv.push(id);
    Cmd::new(&argv)
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
                first,
            } => {
                let without = if drop.is_empty() {
                    String::new()
                } else {
                    format!(" without {}", drop.join(", "))
                };
                write!(f, "# write {path}:\n{}", indent(header))?;
                if first.is_empty() {
                    return write!(f, "\n    | <output of `{cmd}`{without}>");
                }
                write!(f, "\n    | <output of `{cmd}`{without}, in this order:>")?;
                for line in first {
                    write!(
                        f,
                        "\n    | <its ARRAY {} line> {}",
                        line.device,
                        line.add.join(" ")
                    )?;
                }
                write!(f, "\n    | <its other lines>")
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
            Action::FollowSync { device } => {
                write!(
                    f,
                    "# follow the rebuild or reshape of {device} until it ends"
                )
            }
            Action::FollowResilver { pool } => write!(
                f,
                "# follow the resilver of {pool} until the replaced disk is detached (`zpool status {pool}`)"
            ),
            Action::RefreshMdadmConf => write!(
                f,
                "# rewrite the ARRAY lines of /etc/mdadm/mdadm.conf from `mdadm --detail --scan`; if they changed, `update-initramfs -u -k all` (when an initramfs carries mdadm)"
            ),
            Action::RebuildInitramfs => write!(
                f,
                "update-initramfs -u -k all\n    # only if an initramfs in /boot carries mdadm (lsinitramfs): one built before mdadm was installed assembles no array"
            ),
            Action::Reboot => write!(f, "{}", reboot_cmd()),
            Action::EnableUnits { units, now } => {
                let mut argv = enable_argv(units);
                if *now {
                    argv.insert(3, "--now".into());
                }
                write!(f, "{}  # unless enabled already", Cmd::new(&argv))
            }
            Action::ShareDir {
                mount,
                path,
                owner,
                mode,
            } => {
                write!(f, "mkdir -p {}", shell_quote(path))?;
                if let Some(o) = owner {
                    write!(
                        f,
                        " && chown {} {}",
                        shell_quote(&format!("{o}:")),
                        shell_quote(path)
                    )?;
                }
                if let Some(m) = mode {
                    write!(f, " && chmod {m:04o} {}", shell_quote(path))?;
                }
                write!(
                    f,
                    "\n    # each part below {mount} opened without following a link, on {mount}'s filesystem"
                )
            }
            Action::ZfsDataset { dataset, quota } => write!(
                f,
                "{}\n    # or, if {dataset} exists already: {}",
                Cmd::new(&zpool::create_dataset(dataset, *quota)),
                Cmd::new(&zpool::set_quota(dataset, *quota))
            ),
            Action::AdoptArray {
                device,
                uuid,
                devices,
                run,
                filesystem,
            } => write!(
                f,
                "mdadm --stop <any md array already holding these devices>\n{}\n{}  # must say {filesystem}, else: mdadm --stop {device}, and setup stops\n{}",
                crate::machine::existing::assemble_readonly(device, uuid, devices, *run),
                crate::machine::existing::probe_type(device),
                Cmd::new(&["mdadm", "--readwrite", device])
            ),
            Action::AdoptPool {
                pool,
                id,
                force,
                mount,
            } => write!(
                f,
                "{}  # unless '{pool}' is imported already\nzfs set mountpoint={mount} {pool}  # if its mountpoint is another",
                adopt_import(id, *force)
            ),
            Action::CreatePool { argv } => write!(
                f,
                "{}\n    # if a disk was briefly unavailable: udevadm settle, then again with -f",
                Cmd::new(argv)
            ),
            Action::HoldKernel => write!(
                f,
                "apt-mark hold <the installed linux-image-* and raspberrypi-kernel packages>\n    # read from {} when the step runs",
                crate::machine::updates::DPKG_STATUS
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_units_enabled_for_good_or_without_install_section_are_skipped() {
        // What `systemctl is-enabled` prints (systemd 252's man page).
        for said in ["enabled\n", "alias\n", "static\n"] {
            assert!(needs_no_enabling(said), "{said}");
        }
        for said in [
            "disabled\n",
            "enabled-runtime\n",
            "indirect\n",
            "masked\n",
            "generated\n",
            "",
            "Failed to get unit file state for x.service: No such file or directory\n",
        ] {
            assert!(!needs_no_enabling(said), "{said:?}");
        }
        assert_eq!(
            Action::EnableUnits {
                units: vec!["a.timer".into(), "b.timer".into()],
                now: true
            }
            .to_string(),
            "systemctl enable --no-reload --now a.timer b.timer  # unless enabled already"
        );
    }
}
