//! A pool of disks (mergerfs + SnapRAID) as status shows it: each disk's
//! use or absence, the files a missing disk held (from SnapRAID's content
//! file, as of the last sync), and the last sync and scrub.

use crate::clock::utc;
use crate::command::{Ask, Cmd};
use crate::machine::disks::Host;
use crate::machine::mounts::Mounts;
use crate::machine::parity_record::{Record, Run};
use crate::planner::Plan;
use crate::size::Size;
use crate::spec::Level;
use crate::storage::pool;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskPoolStatus {
    pub name: String,
    pub mount: String,
    pub mounted: bool,
    pub disks: Vec<PoolDisk>,
    pub last_sync: Option<Run>,
    /// The last sync that finished: a restore brings files back as of it.
    pub synced: Option<Run>,
    pub last_scrub: Option<Run>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolDisk {
    /// SnapRAID's name: d1, parity, a kept disk's name.
    pub name: String,
    pub role: &'static str,
    pub mount: String,
    /// The disk as setup found it: model, serial, size.
    pub disk: String,
    pub mounted: bool,
    pub size: Option<Size>,
    pub used: Option<Size>,
    /// A data disk that is not mounted: the files SnapRAID lists on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_files: Option<Vec<String>>,
}

/// Each pool of the plan, looked at now.
pub fn read(host: &Host, plan: &Plan, ask: &mut dyn Ask) -> Vec<DiskPoolStatus> {
    let mounts = Mounts::read(&host.root);
    let record = Record::read(host);
    plan.arrays
        .iter()
        .filter(|a| a.spec.level == Level::Pool)
        .map(|array| {
            let mut listed: Option<Vec<(String, String)>> = None;
            let disks = pool::branches(array, "")
                .into_iter()
                .map(|b| {
                    let mounted = mounts.is_mounted(&b.mount);
                    let usage = mounted
                        .then(|| super::statvfs(&host.path(&b.mount)))
                        .flatten();
                    let summary = array
                        .members
                        .iter()
                        .map(|m| &m.disk)
                        .chain(array.joined.iter().map(|k| &k.disk))
                        .find(|d| d.name == b.disk)
                        .map(|d| d.summary())
                        .unwrap_or_else(|| b.disk.clone());
                    let missing_files = (!mounted && b.parity.is_none()).then(|| {
                        let all = listed.get_or_insert_with(|| list_files(ask));
                        all.iter()
                            .filter(|(disk, _)| *disk == b.name)
                            .map(|(_, path)| path.clone())
                            .collect()
                    });
                    PoolDisk {
                        role: match (b.parity, b.kept) {
                            (Some(_), _) => "parity",
                            (None, true) => "data, kept",
                            (None, false) => "data",
                        },
                        name: b.name,
                        mount: b.mount,
                        disk: summary,
                        mounted,
                        size: usage.map(|u| u.0),
                        used: usage.map(|u| u.1),
                        missing_files,
                    }
                })
                .collect();
            DiskPoolStatus {
                name: array.spec.name.clone(),
                mount: array.spec.mount.clone(),
                mounted: mounts.is_mounted(&array.spec.mount),
                disks,
                last_sync: record.sync.clone(),
                synced: record.synced.clone(),
                last_scrub: record.scrub.clone(),
            }
        })
        .collect()
}

/// Every file SnapRAID's content file lists, with its disk: the log lines
/// `file:DISK:PATH:SIZE:SEC:NSEC:INODE` of `snapraid list` (read-only; it
/// needs no disk but the content file's). `:` and line breaks in a path
/// are escaped in the log (`\d`, `\n`).
fn list_files(ask: &mut dyn Ask) -> Vec<(String, String)> {
    let Ok(q) = ask.query(&Cmd::new(&["snapraid", "-l", ">&1", "list"])) else {
        return Vec::new();
    };
    parse_list(&q.stdout)
}

fn parse_list(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("file:")?;
            let (disk, rest) = rest.split_once(':')?;
            let fields: Vec<&str> = rest.rsplitn(5, ':').collect();
            let path = fields.get(4)?;
            Some((
                disk.to_string(),
                path.replace("\\d", ":")
                    .replace("\\n", "\n")
                    .replace("\\\\", "\\"),
            ))
        })
        .collect()
}

fn run_line(what: &str, run: &Option<Run>) -> String {
    match run {
        None => format!("  last {what}: never\n"),
        Some(r) => format!(
            "  last {what}: {} {}: {}\n",
            utc(r.time),
            if r.ok { "ok" } else { "FAILED" },
            r.summary
        ),
    }
}

impl DiskPoolStatus {
    pub fn render(&self) -> String {
        let mut out = format!(
            "  '{}' at {}: {}\n",
            self.name,
            self.mount,
            if self.mounted {
                "mounted (mergerfs)"
            } else {
                "NOT MOUNTED"
            }
        );
        for d in &self.disks {
            let state = match (d.mounted, d.size, d.used) {
                (true, Some(size), Some(used)) => format!("{used} used of {size}"),
                (true, _, _) => "mounted".to_string(),
                (false, _, _) => "NOT MOUNTED".to_string(),
            };
            out += &format!(
                "    {} ({}, {}) at {}: {state}\n",
                d.name, d.role, d.disk, d.mount
            );
            if let Some(files) = &d.missing_files {
                let shown: Vec<&str> = files.iter().take(5).map(String::as_str).collect();
                let more = files.len().saturating_sub(shown.len());
                out += &format!(
                    "      its {} file(s) as of the last sync are missing from the pool{}{}; a new disk gets them back from parity (`sudo snapraid -d {} fix`); do not sync until then\n",
                    files.len(),
                    if shown.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", shown.join(", "))
                    },
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    },
                    d.name
                );
            }
        }
        out += &run_line("sync", &self.last_sync);
        if self.last_sync.as_ref().is_some_and(|r| !r.ok) {
            out += &run_line("finished sync", &self.synced);
        }
        out += &run_line("scrub", &self.last_scrub);
        // diff reads every disk's folders (and wakes them): status, which
        // every alert refreshes, leaves it to the person.
        out += "  files changed since the last sync: `sudo snapraid diff` lists them\n";
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapraids_list_log_names_each_files_disk() {
        let log = "content:/var/lib/snapraid/snapraid.content\nfile:d1:a.txt:100000:1796429513:472637887:2\n      100000 2026/12/05 00:11 a.txt\nfile:d2:sub/b\\dc.txt:100000:1796429513:475243023:3\nsummary:file_count:2\n";
        assert_eq!(
            parse_list(log),
            [
                ("d1".to_string(), "a.txt".to_string()),
                ("d2".to_string(), "sub/b:c.txt".to_string())
            ]
        );
    }
}
