//! Runs the journal's steps in order from where it stopped, checking each
//! step's guard first and saving the journal after each one.

use crate::journal::{self, Failure, Journal, JournalError, StepRecord};
use crate::operation::Operation;
use crate::machine::disks::Host;
use crate::runner::{RecordingRunner, RunError, Runner};
use crate::steps::{Check, Step};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("step {index} ({id}) refused: {reason}")]
    Refused {
        index: usize,
        id: String,
        reason: String,
    },
    #[error("step {index} ({id}) failed: {source}")]
    Failed {
        index: usize,
        id: String,
        source: RunError,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// What the executor tells the console as it goes.
pub enum Event<'a> {
    Starting {
        index: usize,
        total: usize,
        step: &'a Step,
    },
    AlreadyDone {
        index: usize,
        reason: &'a str,
    },
    Finished {
        index: usize,
    },
}

/// What the executor keeps its place in: the setup journal, or the
/// journal of one operation after setup (a replace, a grow, an apply).
pub trait Progress {
    fn steps(&self) -> &[Step];
    fn done(&mut self) -> &mut Vec<StepRecord>;
    fn set_failure(&mut self, failure: Option<Failure>);
    fn set_finished(&mut self, at: u64);
    fn save(&self, path: &Path) -> Result<(), JournalError>;
}

macro_rules! progress {
    ($t:ty) => {
        impl Progress for $t {
            fn steps(&self) -> &[Step] {
                &self.steps
            }
            fn done(&mut self) -> &mut Vec<StepRecord> {
                &mut self.done
            }
            fn set_failure(&mut self, failure: Option<Failure>) {
                self.failure = failure;
            }
            fn set_finished(&mut self, at: u64) {
                self.finished = Some(at);
            }
            fn save(&self, path: &Path) -> Result<(), JournalError> {
                <$t>::save(self, path)
            }
        }
    };
}
progress!(Journal);
progress!(Operation);

/// Executes the remaining steps. A refusal or failure is recorded in the
/// journal (which stays at the failed step, so the next run retries it)
/// and returned.
pub fn execute<P: Progress + ?Sized>(
    journal: &mut P,
    journal_path: &Path,
    host: &Host,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), ExecError> {
    journal.set_failure(None);
    let total = journal.steps().len();
    while journal.done().len() < total {
        let index = journal.done().len();
        let step = journal.steps()[index].clone();
        on_event(Event::Starting {
            index,
            total,
            step: &step,
        });
        let already_done = match step.check(host) {
            Check::Done(reason) => {
                on_event(Event::AlreadyDone {
                    index,
                    reason: &reason,
                });
                Some(reason)
            }
            Check::Refuse(reason) => {
                record_failure(journal, journal_path, index, &step, &reason)?;
                return Err(ExecError::Refused {
                    index,
                    id: step.id,
                    reason,
                });
            }
            Check::Pending => {
                if let Err(source) = run_step(&step, runner) {
                    record_failure(journal, journal_path, index, &step, &source.to_string())?;
                    return Err(ExecError::Failed {
                        index,
                        id: step.id,
                        source,
                    });
                }
                None
            }
        };
        journal.done().push(StepRecord {
            id: step.id.clone(),
            already_done,
            at: journal::now(),
        });
        if journal.done().len() == total {
            journal.set_finished(journal::now());
        }
        journal.save(journal_path)?;
        on_event(Event::Finished { index });
    }
    Ok(())
}

fn run_step(step: &Step, runner: &mut dyn Runner) -> Result<(), RunError> {
    let mut result = step.actions.iter().try_for_each(|a| runner.apply(a));
    for action in &step.always {
        let cleanup = runner.apply(action);
        if result.is_ok() {
            result = cleanup;
        }
    }
    result
}

fn record_failure<P: Progress + ?Sized>(
    journal: &mut P,
    path: &Path,
    index: usize,
    step: &Step,
    error: &str,
) -> Result<(), JournalError> {
    journal.set_failure(Some(Failure {
        step: step.id.clone(),
        index,
        error: error.to_string(),
        at: journal::now(),
    }));
    journal.save(path)
}

/// Every step and the exact actions it would perform, without checking
/// guards or touching anything: what `plan --dry-run` prints.
pub fn dry_run(steps: &[Step]) -> String {
    let mut runner = RecordingRunner::default();
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        out += &format!("[{}/{}] {}\n", i + 1, steps.len(), step.title);
        for (actions, note) in [
            (&step.actions, ""),
            (&step.always, "    # runs even if the above failed"),
        ] {
            let from = runner.lines.len();
            actions
                .iter()
                .try_for_each(|a| runner.apply(a))
                .expect("recording does not fail");
            for line in &runner.lines[from..] {
                out += &format!("  {line}{note}\n");
            }
        }
    }
    out
}
