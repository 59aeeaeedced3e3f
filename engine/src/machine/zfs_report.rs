//! ZFS pools as `zpool` and `zfs` report them: the parsers of their output.
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

use crate::size::Size;
use serde::Serialize;

/// One line of `zpool list -H -p -o name,size,alloc,free,health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpace {
    pub name: String,
    pub size: Size,
    pub alloc: Size,
    pub free: Size,
    pub health: String,
}

pub fn parse_zpool_list(text: &str) -> Vec<PoolSpace> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [name, size, alloc, free, health] = f[..] else {
                return None;
            };
            let bytes = |s: &str| s.trim().parse().ok().map(Size);
            Some(PoolSpace {
                name: name.to_string(),
                size: bytes(size)?,
                alloc: bytes(alloc)?,
                free: bytes(free)?,
                health: health.trim().to_string(),
            })
        })
        .collect()
}

/// One line of `zfs list -H -p -o name,used,avail,quota,mountpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub name: String,
    pub used: Size,
    pub avail: Size,
    /// None when the dataset has no quota (`0` with `-p`).
    pub quota: Option<Size>,
    pub mountpoint: String,
}

pub fn parse_zfs_list(text: &str) -> Vec<Dataset> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [name, used, avail, quota, mountpoint] = f[..] else {
                return None;
            };
            let bytes = |s: &str| s.trim().parse::<u64>().ok();
            Some(Dataset {
                name: name.to_string(),
                used: Size(bytes(used)?),
                avail: Size(bytes(avail)?),
                quota: bytes(quota).filter(|&q| q > 0).map(Size),
                mountpoint: mountpoint.trim().to_string(),
            })
        })
        .collect()
}

/// What `zpool status -P -p POOL` says of one pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReport {
    pub pool: String,
    pub state: String,
    /// The `status:` paragraph, when the pool has a problem to explain.
    pub problem: Option<String>,
    pub scan: Scan,
    /// The config rows in order, the pool itself first.
    pub vdevs: Vec<Vdev>,
    /// The rows of the `spares` section: hot spares, AVAIL or INUSE
    /// (standing in for a failed disk, which then also shows in `vdevs`).
    pub spares: Vec<Vdev>,
    /// "No known data errors", "2 data errors, use '-v' for a list".
    pub errors: Option<String>,
}

/// The `scan:` line: the last or running scrub or resilver.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "scan", rename_all = "snake_case")]
pub enum Scan {
    None,
    Finished {
        /// "scrub" or "resilver".
        what: String,
        /// As zpool prints it ("0B", "1.50M").
        repaired: String,
        seconds: u64,
        errors: u64,
        /// ctime(3) in the board's time zone, as zpool prints it.
        on: String,
    },
    Running {
        what: String,
        percent: Option<f32>,
        paused: bool,
        since: String,
    },
    Canceled {
        what: String,
        on: String,
    },
    /// A line this parser does not know, kept as it is.
    Other(String),
}

/// One row of the config: a vdev, or a disk in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vdev {
    /// The pool, a group (`raidz1-0`, `mirror-1`) or a disk's path; a
    /// missing disk shows as its GUID, its last path in `note`.
    pub name: String,
    /// 0 for the pool, 1 for its top-level vdevs, 2 for their disks.
    pub level: usize,
    pub state: String,
    pub read: u64,
    pub write: u64,
    pub cksum: u64,
    /// What zpool adds after the counts: "was /dev/...", "cannot open",
    /// "(resilvering)".
    pub note: Option<String>,
}

impl Vdev {
    /// The path of a disk row, or of the disk a missing row was.
    pub fn path(&self) -> Option<&str> {
        if self.name.starts_with('/') {
            return Some(&self.name);
        }
        self.note
            .as_deref()
            .and_then(|n| n.strip_prefix("was "))
            .map(str::trim)
            .filter(|p| p.starts_with('/'))
    }
}

impl PoolReport {
    /// The rows with no row below them: the disks.
    pub fn disks(&self) -> Vec<&Vdev> {
        self.vdevs
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                v.level > 0
                    && self
                        .vdevs
                        .get(i + 1)
                        .is_none_or(|next| next.level <= v.level)
            })
            .map(|(_, v)| v)
            .collect()
    }

    /// Every disk the pool holds: its vdevs' and its hot spares.
    pub fn every_disk(&self) -> Vec<&Vdev> {
        let mut out = self.disks();
        out.extend(&self.spares);
        out
    }
}

pub fn parse_zpool_status(text: &str) -> Option<PoolReport> {
    let mut pool = None;
    let mut state = String::new();
    let mut problem: Option<String> = None;
    let mut scan: Vec<String> = Vec::new();
    let mut vdevs = Vec::new();
    let mut spares = Vec::new();
    // `print_spares` heads its rows with a line of its own, "\tspares".
    let mut in_spares = false;
    let mut errors = None;
    // The key whose paragraph a tab-indented line continues.
    let mut key = "";
    let mut in_config = false;
    for line in text.lines() {
        if in_config {
            if let Some(row) = line.strip_prefix('\t') {
                if !row.starts_with(' ') && row.split_whitespace().count() == 1 {
                    in_spares = row.trim_end() == "spares";
                    continue;
                }
                if let Some(v) = parse_row(row) {
                    if in_spares {
                        spares.push(v);
                    } else {
                        vdevs.push(v);
                    }
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            in_config = false;
        }
        if let Some(more) = line.strip_prefix('\t') {
            match key {
                "status" => {
                    if let Some(p) = problem.as_mut() {
                        *p += " ";
                        *p += more.trim();
                    }
                }
                "scan" => scan.push(more.trim().to_string()),
                _ => {}
            }
            continue;
        }
        let Some((k, value)) = line.trim_start().split_once(':') else {
            continue;
        };
        key = match k {
            "pool" | "state" | "status" | "scan" | "config" | "errors" => k,
            _ => "",
        };
        let value = value.trim();
        match key {
            "pool" => pool = Some(value.to_string()),
            "state" => state = value.to_string(),
            "status" => problem = Some(value.to_string()),
            "scan" => scan = vec![value.to_string()],
            "config" => in_config = true,
            "errors" => errors = Some(value.to_string()),
            _ => {}
        }
    }
    Some(PoolReport {
        pool: pool?,
        state,
        problem,
        scan: parse_scan(&scan),
        vdevs,
        spares,
        errors,
    })
}

/// `zpool status -P` of every imported pool: one report per `pool:`.
pub fn parse_zpool_status_all(text: &str) -> Vec<PoolReport> {
    let mut chunks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("pool:") || chunks.is_empty() {
            chunks.push(String::new());
        }
        let chunk = chunks.last_mut().expect("pushed above");
        chunk.push_str(line);
        chunk.push('\n');
    }
    chunks
        .iter()
        .filter_map(|c| parse_zpool_status(c))
        .collect()
}

/// One pool `zpool import` (no pool named) lists as importable: what
/// `show_import` prints, read from the pool's labels without importing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportListing {
    pub pool: String,
    /// The pool's GUID, in decimal: what `zpool import <id>` takes.
    pub id: String,
    /// ONLINE, DEGRADED, UNAVAIL, FAULTED.
    pub state: String,
    /// The `status:` paragraph, when zpool has a problem to explain.
    pub status: Option<String>,
    /// The `action:` paragraph: how (or whether) it can be imported.
    pub action: Option<String>,
    /// The config rows of its data vdevs, the pool itself first; rows
    /// under a class heading (`logs`, `cache`, `spares`) are in `other`.
    pub vdevs: Vec<Vdev>,
    /// Headings of the classes below the data vdevs, with their rows'
    /// names: `("logs", ["sdd"])`.
    pub other: Vec<(String, Vec<String>)>,
}

/// `zpool import` with no pool: one entry per `pool:` paragraph. The
/// heading words are right-aligned (`   pool:`, `     id:`), paragraphs go
/// on after a tab, and config rows have a name and a state but no counts.
pub fn parse_zpool_import(text: &str) -> Vec<ImportListing> {
    let mut out: Vec<ImportListing> = Vec::new();
    let mut key = "";
    let mut in_config = false;
    for line in text.lines() {
        if let Some((k, value)) = line.trim_start().split_once(':')
            && !line.starts_with('\t')
            && matches!(
                k,
                "pool" | "id" | "state" | "status" | "action" | "see" | "config" | "comment"
            )
        {
            in_config = false;
            key = k;
            let value = value.trim().to_string();
            if k == "pool" {
                out.push(ImportListing {
                    pool: value,
                    id: String::new(),
                    state: String::new(),
                    status: None,
                    action: None,
                    vdevs: Vec::new(),
                    other: Vec::new(),
                });
                continue;
            }
            let Some(entry) = out.last_mut() else {
                continue;
            };
            match k {
                "id" => entry.id = value,
                "state" => entry.state = value,
                "status" => entry.status = Some(value),
                "action" => entry.action = Some(value),
                "config" => in_config = true,
                _ => {}
            }
            continue;
        }
        let Some(entry) = out.last_mut() else {
            continue;
        };
        let Some(row) = line.strip_prefix('\t') else {
            continue;
        };
        if in_config {
            if !row.starts_with(' ') && row.split_whitespace().count() == 1 {
                entry.other.push((row.trim().to_string(), Vec::new()));
            } else if let Some(v) = parse_row(row) {
                match entry.other.last_mut() {
                    Some((_, names)) => names.push(v.name),
                    None => entry.vdevs.push(v),
                }
            }
            continue;
        }
        let paragraph = match key {
            "status" => entry.status.as_mut(),
            "action" => entry.action.as_mut(),
            _ => None,
        };
        if let Some(p) = paragraph {
            *p += " ";
            *p += row.trim();
        }
    }
    out.retain(|e| !e.id.is_empty());
    out
}

/// A config row without its leading tab; None for the NAME header.
fn parse_row(row: &str) -> Option<Vdev> {
    let indent = row.len() - row.trim_start_matches(' ').len();
    let mut words = row.split_whitespace();
    let name = words.next()?;
    let state = words.next()?;
    if name == "NAME" && state == "STATE" {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let counts: Vec<u64> = rest.iter().take(3).map_while(|w| w.parse().ok()).collect();
    let note = rest[counts.len()..].join(" ");
    let count = |i: usize| counts.get(i).copied().unwrap_or(0);
    Some(Vdev {
        name: name.to_string(),
        level: indent / 2,
        state: state.to_string(),
        read: count(0),
        write: count(1),
        cksum: count(2),
        note: (!note.is_empty()).then_some(note),
    })
}

fn parse_scan(lines: &[String]) -> Scan {
    let Some(first) = lines.first() else {
        return Scan::None;
    };
    if first.is_empty() || first == "none requested" {
        return Scan::None;
    }
    for what in ["scrub", "resilver"] {
        let done = if what == "scrub" {
            "scrub repaired "
        } else {
            "resilvered "
        };
        if let Some(rest) = first.strip_prefix(done)
            && let Some((repaired, rest)) = rest.split_once(" in ")
            && let Some((time, rest)) = rest.split_once(" with ")
            && let Some((errors, on)) = rest.split_once(" errors on ")
            && let (Some(seconds), Ok(errors)) = (dhms(time), errors.parse())
        {
            return Scan::Finished {
                what: what.into(),
                repaired: repaired.to_string(),
                seconds,
                errors,
                on: on.trim().to_string(),
            };
        }
        for (running, paused) in [(" in progress since ", false), (" paused since ", true)] {
            if let Some(since) = first.strip_prefix(&format!("{what}{running}")) {
                return Scan::Running {
                    what: what.into(),
                    percent: lines[1..].iter().find_map(|l| percent_done(l)),
                    paused,
                    since: since.trim().to_string(),
                };
            }
        }
        if let Some(on) = first.strip_prefix(&format!("{what} canceled on ")) {
            return Scan::Canceled {
                what: what.into(),
                on: on.trim().to_string(),
            };
        }
    }
    Scan::Other(first.clone())
}

/// "0B repaired, 22.85% done, 02:57:13 to go" → 22.85.
fn percent_done(line: &str) -> Option<f32> {
    let (before, _) = line.split_once("% done")?;
    before.rsplit([' ', ',']).next()?.parse().ok()
}

/// `secs_to_dhms`: "00:00:01", "1 days 02:03:04".
fn dhms(text: &str) -> Option<u64> {
    let (days, clock) = match text.split_once(" days ") {
        Some((d, c)) => (d.trim().parse::<u64>().ok()?, c),
        None => (0, text),
    };
    let parts: Vec<u64> = clock
        .trim()
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = parts[..] else {
        return None;
    };
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// The whole disk a vdev's path names: zpool shows a whole-disk member
/// by its data partition (`…-part1`, `/dev/sdb1`, `/dev/nvme0n1p1`).
pub fn whole_disk_path(path: &str) -> String {
    if path.starts_with("/dev/disk/") {
        return match path.rsplit_once("-part") {
            Some((disk, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                disk.to_string()
            }
            _ => path.to_string(),
        };
    }
    let trimmed = path.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() == path.len() {
        return path.to_string();
    }
    // nvme0n1p1 → nvme0n1, mmcblk0p1 → mmcblk0; sdb1 → sdb.
    match trimmed.strip_suffix('p') {
        Some(disk) if disk.ends_with(|c: char| c.is_ascii_digit()) => disk.to_string(),
        _ => trimmed.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vdevs_path_leads_back_to_its_disk() {
        assert_eq!(
            whole_disk_path("/dev/disk/by-id/wwn-0x50014ee2b0000001-part1"),
            "/dev/disk/by-id/wwn-0x50014ee2b0000001"
        );
        assert_eq!(
            whole_disk_path("/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000001-part1"),
            "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000001"
        );
        assert_eq!(whole_disk_path("/dev/sdb1"), "/dev/sdb");
        assert_eq!(whole_disk_path("/dev/nvme0n1p1"), "/dev/nvme0n1");
        assert_eq!(whole_disk_path("/dev/sdb"), "/dev/sdb");
        assert_eq!(
            whole_disk_path("/dev/disk/by-id/usb-JMicron_Generic"),
            "/dev/disk/by-id/usb-JMicron_Generic"
        );
    }

    #[test]
    fn other_scan_lines() {
        let scan =
            |lines: &[&str]| parse_scan(&lines.iter().map(|l| l.to_string()).collect::<Vec<_>>());
        assert_eq!(
            scan(&["resilvered 1.21T in 05:10:02 with 0 errors on Mon Nov 30 15:25:02 2026"]),
            Scan::Finished {
                what: "resilver".into(),
                repaired: "1.21T".into(),
                seconds: 5 * 3600 + 10 * 60 + 2,
                errors: 0,
                on: "Mon Nov 30 15:25:02 2026".into(),
            }
        );
        assert_eq!(
            scan(&[
                "scrub paused since Tue Dec  1 08:00:00 2026",
                "scrub started on Tue Dec  1 03:00:00 2026",
                "1.00T scanned, 900G issued, 3.50T total",
                "0B repaired, 25.11% done"
            ]),
            Scan::Running {
                what: "scrub".into(),
                percent: Some(25.11),
                paused: true,
                since: "Tue Dec  1 08:00:00 2026".into(),
            }
        );
        assert_eq!(
            scan(&["scrub canceled on Tue Dec  1 09:00:00 2026"]),
            Scan::Canceled {
                what: "scrub".into(),
                on: "Tue Dec  1 09:00:00 2026".into()
            }
        );
        assert!(parse_zpool_status("cannot open 'tank': no such pool\n").is_none());
    }
}
