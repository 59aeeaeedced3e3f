//! The manage view's whole interface to the engine: what it asks for
//! ([`ManageAction`]) and what it gets back ([`Planned`]), through the
//! [`Backend`] trait. The screens never touch the machine; an implementation
//! over `care::survey`, the replace/grow/apply planners and
//! `operation::start` is handed to [`super::run`].

use super::model::{DiskView, Overview};
use nasforge_engine::spec::Share;
use nasforge_engine::steps::Step;

/// A password typed in the manage view; Debug never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// What the user chose on an action screen, for the engine to plan.
#[derive(Debug, Clone, PartialEq)]
pub enum ManageAction {
    /// The degraded array's missing or failed member replaced by `disk`
    /// (a kernel name): `nasforge-setup replace --array A --disk D`.
    Replace { array: String, disk: String },
    /// `disks` (kernel names) added to the array, then its filesystem
    /// grown: `nasforge-setup grow --array A --disk D...`.
    Grow { array: String, disks: Vec<String> },
    /// The whole new share list, applied as `nasforge-setup apply` applies
    /// an edited `[[shares]]`.
    Shares(Vec<Share>),
    /// A new account that may use the shares, with its SMB password.
    AddUser { name: String, password: Secret },
    /// An existing account's SMB password changed.
    SetPassword { name: String, password: Secret },
    /// One test alert through each configured channel.
    TestAlerts,
}

/// A disk the plan would erase that holds data: the review asks for its
/// name or serial before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erases {
    pub disk: DiskView,
    /// What it holds, in words ("an ext4 filesystem 'photos'").
    pub holds: String,
}

/// An action's plan, before anything changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// One line: the operation journal's title.
    pub title: String,
    /// The plan in words, as `nasforge-setup replace` etc. print it.
    pub text: String,
    /// The steps `operation::start` will run; the review lists their
    /// commands with `executor::dry_run`.
    pub steps: Vec<Step>,
    pub erases: Vec<Erases>,
}

/// A step of the running operation, as `executor::Event` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepEvent {
    Starting {
        index: usize,
        total: usize,
        title: String,
    },
    AlreadyDone {
        index: usize,
    },
    Finished {
        index: usize,
    },
}

/// The engine, as the manage view needs it. `Send` because the operation
/// runs on its own thread while the screen follows it.
pub trait Backend: Send {
    /// The NAS as it is now (`care::survey` and `status`).
    fn overview(&mut self) -> Result<Overview, String>;
    /// The plan for `action`, or why it is refused (a disk too small, a
    /// level that cannot grow, an unknown user...). Changes nothing.
    fn plan(&mut self, action: &ManageAction) -> Result<Planned, String>;
    /// Runs the reviewed plan (`operation::start`), reporting each step;
    /// the error says what failed and that `nasforge-setup resume` goes on.
    fn run(
        &mut self,
        action: &ManageAction,
        planned: &Planned,
        on_step: &mut dyn FnMut(StepEvent),
    ) -> Result<(), String>;
}
