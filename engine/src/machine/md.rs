//! What md says about an assembled array, read from sysfs
//! (`/sys/block/mdX/md/`): its geometry, how far a rebuild or reshape has
//! got, and the state of each member; which arrays exist is listed in
//! [`mdstat`]. Every screen and report reads md through here and words
//! its progress with [`SyncProgress`]'s `Display`, so two of them never
//! disagree.

pub mod mdstat;

use crate::machine::disks::{self, Host};
use crate::machine::sysfs::{read_trimmed, read_u64};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A rebuild, reshape, resync or check under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncProgress {
    /// md's `sync_action`: `recover` (a rebuild onto a new member),
    /// `reshape`, `resync`, `check` or `repair`; for a ZFS pool, zpool's
    /// scan: `resilver` or `scrub`.
    pub action: String,
    /// Percent done, 0–100.
    pub percent: f32,
    /// Minutes left at md's current speed; None until md reports a speed.
    pub minutes_left: Option<f32>,
}

impl SyncProgress {
    /// What a person calls it: "rebuild", "reshape", "resync", "check".
    pub fn what(&self) -> &str {
        match self.action.as_str() {
            "recover" => "rebuild",
            other => other,
        }
    }

    /// The work as it goes on: "rebuilding", "scrubbing".
    pub fn doing(&self) -> &str {
        match self.action.as_str() {
            "recover" => "rebuilding",
            "resync" => "resyncing",
            "reshape" => "reshaping",
            "check" | "scrub" => "scrubbing",
            "resilver" => "resilvering",
            "repair" => "repairing",
            other => other,
        }
    }
}

/// A percentage done as every report words it: whole percents, rounded
/// down so that 100% means finished.
pub fn percent_text(percent: f32) -> String {
    format!("{:.0}%", percent.floor())
}

impl std::fmt::Display for SyncProgress {
    /// "rebuilding 45% (about 3 min left)"
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.doing(), percent_text(self.percent))?;
        if let Some(minutes) = self.minutes_left {
            write!(f, " (about {} left)", crate::clock::minutes_text(minutes))?;
        }
        Ok(())
    }
}

/// One member device md lists (`md/dev-sdb1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdMember {
    /// Kernel name of the partition, `sdb1`.
    pub device: String,
    /// md's `state` words: `in_sync`, `faulty`, `spare`, `write_mostly`...
    pub state: Vec<String>,
    /// md gave it no role (`slot` is `none`): a hot spare waiting, not a
    /// member being rebuilt, which has its slot from the start.
    pub unassigned: bool,
}

impl MdMember {
    pub fn is_faulty(&self) -> bool {
        self.state.iter().any(|s| s == "faulty")
    }

    pub fn in_sync(&self) -> bool {
        self.state.iter().any(|s| s == "in_sync")
    }
}

/// An assembled md array as sysfs shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MdState {
    /// Kernel name, `md127`.
    pub kernel: String,
    pub level: Option<String>,
    /// Members the array is made for (`raid_disks`).
    pub raid_disks: usize,
    /// Of those, how many are missing or failed (`degraded`).
    pub degraded: usize,
    pub sync: Option<SyncProgress>,
    /// A reshape md has recorded but not finished (`reshape_position` is
    /// not `none`): after a power cut it continues once assembled.
    pub reshape_pending: bool,
    pub members: Vec<MdMember>,
}

impl MdState {
    /// The array at `device` (`/dev/md/data`), if it is assembled.
    pub fn read(host: &Host, device: &str) -> Option<MdState> {
        let kernel = disks::kernel_name(host, device)?;
        let dir = md_dir(host, &kernel);
        // While a reshape is recorded md says "4 (3)": the new count, then
        // the old one in brackets.
        let raid_disks: usize = read_trimmed(&dir.join("raid_disks"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let mut members: Vec<MdMember> = disks::md_members(host, &kernel)
            .into_iter()
            .map(|device| MdMember {
                state: read_trimmed(&dir.join(format!("dev-{device}/state")))
                    .unwrap_or_default()
                    .split(',')
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect(),
                unassigned: read_trimmed(&dir.join(format!("dev-{device}/slot")))
                    .is_some_and(|s| s == "none"),
                device,
            })
            .collect();
        members.sort_by(|a, b| a.device.cmp(&b.device));
        Some(MdState {
            level: read_trimmed(&dir.join("level")),
            raid_disks,
            degraded: read_u64(&dir.join("degraded")).unwrap_or(0) as usize,
            sync: sync_progress(&dir),
            reshape_pending: read_trimmed(&dir.join("reshape_position"))
                .is_some_and(|p| p != "none"),
            members,
            kernel,
        })
    }

    pub fn member(&self, device: &str) -> Option<&MdMember> {
        self.members.iter().find(|m| m.device == device)
    }

    /// A degraded array with a spare md has not yet rebuilt onto, or a
    /// recorded reshape: md has work it will start by itself.
    pub fn work_pending(&self) -> bool {
        self.reshape_pending
            || (self.degraded > 0 && self.members.iter().any(|m| !m.is_faulty() && !m.in_sync()))
    }
}

pub fn md_dir(host: &Host, kernel: &str) -> PathBuf {
    host.path("/sys/block").join(kernel).join("md")
}

/// md's `sync_action` for the array whose md directory is `dir`: `idle`,
/// or the operation running; None for arrays without redundancy (raid0,
/// linear), which have no sync operations.
pub fn sync_action(dir: &Path) -> Option<String> {
    read_trimmed(&dir.join("sync_action"))
}

/// The last sync operation md finished on the array (`last_sync_action`)
/// and the sectors it found differing (`mismatch_cnt`). md keeps these in
/// memory only: after a boot there is none.
pub fn last_sync(dir: &Path) -> Option<(String, u64)> {
    Some((
        read_trimmed(&dir.join("last_sync_action"))?,
        read_u64(&dir.join("mismatch_cnt")).unwrap_or(0),
    ))
}

/// The operation running on the array whose md directory is `dir`; None
/// when md is idle (or about to start, `delayed`).
pub fn sync_progress(dir: &Path) -> Option<SyncProgress> {
    let action = sync_action(dir)?;
    if action == "idle" || action == "frozen" {
        return None;
    }
    let completed = read_trimmed(&dir.join("sync_completed"))?;
    let (done, total) = completed.split_once('/')?;
    let (done, total): (u64, u64) = (done.trim().parse().ok()?, total.trim().parse().ok()?);
    if total == 0 {
        return None;
    }
    // sync_speed is KiB/s over the last few seconds; sync_completed
    // counts 512-byte sectors. Before 1% is done that speed is md's first
    // seconds, before it is up to speed: a rebuild of a 256 MiB disk read
    // "0% (about 18 h 04 min left)" and was done within a minute.
    let speed = read_u64(&dir.join("sync_speed")).filter(|&s| s > 0 && done * 100 >= total);
    let left_kib = total.saturating_sub(done) / 2;
    Some(SyncProgress {
        action,
        percent: (done as f64 * 100.0 / total as f64) as f32,
        minutes_left: speed.map(|s| (left_kib as f64 / s as f64 / 60.0) as f32),
    })
}
