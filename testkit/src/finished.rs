//! A board whose setup finished: the one way every test makes one, so
//! that all of them agree on what "finished" leaves behind (every step
//! recorded done, `finished` set, the journal where the engine reads it).

use nasforge_engine::journal::{self, Journal, StepRecord};
use nasforge_engine::machine::disks::Host;
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::setup;
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;

/// When every fixture's setup finished and its steps ran: 2027-01-15
/// 08:00 UTC.
pub const AT: u64 = 1_800_000_000;

/// `journal` as a finished setup leaves it.
pub fn mark(mut journal: Journal) -> Journal {
    journal.done = journal
        .steps
        .iter()
        .map(|s| StepRecord {
            id: s.id.clone(),
            already_done: None,
            at: AT,
        })
        .collect();
    journal.failure = None;
    journal.finished = Some(AT);
    journal
}

/// `journal` as a finished setup leaves it, saved on `host`.
pub fn save(host: &Host, journal: Journal) -> Journal {
    let journal = mark(journal);
    let path = journal::path(host);
    std::fs::create_dir_all(path.parent().expect("the journal lives in a directory"))
        .expect("the fixture is writable");
    journal.save(&path).expect("the fixture is writable");
    journal
}

/// The setup of `recipe` on `host`, prepared as setup prepares it (plan,
/// steps, filesystem UUIDs) and finished.
pub fn setup(host: &Host, recipe: &DeviceRecipe) -> Journal {
    let prepared = setup::prepare(
        host,
        Path::new("nasforge.toml"),
        recipe,
        &mut RecordingRunner::default(),
        &mut |_| {},
    )
    .expect("the fixture's recipe plans on the fixture's board");
    save(
        host,
        Journal::new(
            recipe.clone(),
            prepared.context,
            prepared.plan,
            prepared.steps,
        ),
    )
}
