//! The journal of one operation after setup: a disk replaced, an array
//! grown, a changed recipe applied. Like the setup journal it holds the
//! steps and how far they got, written after every step, so a power cut
//! resumes the operation at the next boot (`nasforge-resume.service` runs
//! `nasforge-setup resume`). Only one operation runs at a time: a new one is
//! refused while another is unfinished. A finished operation is moved to
//! `HISTORY` under its start time, so `status` can say what was done last.

use crate::executor::{self, Event, ExecError};
use crate::journal::{self, Failure, JournalError, StepRecord};
use crate::machine::disks::Host;
use crate::runner::Runner;
use crate::steps::Step;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const PATH: &str = "/var/lib/nasforge/operation.json";
pub const HISTORY: &str = "/var/lib/nasforge/operations";
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Replace,
    Grow,
    Apply,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Replace => "replace",
            Kind::Grow => "grow",
            Kind::Apply => "apply",
        })
    }
}

executor::progress!(Operation);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub version: u32,
    pub kind: Kind,
    /// One line for logs and status: "Replace the missing member of 'data'
    /// with sdd (WDC WD40EFRX (WD-1234))".
    pub title: String,
    /// The plan as it was shown before anything ran.
    pub plan: String,
    pub steps: Vec<Step>,
    pub done: Vec<StepRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub started: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot: Option<journal::Reboot>,
}

#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    #[error(
        "another operation is unfinished: {title} ({done} of {total} steps done; {path}). Run `sudo nasforge-setup resume` to finish it first"
    )]
    Busy {
        title: String,
        done: usize,
        total: usize,
        path: PathBuf,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("cannot keep the finished operation in {}: {source}", .path.display())]
    History {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Operation {
    pub fn new(kind: Kind, title: String, plan: String, steps: Vec<Step>) -> Operation {
        Operation {
            version: VERSION,
            kind,
            title,
            plan,
            steps,
            done: Vec::new(),
            failure: None,
            started: journal::now(),
            finished: None,
            reboot: None,
        }
    }

    pub fn is_complete(&self) -> bool {
        self.done.len() == self.steps.len()
    }

    pub fn load(path: &std::path::Path) -> Result<Option<Operation>, JournalError> {
        journal::load_versioned(path, VERSION)
    }

    pub fn save(&self, path: &std::path::Path) -> Result<(), JournalError> {
        journal::save(self, path)
    }
}

pub fn path(host: &Host) -> PathBuf {
    host.path(PATH)
}

/// The unfinished operation, if there is one.
pub fn pending(host: &Host) -> Result<Option<Operation>, JournalError> {
    Ok(Operation::load(&path(host))?.filter(|op| !op.is_complete()))
}

/// The most recently finished operation, from `HISTORY`.
pub fn last_finished(host: &Host) -> Option<Operation> {
    let dir = host.path(HISTORY);
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    Operation::load(names.last()?).ok().flatten()
}

/// Saves `op` as the pending operation (refusing when another one is
/// unfinished), runs it, and moves it to the history once every step is
/// done. A failure leaves it pending: `resume` retries the failed step.
pub fn start(
    host: &Host,
    op: Operation,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<Operation, OperationError> {
    if let Some(busy) = pending(host)? {
        return Err(OperationError::Busy {
            title: busy.title,
            done: busy.done.len(),
            total: busy.steps.len(),
            path: path(host),
        });
    }
    let mut op = op;
    op.save(&path(host))?;
    finish(host, &mut op, runner, on_event)?;
    Ok(op)
}

/// Continues the pending operation where it stopped; None when there is
/// none.
pub fn resume(
    host: &Host,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<Option<Operation>, OperationError> {
    let Some(mut op) = pending(host)? else {
        return Ok(None);
    };
    finish(host, &mut op, runner, on_event)?;
    Ok(Some(op))
}

fn finish(
    host: &Host,
    op: &mut Operation,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), OperationError> {
    let at = path(host);
    executor::execute(op, &at, host, runner, on_event)?;
    let history = host.path(HISTORY);
    let kept = history.join(format!("{}-{}.json", op.started, op.kind));
    std::fs::create_dir_all(&history)
        .and_then(|()| std::fs::rename(&at, &kept))
        .map_err(|source| OperationError::History {
            path: kept.clone(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::RecordingRunner;
    use crate::steps::{Action, Cmd, Guard};

    fn step(id: &str) -> Step {
        Step {
            id: id.into(),
            title: format!("do {id}"),
            guard: Guard::Always,
            actions: vec![Action::Run(Cmd::new(&["true", id]))],
            always: vec![],
        }
    }

    #[test]
    fn a_finished_operation_moves_to_the_history_and_a_second_one_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let mut runner = RecordingRunner::default();
        let op = Operation::new(Kind::Grow, "grow".into(), "plan".into(), vec![step("a")]);
        let done = start(&host, op, &mut runner, &mut |_| {}).unwrap();
        assert!(done.is_complete() && done.finished.is_some());
        assert!(!path(&host).exists());
        assert_eq!(last_finished(&host).unwrap().title, "grow");

        let busy = Operation::new(Kind::Apply, "apply".into(), String::new(), vec![step("b")]);
        std::fs::create_dir_all(path(&host).parent().unwrap()).unwrap();
        busy.save(&path(&host)).unwrap();
        let second = Operation::new(Kind::Replace, "replace".into(), String::new(), vec![]);
        let err = start(&host, second, &mut runner, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string()
                .contains("another operation is unfinished: apply")
                && err.to_string().contains("nasforge-setup resume"),
            "{err}"
        );
        let resumed = resume(&host, &mut runner, &mut |_| {}).unwrap().unwrap();
        assert_eq!(resumed.title, "apply");
        assert!(resume(&host, &mut runner, &mut |_| {}).unwrap().is_none());
    }
}
