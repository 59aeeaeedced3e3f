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
const VERSION: u32 = 1;

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
}

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
        "the journal {path} is damaged ({source}); move it aside to plan again, after checking the disks"
    )]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("the journal {path} has version {found}, this nasforge-setup reads version {VERSION}")]
    Version { path: String, found: u32 },
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
        let version = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("version")?.as_u64())
            .unwrap_or(0) as u32;
        if version != VERSION {
            return Err(JournalError::Version {
                path: shown,
                found: version,
            });
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| JournalError::Parse {
                path: shown,
                source,
            })
    }

    pub fn save(&self, path: &Path) -> Result<(), JournalError> {
        let text = serde_json::to_vec_pretty(self).expect("the journal is plain data");
        atomic_file::write(path, &text, 0o600).map_err(|source| JournalError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}
