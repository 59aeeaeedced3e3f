//! The setup runs as a systemd service, not inside the wizard, so it goes
//! on when the wizard's session drops (an SSH connection, a closed
//! terminal) and resumes after a power cut. The wizard hands over through
//! files: the recipe the service runs, the journal holding the exact plan
//! and steps the review screen showed, and the staged Samba hashes. It
//! then watches the journal, the log and /proc/mdstat.

use super::Handoff;
use nasforge_engine::atomic_file;
use nasforge_engine::image_files::{
    FIRSTBOOT_ENV, PACKAGES_INSTALLED, SETUP_SERVICE, WIZARD_RECIPE,
};
use nasforge_engine::journal::Journal;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::runner::Runner;
use nasforge_engine::status::{self, ArrayStatus};
use nasforge_engine::steps::{Action, Cmd};
use nasforge_engine::{setup, shares::samba, shares::smbpasswd};
use std::io::{Read, Seek, SeekFrom};

/// What the progress screen shows, read from the machine once a second.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// None until the wizard has written it; Err when it cannot be read.
    pub journal: Result<Option<Journal>, String>,
    /// The setup service's state as systemd names it ("activating",
    /// "failed", "inactive"), or "starting" while its start job waits;
    /// None where systemd cannot be asked.
    pub service: Option<String>,
    /// The end of the setup log: the commands and what they printed.
    pub log: Vec<String>,
    pub arrays: Vec<ArrayStatus>,
}

/// How much of the log's end is read: far more than a screen shows.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

pub fn snapshot(host: &Host, runner: &mut dyn Runner) -> Snapshot {
    let journal = Journal::load(&nasforge_engine::journal::path(host)).map_err(|e| e.to_string());
    let service = runner
        .query(&Cmd::new(&[
            "systemctl",
            "show",
            "-p",
            "ActiveState",
            "-p",
            "Job",
            SETUP_SERVICE,
        ]))
        .ok()
        .and_then(|q| service_state(&q.stdout));
    Snapshot {
        journal,
        service,
        log: log_tail(&setup::log_path(host)),
        arrays: status::read_arrays(host),
    }
}

/// Reads `systemctl show -p ActiveState -p Job`. A unit whose start job is
/// queued (waiting for first boot to finish, say) is still "inactive": it
/// counts as starting, not as stopped.
fn service_state(show: &str) -> Option<String> {
    let value = |key: &str| {
        show.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
    };
    let queued = value("Job").is_some_and(|job| !job.is_empty() && job != "0");
    match value("ActiveState") {
        Some("inactive" | "failed") if queued => Some("starting".into()),
        Some(state) if !state.is_empty() => Some(state.to_string()),
        _ => None,
    }
}

fn log_tail(path: &std::path::Path) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(LOG_TAIL_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if from > 0 && !lines.is_empty() {
        lines.remove(0); // cut mid-line
    }
    lines
}

/// Why the setup did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// Nothing was handed over; the review can be confirmed again.
    #[error("{0}")]
    NotHandedOver(String),
    /// The plan is saved, but systemd did not start the service: starting
    /// it again resumes from the journal.
    #[error("the plan is saved, but the service did not start: {0}")]
    NotStarted(String),
}

/// Why setup cannot run yet: the image staged packages (mdadm, mkfs,
/// Samba...) that first boot has not installed, because it failed. None
/// when nothing is missing.
pub fn packages_missing(host: &Host) -> Option<String> {
    let env = std::fs::read_to_string(host.path(FIRSTBOOT_ENV)).ok()?;
    if host.path(PACKAGES_INSTALLED).exists() {
        return None;
    }
    let packages: Vec<&str> = env
        .lines()
        .find_map(|l| l.strip_prefix("NASFORGE_PACKAGES="))
        .map(|v| v.trim().trim_matches('"').split_whitespace().collect())
        .unwrap_or_default();
    if packages.is_empty() {
        return None;
    }
    Some(format!(
        "first boot did not install the packages setup needs ({}); {} on the boot partition says why. Fix that, run `sudo /usr/lib/nasforge/firstboot packages`, then start nasforge-setup again",
        packages.join(", "),
        status::FILE_NAME
    ))
}

/// Hands the reviewed plan to the setup service and starts it.
pub fn start(host: &Host, handoff: &Handoff, runner: &mut dyn Runner) -> Result<(), StartError> {
    // Checked now, not only when the wizard started: first boot may have
    // been fixed in another session meanwhile.
    if let Some(why) = packages_missing(host) {
        return Err(StartError::NotHandedOver(why));
    }
    hand_over(host, handoff).map_err(StartError::NotHandedOver)?;
    // Enabled, so a power cut resumes it at the next boot.
    systemctl(runner, &["enable", SETUP_SERVICE])?;
    systemctl(runner, &["start", "--no-block", SETUP_SERVICE])
}

fn hand_over(host: &Host, handoff: &Handoff) -> Result<(), String> {
    let journal_path = nasforge_engine::journal::path(host);
    if journal_path.exists() {
        return Err(format!(
            "{} exists: a setup was already started (perhaps from another session); restart the wizard to follow it",
            journal_path.display()
        ));
    }
    if !handoff.smbpasswd.is_empty() {
        let staged = host.path(samba::STAGED_PASSWORDS);
        let existing = std::fs::read_to_string(&staged).unwrap_or_default();
        let merged = smbpasswd::merge(&existing, &handoff.smbpasswd);
        atomic_file::write(&staged, merged.as_bytes(), 0o600)
            .map_err(|e| format!("staging the Samba passwords in {}: {e}", staged.display()))?;
    }
    let recipe = format!(
        "# The storage and shares chosen in the nasforge-setup wizard; run by\n# {SETUP_SERVICE} (nasforge-setup --unattended --recipe {WIZARD_RECIPE}).\n{}",
        toml::to_string(&handoff.recipe).map_err(|e| format!("writing the recipe: {e}"))?
    );
    // The SMTP password is the one secret the board keeps: root only, in
    // its own file, never in the recipe or the journal.
    if let Some(password) = &handoff.smtp_password {
        let file = host.path(nasforge_engine::paths::PASSWORD_FILE);
        atomic_file::write(&file, password.as_bytes(), 0o600)
            .map_err(|e| format!("writing {}: {e}", file.display()))?;
    }
    // Root only as well: a webhook or ntfy URL in its [alerts] carries the
    // token that lets anyone post as the NAS.
    let recipe_path = host.path(WIZARD_RECIPE);
    atomic_file::write(&recipe_path, recipe.as_bytes(), 0o600)
        .map_err(|e| format!("writing {}: {e}", recipe_path.display()))?;
    // The journal is what the service executes: the plan and steps exactly
    // as reviewed, with the filesystem UUIDs the review showed.
    Journal::new(
        handoff.recipe.clone(),
        handoff.context.clone(),
        handoff.plan.clone(),
        handoff.steps.clone(),
    )
    .save(&journal_path)
    .map_err(|e| e.to_string())
}

/// Starts the service again (after a failure, or when it stopped): it
/// resumes from the journal at the step that did not finish.
pub fn retry(runner: &mut dyn Runner) -> Result<(), StartError> {
    systemctl(runner, &["start", "--no-block", SETUP_SERVICE])
}

fn systemctl(runner: &mut dyn Runner, args: &[&str]) -> Result<(), StartError> {
    let mut argv = vec!["systemctl"];
    argv.extend_from_slice(args);
    runner
        .apply(&Action::Run(Cmd::new(&argv)))
        .map_err(|e| StartError::NotStarted(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_start_is_starting_not_stopped() {
        assert_eq!(
            service_state("ActiveState=activating\n").as_deref(),
            Some("activating")
        );
        assert_eq!(
            service_state("Job=1234\nActiveState=inactive\n").as_deref(),
            Some("starting")
        );
        assert_eq!(
            service_state("ActiveState=inactive\n").as_deref(),
            Some("inactive")
        );
        assert_eq!(
            service_state("ActiveState=failed\nJob=\n").as_deref(),
            Some("failed")
        );
        assert_eq!(service_state(""), None, "no systemd to ask");
    }
}
