//! What the NAS looks like now: setup progress, arrays (state, degraded,
//! resync), ZFS pools (`zfs`: health, space, scrubs, errors, datasets),
//! filesystems (use), shares and disk health. Printed by `status`,
//! and written to the boot partition so a user can read it from their
//! workstation when the board has no screen. The disks' and arrays'
//! routine checks (self-tests, scrubs) are read in `checks`, USB bridges and the
//! board's power in `usb`.

mod checks;
pub mod disk_pool;
pub mod updates;
mod usb;
pub mod zfs;

pub use checks::{Scrub, SelfTest, SelfTestLog};
pub use usb::{PowerStatus, UsbDiskStatus};
pub use zfs::PoolStatus;

use crate::clock::utc;
use crate::journal::Journal;
use crate::machine::disks::Host;
use crate::machine::md::{self, SyncProgress, mdstat::Listed};
use crate::machine::mounts::Mounts;
use crate::runner::Runner;
use crate::size::Size;
use crate::steps::Cmd;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "nasforge-status.txt";

/// Writes `status` to the boot partition, the latest alerts below it when
/// there are any: the one writer of the file, for setup, `status` and the
/// alerts. A board without the partition (or a read-only one) still works,
/// so the caller only reports a failure.
pub fn write_file(host: &Host, status: &Status) -> std::io::Result<PathBuf> {
    let mut text = status.render();
    let alerts = crate::machine::recent_alerts(host, 10);
    if !alerts.is_empty() {
        text = format!(
            "{text}\nLatest alerts (all in {}):\n{}\n",
            crate::paths::ALERTS_LOG,
            alerts.join("\n")
        );
    }
    let path = crate::machine::boot_dir(host).join(FILE_NAME);
    crate::atomic_file::write(&path, text.as_bytes(), 0o644)?;
    Ok(path)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub setup: Setup,
    pub arrays: Vec<ArrayStatus>,
    /// The ZFS pools setup made, as zpool and zfs report them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolStatus>,
    /// The pools of disks (mergerfs and SnapRAID) setup made.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disk_pools: Vec<disk_pool::DiskPoolStatus>,
    pub filesystems: Vec<FilesystemStatus>,
    pub shares: Vec<ShareStatus>,
    pub disks: Vec<DiskHealth>,
    pub usb_disks: Vec<UsbDiskStatus>,
    pub power: PowerStatus,
    pub updates: updates::UpdatesStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Setup {
    NotStarted,
    /// Planning refused or the recipe is wrong: nothing was changed.
    NotPossible {
        problems: Vec<String>,
    },
    InProgress {
        done: usize,
        total: usize,
        next: String,
    },
    Failed {
        step: String,
        error: String,
        done: usize,
        total: usize,
    },
    Complete {
        steps: usize,
        finished: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrayStatus {
    /// md's kernel name, e.g. `md127`.
    pub device: String,
    /// The name from /dev/md/<name>, when there is one.
    pub name: Option<String>,
    pub active: bool,
    pub level: Option<String>,
    /// Members md expects and members working (`[3/2]`).
    pub expected: usize,
    pub working: usize,
    pub degraded: bool,
    /// The rebuild, reshape, resync or scrub md is running.
    pub sync: Option<SyncProgress>,
    /// None for levels without redundancy to scrub, or where md says nothing.
    pub scrub: Option<Scrub>,
    /// Hot spares: members md holds idle, `(S)` in mdstat.
    pub spares: usize,
    /// The md arrays it is made of (a raid0 over raid6 legs: raid60), by
    /// their names when they have one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub legs: Vec<String>,
    /// Its legs that lack something, with what ("data-0 degraded (5 of 7
    /// members)"): a raid0 on top runs and looks whole while a leg under it
    /// has lost disks, so its own state would say healthy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub weak_legs: Vec<String>,
    /// The disks setup put in it that are not working in it now, in words
    /// ("sdc (QEMU HARDDISK, serial uas-docs1)"): filled in by [`collect`]
    /// from the plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilesystemStatus {
    pub array: String,
    pub mount: String,
    pub mounted: bool,
    pub size: Option<Size>,
    pub used: Option<Size>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShareStatus {
    pub name: String,
    pub path: String,
    pub smb_users: Vec<String>,
    /// Anyone may read it over SMB without a password.
    pub smb_guest: bool,
    pub nfs_clients: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskHealth {
    pub disk: String,
    pub device: String,
    /// None when smartctl could not say (not installed, USB bridge without
    /// SMART passthrough).
    pub passed: Option<bool>,
    pub temperature_c: Option<i64>,
    pub power_on_hours: Option<i64>,
    pub self_test: Option<SelfTestLog>,
}

impl ArrayStatus {
    /// The array as md lists it and what md is doing to it; its name, legs'
    /// names, weak legs and scrub are filled in by [`read_arrays`].
    fn new(listed: Listed, sync: Option<SyncProgress>) -> ArrayStatus {
        ArrayStatus {
            degraded: listed.degraded(),
            device: listed.device,
            name: None,
            active: listed.active,
            level: listed.level,
            expected: listed.expected,
            working: listed.working,
            sync,
            scrub: None,
            spares: listed.spares,
            legs: listed.legs,
            weak_legs: Vec::new(),
            missing: Vec::new(),
        }
    }
}

/// Summary of smartctl's JSON output (`smartctl --json -a`).
pub fn parse_smartctl(disk: &str, device: &str, json: &str) -> DiskHealth {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    DiskHealth {
        disk: disk.to_string(),
        device: device.to_string(),
        passed: v.pointer("/smart_status/passed").and_then(|p| p.as_bool()),
        temperature_c: v.pointer("/temperature/current").and_then(|t| t.as_i64()),
        power_on_hours: v.pointer("/power_on_time/hours").and_then(|h| h.as_i64()),
        self_test: checks::last_self_test(&v),
    }
}

fn statvfs(path: &Path) -> Option<(Size, Size)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a properly sized buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    let size = st.f_blocks as u64 * frsize;
    let used = size - st.f_bfree as u64 * frsize;
    Some((Size(size), Size(used)))
}

/// The md arrays in /proc/mdstat, with their names from /dev/md and what
/// md is doing and last scrubbed from sysfs.
pub fn read_arrays(host: &Host) -> Vec<ArrayStatus> {
    let mut arrays: Vec<ArrayStatus> = md::mdstat::listed(host)
        .into_iter()
        .map(|listed| {
            let sync = md::sync_progress(&md::md_dir(host, &listed.device));
            ArrayStatus::new(listed, sync)
        })
        .collect();
    let names = crate::machine::disks::md_names(host);
    let name_of = |device: &str| {
        names
            .iter()
            .find(|(dev, _)| *dev == device)
            .map(|(_, n)| n.clone())
    };
    mark_weak_legs(&mut arrays, name_of);
    for a in &mut arrays {
        a.name = name_of(&a.device);
        a.legs = a
            .legs
            .iter()
            .map(|leg| name_of(leg).unwrap_or_else(|| leg.clone()))
            .collect();
        let redundant = !matches!(a.level.as_deref(), Some("raid0" | "linear"));
        a.scrub = redundant
            .then(|| checks::read_scrub(host, &a.device))
            .flatten();
    }
    arrays
}

/// Fills `weak_legs` of every array made of legs from the legs' own state
/// (legs named by device in `arrays`, as parsed from mdstat).
fn mark_weak_legs(arrays: &mut [ArrayStatus], name_of: impl Fn(&str) -> Option<String>) {
    let weak: Vec<(String, String)> = arrays
        .iter()
        .filter(|a| !a.active || a.degraded || a.sync.is_some())
        .map(|a| {
            let name = name_of(&a.device).unwrap_or_else(|| a.device.clone());
            (a.device.clone(), format!("{name} {}", a.state_words()))
        })
        .collect();
    for a in arrays.iter_mut() {
        a.weak_legs = a
            .legs
            .iter()
            .filter_map(|leg| weak.iter().find(|(dev, _)| dev == leg))
            .map(|(_, words)| words.clone())
            .collect();
    }
}

/// Names the planned members each degraded md array lacks, when exactly as
/// many as md counts missing are: after a replacement the plan lists a disk
/// that left the array, and a guess would name the wrong one.
fn name_missing_members(host: &Host, plan: &crate::planner::Plan, arrays: &mut [ArrayStatus]) {
    for a in arrays.iter_mut().filter(|a| a.degraded) {
        let Some(planned) = plan
            .arrays
            .iter()
            .find(|p| a.name.as_deref() == Some(p.spec.name.as_str()))
        else {
            continue;
        };
        let md = md::md_dir(host, &a.device);
        let missing: Vec<String> = planned
            .members
            .iter()
            .filter(|m| !m.spare)
            .filter(|m| {
                let part = crate::storage::partition::member_device(planned, m);
                let working = crate::machine::host::kernel_name(host, &part).is_some_and(|k| {
                    std::fs::read_to_string(md.join(format!("dev-{k}/state")))
                        .is_ok_and(|state| !state.contains("faulty"))
                });
                !working
            })
            .map(|m| format!("the disk that was {}", m.disk.words()))
            .collect();
        if missing.len() == a.expected - a.working {
            a.missing = missing;
        }
    }
}

fn disk_health(disk: &crate::machine::disks::Disk, runner: &mut dyn Runner) -> DiskHealth {
    let device = disk.stable_path();
    match runner.query(&Cmd::new(&["smartctl", "--json", "-a", &device])) {
        Ok(q) => parse_smartctl(&disk.name, &device, &q.stdout),
        Err(_) => parse_smartctl(&disk.name, &device, ""),
    }
}

/// Collects the status from the journal (what was planned) and the system.
pub fn collect(host: &Host, journal: Option<&Journal>, runner: &mut dyn Runner) -> Status {
    let setup = match journal {
        None => Setup::NotStarted,
        Some(j) if j.is_complete() => Setup::Complete {
            steps: j.steps.len(),
            finished: j.finished.unwrap_or(0),
        },
        Some(j) => match &j.failure {
            Some(f) => Setup::Failed {
                step: f.step.clone(),
                error: f.error.clone(),
                done: j.done.len(),
                total: j.steps.len(),
            },
            None => Setup::InProgress {
                done: j.done.len(),
                total: j.steps.len(),
                next: j.steps[j.next_step()].title.clone(),
            },
        },
    };
    let mut arrays = read_arrays(host);
    if let Some(j) = journal {
        name_missing_members(host, &j.plan, &mut arrays);
    }
    let mounts = Mounts::read(&host.root);
    let mut filesystems = Vec::new();
    let mut shares = Vec::new();
    let mut disks = Vec::new();
    if let Some(j) = journal {
        for a in &j.plan.arrays {
            let mount = &a.spec.mount;
            let mounted = mounts.is_mounted(mount);
            let usage = if mounted {
                statvfs(&host.path(mount))
            } else {
                None
            };
            filesystems.push(FilesystemStatus {
                array: a.spec.name.clone(),
                mount: mount.clone(),
                mounted,
                size: usage.map(|u| u.0),
                used: usage.map(|u| u.1),
            });
            for m in &a.members {
                disks.push(disk_health(&m.disk, runner));
            }
        }
        // The SSDs the system is mirrored over: their health as the arrays'.
        if let Some(m) = &j.plan.system_mirror {
            disks.push(disk_health(&m.system, runner));
            disks.push(disk_health(&m.disk, runner));
        }
        for s in &j.plan.shares {
            shares.push(ShareStatus {
                name: s.name.clone(),
                path: s.path.clone(),
                smb_users: s.smb.as_ref().map(|x| x.users.clone()).unwrap_or_default(),
                smb_guest: s.smb.as_ref().is_some_and(|x| x.guest),
                nfs_clients: s
                    .nfs
                    .as_ref()
                    .map(|x| x.clients.0.clone())
                    .unwrap_or_default(),
            });
        }
    }
    let pools = journal.map_or_else(Vec::new, |j| zfs::read(&j.plan, runner));
    let disk_pools = journal.map_or_else(Vec::new, |j| disk_pool::read(host, &j.plan, runner));
    let inventory = crate::machine::disks::discover(host).unwrap_or_default();
    let (usb_disks, power) = usb::read(host, &inventory, runner);
    let updates = updates::read(host, runner);
    Status {
        setup,
        arrays,
        pools,
        disk_pools,
        filesystems,
        shares,
        disks,
        usb_disks,
        power,
        updates,
    }
}

impl Status {
    pub fn render(&self) -> String {
        let mut out = String::from("nasforge NAS status\n\n");
        out += &self.setup.render();
        section(&mut out, "Arrays", &self.arrays, ArrayStatus::render);
        section(&mut out, "ZFS pools", &self.pools, PoolStatus::render);
        section(
            &mut out,
            "Pools of disks",
            &self.disk_pools,
            disk_pool::DiskPoolStatus::render,
        );
        section(
            &mut out,
            "Filesystems",
            &self.filesystems,
            FilesystemStatus::render,
        );
        section(&mut out, "Shares", &self.shares, ShareStatus::render);
        section(
            &mut out,
            "Disk health (SMART)",
            &self.disks,
            DiskHealth::render,
        );
        section(
            &mut out,
            "USB disks",
            &self.usb_disks,
            UsbDiskStatus::render,
        );
        section(&mut out, "Power", &self.power.lines(), String::clone);
        section(&mut out, "Updates", &self.updates.lines(), String::clone);
        out
    }
}

/// A titled list of lines, left out when there is nothing to list.
fn section<T>(out: &mut String, title: &str, items: &[T], line: impl Fn(&T) -> String) {
    if !items.is_empty() {
        *out += &format!("\n{title}:\n");
    }
    for item in items {
        *out += &line(item);
    }
}

impl Setup {
    fn render(&self) -> String {
        match self {
            Setup::NotStarted => "Setup: not started\n".to_string(),
            Setup::NotPossible { problems } => {
                let mut s = "Setup: NOT POSSIBLE, nothing was changed:\n".to_string();
                for p in problems {
                    s += &format!("  - {p}\n");
                }
                s
            }
            Setup::InProgress { done, total, next } => {
                format!("Setup: in progress, {done} of {total} steps done; next: {next}\n")
            }
            Setup::Failed {
                step,
                error,
                done,
                total,
            } => {
                format!(
                    "Setup: FAILED at step {} of {total} ({step}): {error}\nIt resumes from that step on the next boot or `nasforge-setup --unattended`.\n",
                    done + 1
                )
            }
            Setup::Complete { steps, finished } => format!(
                "Setup: complete ({steps} steps, finished {})\n",
                utc(*finished)
            ),
        }
    }
}

impl ArrayStatus {
    fn render(&self) -> String {
        let name = self
            .name
            .as_ref()
            .map(|n| format!("{n} ({})", self.device))
            .unwrap_or_else(|| self.device.clone());
        let level = self.level.as_deref().unwrap_or("?");
        let legs = match self.legs.as_slice() {
            [] => String::new(),
            legs => format!(" of {}", legs.join(" and ")),
        };
        let mut out = format!("  {name}: {level}{legs}, {}", self.state_words());
        if self.name.as_deref() == Some(crate::spec::SYSTEM_MIRROR_NAME) {
            out += ", the system's own mirror";
        }
        match self.spares {
            0 => {}
            1 => out += ", 1 hot spare",
            n => out += &format!(", {n} hot spares"),
        }
        if let Some(scrub) = &self.scrub {
            out += &format!("; {}", scrub.render());
        }
        out + "\n"
    }

    /// "healthy", "degraded (2 of 3 members)", "rebuilding 45% (about 3
    /// min left)", "reshaping ...", joined by ", " when several hold; an
    /// array over legs that lack something says which in place of healthy.
    pub fn state_words(&self) -> String {
        let mut words = Vec::new();
        if !self.active {
            words.push("INACTIVE".to_string());
        } else if !self.weak_legs.is_empty() {
            words.extend(self.weak_legs.iter().cloned());
        } else if self.degraded {
            let missing = match self.missing.as_slice() {
                [] => String::new(),
                disks => format!(", missing {}", disks.join(" and ")),
            };
            words.push(format!(
                "degraded ({} of {} members){missing}",
                self.working, self.expected
            ));
        } else if self.sync.as_ref().is_none_or(|s| s.action != "resync") {
            words.push("healthy".to_string());
        }
        if let Some(sync) = &self.sync {
            words.push(sync.to_string());
        }
        words.join(", ")
    }
}

impl FilesystemStatus {
    fn render(&self) -> String {
        match (self.mounted, self.size, self.used) {
            (true, Some(size), Some(used)) => {
                let pct = (used.0 * 100).checked_div(size.0).unwrap_or(0);
                format!(
                    "  {} ({}): {used} of {size} used ({pct}%)\n",
                    self.mount, self.array
                )
            }
            (true, _, _) => format!("  {} ({}): mounted\n", self.mount, self.array),
            (false, _, _) => format!("  {} ({}): NOT MOUNTED\n", self.mount, self.array),
        }
    }
}

impl ShareStatus {
    fn render(&self) -> String {
        let mut how = Vec::new();
        if self.smb_guest {
            how.push("SMB read-only for guests".into());
        }
        if !self.smb_users.is_empty() {
            how.push(format!("SMB for {}", self.smb_users.join(", ")));
        }
        if !self.nfs_clients.is_empty() {
            how.push(format!("NFS to {}", self.nfs_clients.join(" ")));
        }
        format!("  {}: {} ({})\n", self.name, self.path, how.join("; "))
    }
}

impl DiskHealth {
    fn render(&self) -> String {
        let verdict = match self.passed {
            Some(true) => "passed".to_string(),
            Some(false) => "FAILING: replace this disk".to_string(),
            None => "unknown (no SMART data)".to_string(),
        };
        let temp = self
            .temperature_c
            .map(|t| format!(", {t} °C"))
            .unwrap_or_default();
        let hours = self
            .power_on_hours
            .map(|h| format!(", {h} hours on"))
            .unwrap_or_default();
        let test = self
            .self_test
            .as_ref()
            .map(|t| format!("; {}", t.render()))
            .unwrap_or_default();
        format!("  {}: {verdict}{temp}{hours}{test}\n", self.disk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_file_carries_the_latest_alerts_whoever_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        std::fs::create_dir_all(host.path("/boot/firmware")).unwrap();
        let mut runner = crate::runner::RecordingRunner::default();
        let status = collect(&host, None, &mut runner);
        let file = host.path("/boot/firmware/nasforge-status.txt");

        assert_eq!(write_file(&host, &status).unwrap(), file);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), status.render());

        let log = host.path(crate::paths::ALERTS_LOG);
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let lines: Vec<String> = (1..=12).map(|n| format!("alert {n}")).collect();
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        write_file(&host, &status).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(&status.render()), "{text}");
        assert!(
            text.ends_with(&format!(
                "\nLatest alerts (all in {}):\n{}\n",
                crate::paths::ALERTS_LOG,
                lines[2..].join("\n")
            )),
            "the last ten: {text}"
        );
    }

    /// The arrays in `mdstat`, idle unless a test says what md is doing.
    fn parse_mdstat(mdstat: &str) -> Vec<ArrayStatus> {
        md::mdstat::parse(mdstat)
            .into_iter()
            .map(|listed| ArrayStatus::new(listed, None))
            .collect()
    }

    fn doing(action: &str, percent: f32, minutes_left: f32) -> Option<SyncProgress> {
        Some(SyncProgress {
            action: action.into(),
            percent,
            minutes_left: Some(minutes_left),
        })
    }

    #[test]
    fn the_status_says_how_long_a_resync_has_left() {
        let status = Status {
            setup: Setup::NotStarted,
            arrays: vec![ArrayStatus {
                sync: doing("resync", 8.5, 75.2),
                ..parse_mdstat(
                    "md127 : active raid5 sdc1[3] sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n      [=>...................]  resync =  8.5% (89088/1046528) finish=75.2min speed=29696K/sec\n",
                )
                .remove(0)
            }],
            pools: vec![],
            disk_pools: vec![],
            filesystems: vec![],
            shares: vec![],
            disks: vec![],
            usb_disks: vec![],
            power: PowerStatus {
                throttled: None,
                warnings: vec![],
            },
            updates: updates::UpdatesStatus {
                kernel: None,
                held: vec![],
                guarded: false,
                waiting: vec![],
                automatic: false,
                last_upgrade: None,
            },
        };
        assert!(
            status
                .render()
                .contains("md127: raid5, resyncing 8% (about 1 h 16 min left)"),
            "{}",
            status.render()
        );
    }

    #[test]
    fn an_array_is_healthy_degraded_rebuilding_or_reshaping() {
        let words = |mdstat: &str| parse_mdstat(mdstat)[0].state_words();
        let words_doing = |mdstat: &str, sync: Option<SyncProgress>| {
            ArrayStatus {
                sync,
                ..parse_mdstat(mdstat).remove(0)
            }
            .state_words()
        };
        assert_eq!(
            words(
                "md127 : active raid5 sdc1[2] sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n"
            ),
            "healthy"
        );
        assert_eq!(
            words(
                "md127 : active raid5 sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n"
            ),
            "degraded (2 of 3 members)"
        );
        assert_eq!(
            words_doing(
                "md127 : active raid5 sdc1[3] sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      [========>............]  recovery = 45.0% (471040/1046528) finish=2.6min speed=3627K/sec\n",
                doing("recover", 45.0, 2.6)
            ),
            "degraded (2 of 3 members), rebuilding 45% (about 3 min left)"
        );
        assert_eq!(
            words_doing(
                "md127 : active raid5 sdd1[4] sdc1[3] sdb1[1] sda1[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/4] [UUUU]\n      [==>..................]  reshape = 12.5% (130816/1046528) finish=10.1min speed=1507K/sec\n",
                doing("reshape", 12.5, 10.1)
            ),
            "healthy, reshaping 12% (about 11 min left)"
        );
    }

    #[test]
    fn spares_and_the_legs_of_a_nested_array_are_shown() {
        let mdstat = "Personalities : [raid0] [raid6] [raid5] [raid4]\n\
md125 : active raid0 md126[1] md127[0]\n      46861787136 blocks super 1.2 2560k chunks\n      \n\
md126 : active raid6 sdp1[7](S) sdo1[6] sdn1[5] sdm1[4] sdl1[3] sdk1[2] sdj1[1] sdi1[0]\n      19530645504 blocks super 1.2 level 6, 512k chunk, algorithm 2 [7/7] [UUUUUUU]\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\n\
md127 : active raid6 sdh1[6] sdg1[5] sdf1[4] sde1[3] sdd1[2] sdc1[1] sdb1[0]\n      19530645504 blocks super 1.2 level 6, 512k chunk, algorithm 2 [7/7] [UUUUUUU]\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n";
        let mut arrays = parse_mdstat(mdstat);
        assert_eq!(
            arrays
                .iter()
                .map(|a| (a.device.as_str(), a.spares, a.legs.clone()))
                .collect::<Vec<_>>(),
            [
                ("md125", 0, vec!["md127".to_string(), "md126".to_string()]),
                ("md126", 1, vec![]),
                ("md127", 0, vec![]),
            ]
        );
        arrays[0].name = Some("data".into());
        arrays[0].legs = vec!["data-0".into(), "data-1".into()];
        arrays[1].name = Some("data-1".into());
        assert_eq!(
            arrays[0].render(),
            "  data (md125): raid0 of data-0 and data-1, healthy\n"
        );
        assert_eq!(
            arrays[1].render(),
            "  data-1 (md126): raid6, healthy, 1 hot spare\n"
        );
    }

    /// /proc/mdstat of the emulated PC booted without two disks of data-0.
    #[test]
    fn a_nested_array_says_which_leg_lacks_disks() {
        let mdstat = "Personalities : [raid6] [raid5] [raid4] [raid0]\n\
md125 : active raid0 md127[0] md126[1]\n      10420224 blocks super 1.2 2560k chunks\n      \n\
md126 : active raid6 sde1[0] sdg1[3] sdi1[7](S) sdk1[1] sdh1[4] sdf1[2] sda1[5] sdj1[6]\n      5222400 blocks super 1.2 level 6, 512k chunk, algorithm 2 [7/7] [UUUUUUU]\n      bitmap: 0/1 pages [0KB], 65536KB chunk\n\n\
md127 : active raid6 sdm1[1] sdb1[2] sdc1[3] sdd1[4] sdl1[5]\n      5222400 blocks super 1.2 level 6, 512k chunk, algorithm 2 [7/5] [_UUUUU_]\n      bitmap: 1/1 pages [4KB], 65536KB chunk\n\nunused devices: <none>\n";
        let mut arrays = parse_mdstat(mdstat);
        let names = [("md125", "data"), ("md126", "data-1"), ("md127", "data-0")];
        let name_of = |dev: &str| {
            names
                .iter()
                .find(|(d, _)| *d == dev)
                .map(|(_, n)| n.to_string())
        };
        mark_weak_legs(&mut arrays, name_of);
        arrays[0].name = Some("data".into());
        arrays[0].legs = vec!["data-0".into(), "data-1".into()];
        assert_eq!(
            arrays[0].render(),
            "  data (md125): raid0 of data-0 and data-1, data-0 degraded (5 of 7 members)\n"
        );
        assert!(arrays[1].weak_legs.is_empty() && arrays[2].weak_legs.is_empty());
        arrays[0].active = false;
        assert_eq!(
            arrays[0].state_words(),
            "INACTIVE",
            "a stopped raid0 says so before anything about its legs"
        );
    }

    #[test]
    fn summarises_smartctl_json() {
        let json = r#"{"smartctl":{"exit_status":0},"smart_status":{"passed":true},"temperature":{"current":34},"power_on_time":{"hours":12873}}"#;
        let h = parse_smartctl("sda", "/dev/sda", json);
        assert_eq!(
            (h.passed, h.temperature_c, h.power_on_hours),
            (Some(true), Some(34), Some(12873))
        );
        assert_eq!(parse_smartctl("sdb", "/dev/sdb", "").passed, None);
    }
}
