//! Changes to a NAS that is set up: `nasforge-setup apply` compares the
//! recipe on the boot partition with the one setup recorded in its journal
//! and turns the difference into a plan. Shares (and the users they name)
//! touch no data, so their steps are the share steps regenerated whole;
//! a new array is planned with the same erase rules as setup; an array
//! removed or changed is refused with the command that does it instead.
//! The last step records the new recipe and plan as the set-up state, so a
//! second `apply` finds nothing to change.
//!
//! `users` adds accounts and sets their Samba passwords, which never pass
//! through a journal, a log or a command line.

mod describe;
mod diff;
pub mod users;
mod withdraw;

pub use diff::{Board, diff};

use crate::journal::{JournalError, Unfinished};
use crate::machine::disks::{self, DiscoveryError, Host};
use crate::operation::{self, Kind, Operation, OperationError};
use crate::planner::{ArrayPlan, Plan};
use crate::runner::Runner;
use crate::spec::{DeviceRecipe, Share};
use crate::steps::{Context, Step};
use std::path::PathBuf;

/// The difference between the set-up NAS and the recipe, and the steps
/// that make it so.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyPlan {
    pub shares_added: Vec<Share>,
    /// Shares no longer in the recipe: no longer shared, their directories
    /// and files kept.
    pub shares_removed: Vec<Share>,
    pub shares_changed: Vec<ShareChange>,
    /// Users a share names now who were named on none before.
    pub users_added: Vec<String>,
    /// New arrays, planned on the disks no set-up array uses.
    pub arrays_added: Vec<ArrayPlan>,
    /// `[alerts]` changes in words ("+ Alerts posted as JSON to ..."), and
    /// a warning when the relay's stored password would go somewhere new.
    pub alerts_changed: Vec<String>,
    /// What apply will not do, each with its reason and what to do instead.
    /// Any refusal stops the whole apply: nothing runs.
    pub refusals: Vec<String>,
    /// What is recorded as the set-up state once the steps ran.
    pub recipe: DeviceRecipe,
    pub plan: Plan,
    pub context: Context,
    pub steps: Vec<Step>,
}

/// One share kept under its name, with what changed in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareChange {
    pub name: String,
    pub what: Vec<String>,
}

impl ApplyPlan {
    /// The recipe is what was set up: nothing to run.
    pub fn nothing_to_change(&self) -> bool {
        self.refusals.is_empty() && self.steps.is_empty()
    }

    /// One line for the operation's title.
    pub fn title(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(
            self.arrays_added
                .iter()
                .map(|a| format!("+ array '{}'", a.spec.name)),
        );
        parts.extend(
            self.shares_added
                .iter()
                .map(|s| format!("+ share '{}'", s.name)),
        );
        parts.extend(
            self.shares_removed
                .iter()
                .map(|s| format!("- share '{}'", s.name)),
        );
        parts.extend(
            self.shares_changed
                .iter()
                .map(|s| format!("~ share '{}'", s.name)),
        );
        if parts.is_empty() {
            "Apply nasforge.toml".into()
        } else {
            format!("Apply nasforge.toml: {}", parts.join(", "))
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    NotSetUp(#[from] Unfinished),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("nothing was changed:\n{}", .0.iter().map(|r| format!("  - {r}")).collect::<Vec<_>>().join("\n"))]
    Refused(Vec<String>),
    #[error("{0}")]
    User(String),
    #[error("nasforge.toml is what was set up: nothing to change")]
    NothingToChange,
    #[error(transparent)]
    Operation(#[from] OperationError),
    #[error("{what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Compares `recipe` (already loaded with [`DeviceRecipe::load`], so its
/// errors carry file:line:col) with the set-up state on this board.
/// `erase` holds the disks named with `--erase`. When the recipe adopts an
/// array or pool it did not before, the disks' md superblocks and ZFS
/// labels are read and looked into read-only through `ask`, as setup does.
pub fn prepare(
    host: &Host,
    recipe: &DeviceRecipe,
    erase: &[String],
    ask: &mut dyn crate::command::Ask,
) -> Result<ApplyPlan, ApplyError> {
    let journal = crate::journal::finished(host)?;
    let mut inventory = disks::discover(host)?;
    let adopting = diff::new_arrays(journal.recipe.storage.as_ref(), recipe.storage.as_ref())
        .iter()
        .any(|(_, a)| a.import);
    if adopting {
        crate::machine::old_nas::find(host, &mut inventory, ask);
    }
    let accounts = users::accounts(host)?;
    let names: Vec<String> = accounts.iter().map(|a| a.name.clone()).collect();
    let board = Board {
        inventory: &inventory,
        users: &names,
        erase,
        smtp_password: host.path(crate::paths::PASSWORD_FILE).exists(),
    };
    Ok(diff(&journal, recipe, &board))
}

/// Runs the plan as an operation (journalled, resumed after a power cut).
pub fn run(
    host: &Host,
    plan: &ApplyPlan,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(crate::executor::Event),
) -> Result<Operation, ApplyError> {
    if !plan.refusals.is_empty() {
        return Err(ApplyError::Refused(plan.refusals.clone()));
    }
    if plan.steps.is_empty() {
        return Err(ApplyError::NothingToChange);
    }
    let op = Operation::new(
        Kind::Apply,
        plan.title(),
        plan.describe(),
        plan.steps.clone(),
    );
    Ok(operation::start(host, op, runner, on_event)?)
}
