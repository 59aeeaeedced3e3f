//! Runs the journal's steps in order from where it stopped, checking each
//! step's guard first and saving the journal after each one.

use crate::command::Cmd;
use crate::journal::{self, Failure, Journal, JournalError, Reboot, StepRecord};
use crate::machine::disks::Host;
use crate::runner::{RecordingRunner, RunError, Runner};
use crate::steps::{Action, Check, Step};
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
    /// An array a step made was not running and was assembled again from
    /// its members before the steps went on (see [`execute`]).
    Reassembled {
        device: &'a str,
    },
}

/// What the executor keeps its place in: the setup journal, or the
/// journal of one operation after setup (a replace, a grow, an apply).
pub trait Progress {
    fn steps(&self) -> &[Step];
    fn done(&mut self) -> &mut Vec<StepRecord>;
    fn set_failure(&mut self, failure: Option<Failure>);
    fn set_finished(&mut self, at: u64);
    fn reboot(&mut self) -> &mut Option<Reboot>;
    fn save(&self, path: &Path) -> Result<(), JournalError>;
}

/// Implements [`Progress`] for a journal type with `steps`, `done`,
/// `failure`, `finished` and `reboot` fields and a `save` method.
macro_rules! progress {
    ($t:ty) => {
        impl $crate::executor::Progress for $t {
            fn steps(&self) -> &[$crate::steps::Step] {
                &self.steps
            }
            fn done(&mut self) -> &mut Vec<$crate::journal::StepRecord> {
                &mut self.done
            }
            fn set_failure(&mut self, failure: Option<$crate::journal::Failure>) {
                self.failure = failure;
            }
            fn set_finished(&mut self, at: u64) {
                self.finished = Some(at);
            }
            fn reboot(&mut self) -> &mut Option<$crate::journal::Reboot> {
                &mut self.reboot
            }
            fn save(&self, path: &std::path::Path) -> Result<(), $crate::journal::JournalError> {
                <$t>::save(self, path)
            }
        }
    };
}
pub(crate) use progress;
progress!(Journal);

/// How a run of the executor ended without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every step is done.
    Finished,
    /// A step asked for a reboot and it was requested: nothing more runs
    /// in this boot, and the next run continues with that step's guard.
    Rebooting { index: usize, why: String },
}

/// Executes the remaining steps. A refusal or failure is recorded in the
/// journal (which stays at the failed step, so the next run retries it)
/// and returned. A step that ends with a reboot stops the run once the
/// reboot is requested; it is recorded done only when, after the reboot,
/// its guard finds the work in effect, and refused when it does not (a
/// second reboot would change nothing).
///
/// Only arrays mdadm.conf lists assemble at boot (`AUTO -all`, so that an
/// old NAS's disks are left alone), and a step lists them only after it
/// made them: an array made in a boot that a power cut ended before that
/// is assembled first, from its planned members, so that its own step
/// finds it made and the steps after it find its device.
pub fn execute<P: Progress + ?Sized>(
    journal: &mut P,
    journal_path: &Path,
    host: &Host,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<Ended, ExecError> {
    journal.set_failure(None);
    reassemble(journal, journal_path, host, runner, on_event)?;
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
            Check::Pending if step.reboots() => {
                if let Some(reason) = rebooted_in_vain(journal, host, index, &step) {
                    record_failure(journal, journal_path, index, &step, &reason)?;
                    return Err(ExecError::Refused {
                        index,
                        id: step.id,
                        reason,
                    });
                }
                return reboot(journal, journal_path, host, runner, index, &step);
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
    Ok(Ended::Finished)
}

/// Assembles the arrays of the steps done, and of the one that was
/// running, that are on their disks but not running. One that a done step
/// made and that does not assemble stops the run; the running step's may
/// not have been made in full, so its own guard and actions decide. A
/// finished run is left alone: its arrays are listed, and one stopped
/// since was stopped by someone.
fn reassemble<P: Progress + ?Sized>(
    journal: &mut P,
    journal_path: &Path,
    host: &Host,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), ExecError> {
    let next = journal.done().len();
    if next >= journal.steps().len() {
        return Ok(());
    }
    // In order, one at a time: a nested array's legs are its members.
    for index in 0..=next {
        let step = journal.steps()[index].clone();
        let Some((device, assemble)) = step.unassembled_array(host) else {
            continue;
        };
        let result = runner
            .apply(&Action::Run(assemble))
            .and_then(|()| runner.apply(&Action::Run(Cmd::new(&["udevadm", "settle"]))));
        match result {
            Ok(()) => on_event(Event::Reassembled { device }),
            Err(_) if index == next => {}
            Err(source) => {
                let reason = format!(
                    "{device}, which this step made, is not running and did not assemble from its members: {source}. Check its disks (`mdadm --examine` on each), assemble it, then run nasforge-setup again (`sudo nasforge-setup resume` when a replace, grow or apply was under way)"
                );
                record_failure(journal, journal_path, index, &step, &reason)?;
                return Err(ExecError::Refused {
                    index,
                    id: step.id,
                    reason,
                });
            }
        }
    }
    Ok(())
}

/// The id of the running boot, None where the kernel does not give one.
fn boot_id(host: &Host) -> Option<String> {
    std::fs::read_to_string(host.path(journal::BOOT_ID))
        .ok()
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty())
}

/// Why a reboot step must not run again: it already asked for a reboot,
/// the board has rebooted since (or cannot tell), and its guard still
/// finds the work not in effect. None when it has not rebooted for it yet.
fn rebooted_in_vain<P: Progress + ?Sized>(
    journal: &mut P,
    host: &Host,
    index: usize,
    step: &Step,
) -> Option<String> {
    let asked = journal
        .reboot()
        .clone()
        .filter(|r| r.index == index && r.step == step.id)?;
    let now = boot_id(host);
    if asked.boot_id.is_some() && asked.boot_id == now {
        // The reboot asked for never happened (setup was started again
        // before it): asking once more is not a second reboot.
        return None;
    }
    Some(format!(
        "the board rebooted for it (asked at {} s since the epoch, boot {}; this is boot {}), but its work is still not in effect: {}. Setup stops here rather than reboot again; nothing else was changed",
        asked.at,
        asked.boot_id.as_deref().unwrap_or("unknown"),
        now.as_deref().unwrap_or("unknown"),
        step.not_in_effect(host)
    ))
}

/// Runs a step that ends with a reboot: its other actions, then the
/// journal records the reboot, then the reboot is requested.
fn reboot<P: Progress + ?Sized>(
    journal: &mut P,
    journal_path: &Path,
    host: &Host,
    runner: &mut dyn Runner,
    index: usize,
    step: &Step,
) -> Result<Ended, ExecError> {
    let (last, before) = step
        .actions
        .split_last()
        .expect("a reboot step has actions");
    let failed = |journal: &mut P, source: RunError| -> Result<Ended, ExecError> {
        record_failure(journal, journal_path, index, step, &source.to_string())?;
        Err(ExecError::Failed {
            index,
            id: step.id.clone(),
            source,
        })
    };
    if let Err(source) = before.iter().try_for_each(|a| runner.apply(a)) {
        return failed(journal, source);
    }
    // Saved before the reboot is asked for: the shutdown may stop setup
    // before it could save anything after.
    *journal.reboot() = Some(Reboot {
        step: step.id.clone(),
        index,
        why: step.title.clone(),
        boot_id: boot_id(host),
        at: journal::now(),
    });
    journal.save(journal_path)?;
    if let Err(source) = runner.apply(last) {
        *journal.reboot() = None;
        return failed(journal, source);
    }
    Ok(Ended::Rebooting {
        index,
        why: step.title.clone(),
    })
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
