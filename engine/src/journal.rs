//! The setup journal (/var/lib/nasforge/journal.json): the plan, its steps,
//! and how far execution got. Written atomically after every step, so a
//! power cut resumes at the step that was running, and a finished setup
//! re-run does nothing.

use crate::atomic_file;
use crate::planner::Plan;
use crate::spec::DeviceRecipe;
use crate::steps::{Context, Step};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const PATH: &str = "/var/lib/nasforge/journal.json";

/// The setup journal on this host.
pub fn path(host: &crate::machine::disks::Host) -> std::path::PathBuf {
    host.path(PATH)
}

/// The setup journal of a board whose setup finished: what care after
/// setup and `apply` start from.
pub fn finished(host: &crate::machine::disks::Host) -> Result<Journal, Unfinished> {
    match Journal::load(&path(host))? {
        None => Err(Unfinished::NeverRun(path(host))),
        Some(j) if !j.is_complete() => Err(Unfinished::Stopped {
            done: j.done.len(),
            total: j.steps.len(),
        }),
        Some(j) => Ok(j),
    }
}

/// Why [`finished`] found no finished setup: the one wording of it for
/// every command that starts from a finished setup.
#[derive(Debug, thiserror::Error)]
pub enum Unfinished {
    #[error("{} does not exist: this NAS was never set up, so there is nothing to change or look after. Run `sudo nasforge-setup` (or `--unattended`) to set it up", .0.display())]
    NeverRun(std::path::PathBuf),
    #[error(
        "setup has not finished ({done} of {total} steps done): run `sudo nasforge-setup --unattended` to finish it first"
    )]
    Stopped { done: usize, total: usize },
    #[error(transparent)]
    Journal(#[from] JournalError),
}
/// 2: guards name the planned disk and the array's members.
const VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub version: u32,
    /// The recipe sections the plan was made from: a different recipe on a
    /// later boot must not silently continue this plan.
    pub recipe: DeviceRecipe,
    pub context: Context,
    pub plan: Plan,
    pub steps: Vec<Step>,
    /// One record per finished step, in order: the next step to run is
    /// `done.len()`.
    pub done: Vec<StepRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub started: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<u64>,
    /// The last reboot a step asked for; kept once the step is done, as
    /// the record of why the board rebooted during setup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot: Option<Reboot>,
}

/// A reboot a step asked for (its last action is `Action::Reboot`),
/// written before the reboot is requested. After the reboot the step's
/// guard must find its work in effect; if it does not, the step is refused
/// instead of rebooting again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reboot {
    pub step: String,
    pub index: usize,
    /// Why, as the step's title says it.
    pub why: String,
    /// The kernel's boot id (/proc/sys/kernel/random/boot_id) when the
    /// reboot was asked for: a different one later means the board did
    /// reboot. None where the kernel did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    pub at: u64,
}

/// Where the kernel gives the id of the running boot.
pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    /// None when the step ran; the guard's reason when it found the work
    /// already done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_done: Option<String>,
    pub at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub step: String,
    pub index: usize,
    pub error: String,
    pub at: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot read the journal {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the journal {path} is damaged ({why}), so how far setup got is unknown and nothing was run. Check the disks (`nasforge-setup status`, `cat /proc/mdstat`), then move it aside (`mv {path} {path}.damaged`) to plan again"
    )]
    Damaged { path: String, why: String },
    #[error(
        "the journal {path} has version {found}, this nasforge-setup reads version {reads}: finish the work with the nasforge-setup that started it, or check the disks and move the journal aside to plan again"
    )]
    Version {
        path: String,
        found: u64,
        reads: u32,
    },
    #[error("cannot write the journal {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Journal {
    pub fn new(recipe: DeviceRecipe, context: Context, plan: Plan, steps: Vec<Step>) -> Journal {
        Journal {
            version: VERSION,
            recipe,
            context,
            plan,
            steps,
            done: Vec::new(),
            failure: None,
            started: now(),
            finished: None,
            reboot: None,
        }
    }

    pub fn next_step(&self) -> usize {
        self.done.len()
    }

    pub fn is_complete(&self) -> bool {
        self.done.len() == self.steps.len()
    }

    /// None when there is no journal (setup never started).
    pub fn load(path: &Path) -> Result<Option<Journal>, JournalError> {
        load_versioned(path, VERSION)
    }

    pub fn save(&self, path: &Path) -> Result<(), JournalError> {
        save(self, path)
    }
}

/// Reads a journal written by [`save`] whose `version` must be `version`;
/// None when the file does not exist.
pub(crate) fn load_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    version: u32,
) -> Result<Option<T>, JournalError> {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(JournalError::Read {
                path: shown,
                source,
            });
        }
    };
    let damaged = |why: String| JournalError::Damaged {
        path: shown.clone(),
        why,
    };
    // A journal cut short (a full disk, a card that lost its last
    // write) is damaged, not of another version.
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| damaged(e.to_string()))?;
    let found = value
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| damaged("it records no version".into()))?;
    if found != u64::from(version) {
        return Err(JournalError::Version {
            path: shown,
            found,
            reads: version,
        });
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| damaged(e.to_string()))
}

/// Writes a journal atomically, readable by root only.
pub(crate) fn save<T: Serialize>(value: &T, path: &Path) -> Result<(), JournalError> {
    let text = serde_json::to_vec_pretty(value).expect("a journal is plain data");
    atomic_file::write(path, &text, 0o600).map_err(|source| JournalError::Write {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::Alert;
    use crate::steps::Context;

    fn saved() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.json");
        let plan = Plan {
            arrays: vec![],
            shares: vec![],
            alert: Alert::Mail("root".into()),
            spin_down: crate::spec::SpinDown::Off,
            kept: vec![],
            system_mirror: None,
        };
        let context = Context {
            hostname: "nas".into(),
            system_uuid: None,
            fs_uuids: vec![],
        };
        Journal::new(DeviceRecipe::default(), context, plan, vec![])
            .save(&path)
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (dir, path, bytes)
    }

    #[test]
    fn a_truncated_journal_is_reported_as_damaged_with_its_path_and_what_to_do() {
        let (_dir, path, bytes) = saved();
        assert!(Journal::load(&path).unwrap().is_some());
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let err = Journal::load(&path).unwrap_err();
            assert!(
                matches!(err, JournalError::Damaged { .. }),
                "cut at {cut}: {err}"
            );
            let text = err.to_string();
            assert!(
                text.contains(&format!("the journal {} is damaged", path.display()))
                    && text.contains("move it aside")
                    && !text.contains("version"),
                "{text}"
            );
        }
        std::fs::write(&path, "{\"steps\": []}").unwrap();
        let text = Journal::load(&path).unwrap_err().to_string();
        assert!(
            text.contains("is damaged (it records no version)"),
            "{text}"
        );
    }

    #[test]
    fn a_journal_of_another_version_says_so() {
        let (_dir, path, bytes) = saved();
        let text = String::from_utf8(bytes).unwrap().replacen(
            &format!("\"version\": {VERSION}"),
            "\"version\": 1",
            1,
        );
        std::fs::write(&path, text).unwrap();
        let err = Journal::load(&path).unwrap_err();
        assert!(
            matches!(err, JournalError::Version { found: 1, .. }),
            "{err}"
        );
    }
}
