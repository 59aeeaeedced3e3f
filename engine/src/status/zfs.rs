//! Each pool's status (health, space, last scrub, errors, the shares'
//! datasets), from zpool's and zfs's output as `machine::zfs_report`
//! parses it.
//!
//! The formats are OpenZFS 2.1's (Debian bookworm), read from
//! cmd/zpool/zpool_main.c at zfs-2.1.11: `status_callback` prints the
//! `pool:`, `state:`, `status:`, `action:`, `see:`, `scan:` and `errors:`
//! lines, `print_status_config` one tab-indented row per vdev ("\t" +
//! two spaces per level + name, state, READ, WRITE, CKSUM, then a note
//! such as "was /dev/..."), and `print_scan_scrub_resilver_status` the scan
//! line ("scrub repaired 0B in 00:00:01 with 0 errors on <ctime>",
//! `secs_to_dhms` giving "1 days 02:03:04" past a day). `-P` prints each
//! leaf by its full path, a whole-disk member with its `-part1`; `-p`
//! prints exact error counts. `zpool list -H -p` and `zfs list -H -p` are
//! tab-separated, sizes in bytes, a quota of none as 0.

use crate::machine::disks::Disk;
pub use crate::machine::zfs_report::*;
use crate::planner::Plan;
use crate::runner::Runner;
use crate::size::Size;
use crate::steps::Cmd;
use crate::storage::zpool;
use serde::Serialize;

/// A pool as `status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolStatus {
    pub name: String,
    pub mount: String,
    /// zpool's health: ONLINE, DEGRADED, FAULTED, UNAVAIL, ...; None when
    /// the pool is not imported.
    pub health: Option<String>,
    pub size: Option<Size>,
    pub alloc: Option<Size>,
    pub free: Option<Size>,
    pub scan: Option<Scan>,
    /// Each disk or vdev not ONLINE, or with errors, in words.
    pub problems: Vec<String>,
    /// Each hot spare and what it is doing, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<String>,
    /// zpool's `errors:` line.
    pub data_errors: Option<String>,
    pub datasets: Vec<DatasetStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatasetStatus {
    pub share: String,
    pub dataset: String,
    /// None when the dataset is not there.
    pub used: Option<Size>,
    pub quota: Option<Size>,
}

/// Each pool of the plan, as zpool and zfs report it now.
pub fn read(plan: &Plan, runner: &mut dyn Runner) -> Vec<PoolStatus> {
    let mut out = Vec::new();
    let datasets = zpool::share_datasets(plan);
    for array in plan.arrays.iter().filter(|a| a.spec.is_zfs()) {
        let pool = array.spec.name.as_str();
        let query = |runner: &mut dyn Runner, argv: &[&str]| {
            runner
                .query(&Cmd::new(argv))
                .ok()
                .filter(|q| q.status == 0)
                .map(|q| q.stdout)
                .unwrap_or_default()
        };
        let space = parse_zpool_list(&query(
            runner,
            &[
                "zpool",
                "list",
                "-H",
                "-p",
                "-o",
                "name,size,alloc,free,health",
                pool,
            ],
        ))
        .into_iter()
        .find(|p| p.name == pool);
        let report = parse_zpool_status(&query(runner, &["zpool", "status", "-P", "-p", pool]));
        let listed = parse_zfs_list(&query(
            runner,
            &[
                "zfs",
                "list",
                "-H",
                "-p",
                "-r",
                "-o",
                "name,used,avail,quota,mountpoint",
                pool,
            ],
        ));
        let members: Vec<&Disk> = array.members.iter().map(|m| &m.disk).collect();
        out.push(PoolStatus {
            name: pool.to_string(),
            mount: array.spec.mount.clone(),
            health: space
                .as_ref()
                .map(|s| s.health.clone())
                .or_else(|| report.as_ref().map(|r| r.state.clone())),
            size: space.as_ref().map(|s| s.size),
            alloc: space.as_ref().map(|s| s.alloc),
            free: space.as_ref().map(|s| s.free),
            scan: report.as_ref().map(|r| r.scan.clone()),
            problems: report
                .as_ref()
                .map(|r| problems(r, &members))
                .unwrap_or_default(),
            spares: report
                .as_ref()
                .map(|r| spares(r, &members))
                .unwrap_or_default(),
            data_errors: report.as_ref().and_then(|r| r.errors.clone()),
            datasets: datasets
                .iter()
                .filter(|(_, d)| d.split('/').next() == Some(pool))
                .map(|(share, dataset)| {
                    let found = listed.iter().find(|l| l.name == *dataset);
                    DatasetStatus {
                        share: share.name.clone(),
                        dataset: dataset.clone(),
                        used: found.map(|f| f.used),
                        quota: found.and_then(|f| f.quota),
                    }
                })
                .collect(),
        });
    }
    out
}

/// The rows that need attention, a disk named by model and serial when
/// its path is one of the planned members'.
pub fn problems(report: &PoolReport, members: &[&Disk]) -> Vec<String> {
    let mut out = Vec::new();
    for v in report.vdevs.iter().skip(1) {
        let errors = v.read + v.write + v.cksum > 0;
        if v.state == "ONLINE" && !errors {
            continue;
        }
        // A disk zpool cannot open is named as it was at setup: its
        // kernel name may be another disk's now.
        let gone = v.note.as_deref().is_some_and(|n| n.starts_with("was "));
        let who = match v.path() {
            Some(path) if gone => format!("the disk that was {}", disk_words(path, members)),
            Some(path) => disk_words(path, members),
            None => v.name.clone(),
        };
        let mut words = vec![v.state.clone()];
        if errors {
            words.push(format!(
                "{} read, {} write, {} checksum errors",
                v.read, v.write, v.cksum
            ));
        }
        if let Some(note) = &v.note {
            words.push(note.clone());
        }
        out.push(format!("{who}: {}", words.join(", ")));
    }
    out
}

/// Each hot spare, named as [`problems`] names disks: waiting, standing in
/// for a failed disk, or (a spare that failed itself) its state.
pub fn spares(report: &PoolReport, members: &[&Disk]) -> Vec<String> {
    report
        .spares
        .iter()
        .map(|v| {
            let who = v
                .path()
                .map_or(v.name.clone(), |path| disk_words(path, members));
            let what = match v.state.as_str() {
                "AVAIL" => "available".to_string(),
                "INUSE" => "in use, standing in for a failed disk".to_string(),
                other => match &v.note {
                    Some(note) => format!("{other}, {note}"),
                    None => other.to_string(),
                },
            };
            format!("{who}: {what}")
        })
        .collect()
}

fn disk_words(path: &str, members: &[&Disk]) -> String {
    let whole = whole_disk_path(path);
    match members.iter().find(|d| d.is_named_by(&whole)) {
        Some(d) => d.words(),
        None => path.to_string(),
    }
}

impl PoolStatus {
    pub fn render(&self) -> String {
        let health = match self.health.as_deref() {
            None => "NOT IMPORTED (`sudo zpool import` lists the pools it can find)".to_string(),
            Some("ONLINE") => "healthy".to_string(),
            Some(other) => other.to_string(),
        };
        let mut out = format!("  {} ({}): {health}", self.name, self.mount);
        if let (Some(size), Some(alloc), Some(free)) = (self.size, self.alloc, self.free) {
            out += &format!(", {alloc} of {size} allocated, {free} free");
        }
        out += "\n";
        if let Some(scan) = &self.scan {
            out += &format!("    {}\n", scan.render());
        }
        for p in &self.problems {
            out += &format!("    {p}\n");
        }
        for spare in &self.spares {
            out += &format!("    hot spare {spare}\n");
        }
        if let Some(e) = &self.data_errors {
            out += &format!("    errors: {e}\n");
        }
        for d in &self.datasets {
            let quota = d
                .quota
                .map(|q| format!(" of a {} quota", q.exact()))
                .unwrap_or_default();
            out += &match d.used {
                Some(used) => format!(
                    "    share '{}' ({}): {used} used{quota}\n",
                    d.share, d.dataset
                ),
                None => format!("    share '{}' ({}): NO DATASET\n", d.share, d.dataset),
            };
        }
        out
    }
}

impl Scan {
    pub fn render(&self) -> String {
        match self {
            Scan::None => "never scrubbed".to_string(),
            Scan::Finished {
                what,
                repaired,
                seconds,
                errors,
                on,
            } => {
                // A small pool's scrub takes zpool's `00:00:00`.
                let took = if *seconds < 60 {
                    "under a minute".to_string()
                } else {
                    crate::clock::minutes_text(*seconds as f32 / 60.0)
                };
                let did = if what == "scrub" {
                    "last scrub"
                } else {
                    "last resilver"
                };
                format!("{did}: {on}, took {took}, repaired {repaired}, {errors} errors")
            }
            Scan::Running {
                what,
                percent,
                paused,
                since,
            } => {
                let doing = match (what.as_str(), paused) {
                    (_, true) => "scrub paused",
                    ("scrub", _) => "scrub in progress",
                    _ => "resilver in progress",
                };
                match percent {
                    Some(p) => format!("{doing} {p:.0}% (since {since})"),
                    None => format!("{doing} (since {since})"),
                }
            }
            Scan::Canceled { what, on } => format!("{what} canceled on {on}"),
            Scan::Other(text) => text.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
