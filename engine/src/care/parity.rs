//! A pool's parity kept up to date: the nightly `snapraid sync`, held back
//! when it would drop the parity of many deleted files, and the weekly
//! `snapraid scrub`. Each run is recorded for `status` (SnapRAID's own
//! status has no "last sync" date).

use crate::command::{Ask, Cmd, Query, SpawnError};
use crate::machine::disks::Host;
pub use crate::machine::parity_record::{RECORD, Record, Run};
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// More removed files than this and the sync waits for a person: the
/// parity of the deleted files is what would bring them back.
/// snapraid-runner's default (`deletethreshold = 40`,
/// snapraid-runner.conf.example).
pub const DELETE_THRESHOLD: u32 = 40;

/// `snapraid diff`'s summary (cmdline/scan.c prints one `%8u <word>` line
/// for each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    pub equal: u32,
    pub added: u32,
    pub removed: u32,
    pub updated: u32,
    pub moved: u32,
    pub copied: u32,
    pub restored: u32,
}

impl Diff {
    pub fn parse(stdout: &str) -> Option<Diff> {
        let mut d = Diff::default();
        let mut seen = 0;
        for line in stdout.lines() {
            let mut words = line.split_whitespace();
            let (Some(n), Some(word), None) = (words.next(), words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u32>() else { continue };
            let slot = match word {
                "equal" => &mut d.equal,
                "added" => &mut d.added,
                "removed" => &mut d.removed,
                "updated" => &mut d.updated,
                "moved" => &mut d.moved,
                "copied" => &mut d.copied,
                "restored" => &mut d.restored,
                _ => continue,
            };
            *slot = n;
            seen += 1;
        }
        (seen == 7).then_some(d)
    }

    pub fn changed(&self) -> u32 {
        self.added + self.removed + self.updated + self.moved + self.copied + self.restored
    }
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} added, {} removed, {} updated, {} moved",
            self.added,
            self.removed,
            self.updated,
            self.moved + self.copied
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    UpToDate,
    Synced(Diff),
    /// Not synced: more files were removed than the threshold allows.
    Held(Diff),
}

#[derive(Debug, thiserror::Error)]
pub enum ParityError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("`{cmd}` failed (exit status {status}): {tail}")]
    Failed {
        cmd: String,
        status: i32,
        tail: String,
    },
    #[error("`snapraid diff` printed no summary that nasforge can read: {0}")]
    Unreadable(String),
    #[error("cannot record the run in {RECORD}: {0}")]
    Record(#[from] std::io::Error),
}

fn write_record(record: &Record, host: &Host) -> std::io::Result<()> {
    let path = host.path(RECORD);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(record).map_err(std::io::Error::other)?;
    crate::atomic_file::write(&path, text.as_bytes(), 0o644)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The last lines of what snapraid said, where it says why it stopped.
fn tail(q: &Query) -> String {
    let text = format!("{}\n{}", q.stdout, q.stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join(" / ")
}

/// Which SnapRAID configuration to use: setup's /etc/snapraid.conf unless
/// told otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conf<'a>(pub Option<&'a str>);

fn snapraid(ask: &mut dyn Ask, conf: Conf, args: &[&str]) -> Result<Query, SpawnError> {
    let mut argv = vec!["snapraid"];
    if let Some(path) = conf.0 {
        argv.extend(["-c", path]);
    }
    argv.extend_from_slice(args);
    ask.query(&Cmd::new(&argv))
}

/// `snapraid diff`, then `snapraid sync` when something changed and no
/// more files were removed than [`DELETE_THRESHOLD`] (or `allow_deletes`).
pub fn sync(
    host: &Host,
    ask: &mut dyn Ask,
    conf: Conf,
    allow_deletes: bool,
) -> Result<SyncOutcome, ParityError> {
    let mut record = Record::read(host);
    let result = sync_inner(ask, conf, allow_deletes);
    let (ok, summary) = match &result {
        Ok(SyncOutcome::UpToDate) => (true, "nothing changed since the last sync".to_string()),
        Ok(SyncOutcome::Synced(d)) => (true, format!("synced: {d}")),
        Ok(SyncOutcome::Held(d)) => (false, format!("held back: {d}")),
        Err(e) => (false, e.to_string()),
    };
    let run = Run {
        time: now(),
        ok,
        summary,
    };
    if ok {
        record.synced = Some(run.clone());
    }
    record.sync = Some(run);
    write_record(&record, host)?;
    result
}

fn sync_inner(
    ask: &mut dyn Ask,
    conf: Conf,
    allow_deletes: bool,
) -> Result<SyncOutcome, ParityError> {
    let q = snapraid(ask, conf, &["diff"])?;
    // diff: 0 nothing to sync, 2 a sync is needed, 1 an error.
    if q.status != 0 && q.status != 2 {
        return Err(ParityError::Failed {
            cmd: "snapraid diff".into(),
            status: q.status,
            tail: tail(&q),
        });
    }
    let diff = Diff::parse(&q.stdout).ok_or_else(|| ParityError::Unreadable(tail(&q)))?;
    if q.status == 0 {
        return Ok(SyncOutcome::UpToDate);
    }
    if diff.removed > DELETE_THRESHOLD && !allow_deletes {
        return Ok(SyncOutcome::Held(diff));
    }
    let q = snapraid(ask, conf, &["sync"])?;
    if q.status != 0 {
        return Err(ParityError::Failed {
            cmd: "snapraid sync".into(),
            status: q.status,
            tail: tail(&q),
        });
    }
    Ok(SyncOutcome::Synced(diff))
}

/// `snapraid scrub` with its defaults: "about the 8% of the array",
/// nothing scrubbed in the last 10 days, so weekly runs check every block
/// at least every three months (snapraid(1), scrub).
pub fn scrub(host: &Host, ask: &mut dyn Ask, conf: Conf) -> Result<(), ParityError> {
    let mut record = Record::read(host);
    let q = snapraid(ask, conf, &["scrub"])?;
    let ok = q.status == 0;
    record.scrub = Some(Run {
        time: now(),
        ok,
        summary: if ok {
            "no error found".into()
        } else {
            tail(&q)
        },
    });
    write_record(&record, host)?;
    if ok {
        Ok(())
    } else {
        Err(ParityError::Failed {
            cmd: "snapraid scrub".into(),
            status: q.status,
            tail: tail(&q),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What snapraid 12.4's diff prints after a few changes.
    const DIFF: &str = "Loading state from /var/lib/snapraid/snapraid.content...\nComparing...\nremove old/a.jpg\nadd new.txt\n\n      10 equal\n       1 added\n       1 removed\n       0 updated\n       0 moved\n       0 copied\n       0 restored\nThere are differences!\n";

    #[test]
    fn the_diff_summary_is_read_line_by_line() {
        let d = Diff::parse(DIFF).unwrap();
        assert_eq!((d.equal, d.added, d.removed, d.changed()), (10, 1, 1, 2));
        assert_eq!(Diff::parse("Comparing...\n       1 added\n"), None);
    }

    struct Answers(Vec<(i32, String)>, Vec<String>);

    impl Ask for Answers {
        fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
            self.1.push(cmd.to_string());
            let (status, stdout) = self.0.remove(0);
            Ok(Query {
                status,
                stdout,
                stderr: String::new(),
            })
        }
    }

    #[test]
    fn many_removed_files_hold_the_sync_back_and_the_record_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::new(tmp.path());
        let many = DIFF.replace("       1 removed", "      41 removed");
        let mut ask = Answers(vec![(2, many.clone())], vec![]);
        let out = sync(&host, &mut ask, Conf::default(), false).unwrap();
        assert!(matches!(out, SyncOutcome::Held(d) if d.removed == 41));
        assert_eq!(ask.1, ["snapraid diff"]);
        let record = Record::read(&host);
        assert!(!record.sync.as_ref().unwrap().ok && record.synced.is_none());
        // Told to, it syncs.
        let mut ask = Answers(vec![(2, many), (0, String::new())], vec![]);
        assert!(matches!(
            sync(&host, &mut ask, Conf::default(), true).unwrap(),
            SyncOutcome::Synced(_)
        ));
        assert_eq!(ask.1, ["snapraid diff", "snapraid sync"]);
        assert!(Record::read(&host).synced.is_some());
    }

    #[test]
    fn a_failed_sync_names_snapraids_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::new(tmp.path());
        let mut ask = Answers(
            vec![(2, DIFF.into()), (1, "WARNING! All the files previously present in disk 'd1' are now missing or rewritten!\nIf you want to 'sync' anyway, use 'snapraid --force-empty sync'.".into())],
            vec![],
        );
        let e = sync(&host, &mut ask, Conf::default(), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`snapraid sync` failed (exit status 1)") && e.contains("disk 'd1'"),
            "{e}"
        );
        let mut ask = Answers(
            vec![(0, DIFF.replace("There are differences!", "No differences"))],
            vec![],
        );
        assert_eq!(
            sync(&host, &mut ask, Conf::default(), false).unwrap(),
            SyncOutcome::UpToDate
        );
    }
}
