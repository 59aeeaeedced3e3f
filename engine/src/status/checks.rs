//! The disks' and arrays' routine checks as status shows them: the last SMART
//! self-test of each disk (from smartctl's JSON) and the last scrub of each
//! md array (from md's sysfs attributes).

use crate::machine::disks::Host;
use crate::machine::md;
use serde::Serialize;

/// One entry of a disk's self-test log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelfTest {
    /// `short`, `extended`, `conveyance`, ... in smartctl's words, shortened.
    pub kind: String,
    /// smartctl's words for the outcome ("Completed without error").
    pub result: String,
    /// None while a test runs or where smartctl does not say.
    pub passed: Option<bool>,
    /// The disk's power-on hours when the test ran.
    pub hours: Option<i64>,
}

/// What the disk's self-test log holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SelfTestLog {
    /// The log was read and no test has ever run.
    Empty,
    Last(SelfTest),
}

/// The newest self-test in `smartctl --json -a` output; None when the
/// output has no ATA self-test log (no SMART, a bridge that hides it, or
/// an NVMe disk, whose log smartctl reports in another shape).
pub fn last_self_test(v: &serde_json::Value) -> Option<SelfTestLog> {
    let log = v.pointer("/ata_smart_self_test_log/standard")?;
    // smartctl lists the newest test first.
    let Some(entry) = log.pointer("/table/0") else {
        return Some(SelfTestLog::Empty);
    };
    Some(SelfTestLog::Last(SelfTest {
        kind: kind_word(text(entry, "/type/string")),
        result: text(entry, "/status/string"),
        passed: entry.pointer("/status/passed").and_then(|p| p.as_bool()),
        hours: entry.pointer("/lifetime_hours").and_then(|h| h.as_i64()),
    }))
}

fn text(v: &serde_json::Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(|s| s.as_str())
        .unwrap_or("?")
        .to_string()
}

/// "Short offline" → "short", "Extended captive" → "extended".
fn kind_word(smartctl: String) -> String {
    smartctl
        .split_whitespace()
        .next()
        .map(str::to_lowercase)
        .unwrap_or(smartctl)
}

impl SelfTestLog {
    pub fn render(&self) -> String {
        match self {
            SelfTestLog::Empty => "last self-test: none yet".into(),
            SelfTestLog::Last(t) => {
                let outcome = match t.passed {
                    Some(true) => "passed".to_string(),
                    Some(false) => format!("FAILED ({})", t.result),
                    None => t.result.to_lowercase(),
                };
                let when = t
                    .hours
                    .map(|h| format!(" at {h} hours"))
                    .unwrap_or_default();
                format!("last self-test: {}, {outcome}{when}", t.kind)
            }
        }
    }
}

/// An md array's scrub (`check` or `repair`) as md remembers it. md keeps
/// this in memory only, so it starts again from nothing at each boot.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Scrub {
    /// No scrub since the array was assembled at boot.
    Never,
    Running {
        action: String,
        percent: Option<f32>,
    },
    Finished {
        action: String,
        /// md's `mismatch_cnt`: sectors that differed between copies or
        /// from parity.
        mismatches: u64,
    },
}

const SCRUBS: [&str; 2] = ["check", "repair"];

/// The scrub of md array `device` (`md127`); None when md has no sync
/// operations for it (raid0 and linear have nothing to scrub).
pub fn read_scrub(host: &Host, device: &str) -> Option<Scrub> {
    let dir = md::md_dir(host, device);
    let now = md::sync_action(&dir)?;
    if SCRUBS.contains(&now.as_str()) {
        return Some(Scrub::Running {
            percent: md::sync_progress(&dir).map(|p| p.percent),
            action: now,
        });
    }
    match md::last_sync(&dir) {
        Some((last, mismatches)) if SCRUBS.contains(&last.as_str()) => Some(Scrub::Finished {
            action: last,
            mismatches,
        }),
        _ => Some(Scrub::Never),
    }
}

impl Scrub {
    pub fn render(&self) -> String {
        match self {
            Scrub::Never => "last scrub: never since boot".into(),
            Scrub::Running {
                action,
                percent: Some(p),
            } => format!("last scrub: {action} running {}", md::percent_text(*p)),
            Scrub::Running {
                action,
                percent: None,
            } => format!("last scrub: {action} running"),
            Scrub::Finished {
                action,
                mismatches: 0,
            } => format!("last scrub: {action}, 0 mismatches"),
            Scrub::Finished { action, mismatches } => {
                format!("last scrub: {action}, {mismatches} sectors MISMATCHED")
            }
        }
    }
}

#[cfg(test)]
mod tests;
