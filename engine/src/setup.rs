//! Unattended setup from start to end: recipe → discovery → plan → steps →
//! execution with the journal. The wizard will call the same pieces with a
//! spec built on screen.

use crate::executor::{self, Ended, Event, ExecError};
use crate::journal::{self, Journal, JournalError};
use crate::machine::disks::{self, DiscoveryError, Host, Inventory};
use crate::planner::{self, Plan, Refusal};
use crate::runner::Runner;
use crate::size::Size;
use crate::spec::{DeviceRecipe, Mode, RecipeError};
use crate::steps::{self, Action, Cmd, Context, Step};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The console line the first-boot service (and the emulated-board test)
/// waits for.
pub const COMPLETE_MARKER: &str = "nasforge-setup: setup complete";

/// The boot partition as the running system mounts it: /boot/firmware on
/// Raspberry Pi OS since Bookworm, /boot on Armbian.
/// Where the builder copied the recipe: /boot/firmware/nasforge.toml
/// (Raspberry Pi OS), else /boot/nasforge.toml (Armbian).
pub fn recipe_path(host: &Host) -> PathBuf {
    let pi = host.path("/boot/firmware/nasforge.toml");
    if pi.exists() {
        pi
    } else {
        host.path("/boot/nasforge.toml")
    }
}

/// Every command setup runs, with its output.
pub const LOG: &str = "/var/log/nasforge-setup.log";

pub fn log_path(host: &Host) -> PathBuf {
    host.path(LOG)
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Recipe(#[from] RecipeError),
    #[error("{}: the recipe has no [storage] section, so there is nothing to set up", .0.display())]
    NoStorage(PathBuf),
    #[error("{}: storage.mode is \"wizard\": run `nasforge-setup` on the console to choose disks, or set mode = \"unattended\"", .0.display())]
    WizardMode(PathBuf),
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("the plan was refused; nothing was changed:\n{}", .0.iter().map(|r| format!("  - {r}")).collect::<Vec<_>>().join("\n"))]
    Refused(Vec<Refusal>),
    #[error(
        "{} records a setup from a different recipe ({} of {} steps done); nasforge-setup does not rebuild a NAS that exists. Put the old recipe back, or check the disks and remove the journal to plan again",
        journal.display(), done, total
    )]
    RecipeChanged {
        journal: PathBuf,
        done: usize,
        total: usize,
    },
    #[error("refusing to change the system with --root {}: the plan above is what would run; use `plan --dry-run` for a rehearsal", .0.display())]
    NotTheRealRoot(PathBuf),
    #[error("[storage] usb_quirks: {0}; nothing was changed")]
    UsbQuirks(String),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Exec(#[from] ExecError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every step ran (or was found done) now.
    Completed,
    /// The journal says setup finished on an earlier run.
    AlreadyComplete,
    /// A step asked for a reboot (the journal records it) and it was
    /// requested; setup continues from the journal after it.
    Rebooting { why: String },
}

/// The plan and its steps for a recipe on this machine.
pub struct Prepared {
    pub inventory: Inventory,
    pub plan: Plan,
    pub context: Context,
    pub steps: Vec<Step>,
}

/// How far apart two readings of the disk set must agree, and how long
/// to wait at most: at first boot a disk can still be spinning up, or
/// behind a SATA card or USB bridge that enumerates late, and with
/// count = "all" it would be left out without a word.
pub const DISKS_STABLE_AFTER: Duration = Duration::from_secs(3);
pub const DISKS_WAIT_AT_MOST: Duration = Duration::from_secs(30);

/// The disks once udev has settled and two readings `DISKS_STABLE_AFTER`
/// apart find the same set (bounded by `DISKS_WAIT_AT_MOST`). Waiting and
/// `udevadm settle` go through `runner`, so tests do not sleep.
pub fn settled_inventory(
    host: &Host,
    runner: &mut dyn Runner,
    on_note: &mut dyn FnMut(&str),
) -> Result<Inventory, DiscoveryError> {
    if let Err(e) = runner.apply(&Action::Run(Cmd::new(&["udevadm", "settle"]))) {
        on_note(&format!(
            "{e}; waiting for the disk list to stop changing instead"
        ));
    }
    let mut last = disks::discover(host)?;
    let mut waited = Duration::ZERO;
    loop {
        runner.wait(DISKS_STABLE_AFTER);
        waited += DISKS_STABLE_AFTER;
        let now = disks::discover(host)?;
        if disk_set(&now) == disk_set(&last) {
            return Ok(now);
        }
        if waited >= DISKS_WAIT_AT_MOST {
            on_note(&format!(
                "the disks were still changing after {} s; planning with the ones found now",
                waited.as_secs()
            ));
            return Ok(now);
        }
        on_note("the disks changed while waiting for them to settle; waiting longer");
        last = now;
    }
}

fn disk_set(inventory: &Inventory) -> Vec<(&str, Size)> {
    inventory
        .disks
        .iter()
        .map(|d| (d.name.as_str(), d.size))
        .collect()
}

/// The free disks of `inventory` that SMART calls failing, by kernel name,
/// with why. smartctl exits non-zero for a failing disk; its JSON still
/// says why.
fn failing_disks(inventory: &Inventory, runner: &mut dyn Runner) -> BTreeMap<String, String> {
    use crate::machine::smart::{Verdict, verdict};
    inventory
        .disks
        .iter()
        .filter(|d| d.in_use.is_empty())
        .filter_map(|d| {
            let out = runner
                .query(&Cmd::new(&[
                    "smartctl",
                    "--json",
                    "-H",
                    "-A",
                    &d.dev_path(),
                ]))
                .ok()?;
            match verdict(&out.stdout) {
                Verdict::Failing(why) => Some((d.name.clone(), why)),
                Verdict::Healthy | Verdict::Unknown => None,
            }
        })
        .collect()
}

/// Loads the recipe and plans it against the disks, once they have
/// settled; says which disks were found through `on_note`.
pub fn prepare(
    host: &Host,
    recipe_file: &Path,
    recipe: &DeviceRecipe,
    runner: &mut dyn Runner,
    on_note: &mut dyn FnMut(&str),
) -> Result<Prepared, SetupError> {
    let storage = recipe
        .storage
        .as_ref()
        .ok_or_else(|| SetupError::NoStorage(recipe_file.to_path_buf()))?;
    let mut inventory = settled_inventory(host, runner, on_note)?;
    // Asked before planning, so that no array is planned onto a disk SMART
    // already calls failing; the wizard asked its person instead.
    inventory.failing = failing_disks(&inventory, runner);
    crate::machine::old_nas::find(host, &mut inventory, runner);
    on_note(&format!("found {} disk(s):", inventory.disks.len()));
    for d in &inventory.disks {
        // The root filesystem is the reason a reader expects for the boot disk.
        let never = d
            .in_use
            .iter()
            .find(|u| matches!(u, crate::machine::disks::InUse::Boot))
            .or(d.in_use.first())
            .map(|why| format!(" (never used: {why})"))
            .unwrap_or_default();
        let failing = inventory
            .failing
            .get(&d.name)
            .map(|why| format!(" (failing by SMART: {why})"))
            .unwrap_or_default();
        on_note(&format!("  {}: {}{never}{failing}", d.name, d.summary()));
    }
    if !inventory.existing.is_empty() || !inventory.existing_pools.is_empty() {
        on_note("arrays and pools another machine made (import = true adopts one as it is):");
        for e in &inventory.existing {
            on_note(&format!("  {e}"));
        }
        for p in &inventory.existing_pools {
            on_note(&format!("  {p}"));
        }
    }
    let mut plan = planner::plan(storage, &recipe.shares, &inventory)
        .map_err(|refused| SetupError::Refused(located(recipe_file, refused)))?;
    check_kept_mountable(host, &mut plan)?;
    let context = Context::random(&crate::machine::hostname(host), &plan);
    let mut steps = steps::generate(&plan, &context);
    if let Some(step) = usb_quirks_step(host, storage, &inventory, on_note)? {
        steps.insert(0, step);
    }
    crate::steps::alerts::add_steps(
        &mut steps,
        recipe.alerts.as_ref(),
        &context.hostname,
        host.path(crate::paths::PASSWORD_FILE).exists(),
    );
    Ok(Prepared {
        inventory,
        plan,
        context,
        steps,
    })
}

/// Refusals that name a recipe key, with the file, line and column of it
/// before the reason, as the recipe's own checks give them.
fn located(recipe_file: &Path, refused: Vec<Refusal>) -> Vec<Refusal> {
    let text = std::fs::read_to_string(recipe_file).unwrap_or_default();
    refused
        .into_iter()
        .map(|mut r| {
            if let Some(at) = &r.at
                && let Some(loc) = crate::spec::locate(&text, at)
            {
                r.reason = format!(
                    "{}:{}:{}: {at}: {}",
                    recipe_file.display(),
                    loc.line,
                    loc.column,
                    r.reason
                );
            }
            r
        })
        .collect()
}

/// Each kept disk's filesystem against what the running board can mount,
/// before anything is written; the mount type found goes into the plan.
pub fn check_kept_mountable(host: &Host, plan: &mut Plan) -> Result<(), SetupError> {
    let mut refused = Vec::new();
    for kept in &mut plan.kept {
        match crate::machine::filesystems::mount_type(host, kept.filesystem) {
            Ok(t) => kept.mount_type = Some(t),
            Err(reason) => refused.push(Refusal {
                array: kept.spec.name.clone(),
                kept: true,
                disk: Some(kept.device.clone()),
                reason,
                at: None,
            }),
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(SetupError::Refused(refused))
    }
}

/// The step that keeps USB bridges off UAS, first of all, when the kernel
/// lacks a quirk the recipe names or a listed bridge on `uas` needs. A
/// recipe's quirk that cannot be put on this board's command line stops
/// setup; a listed bridge's is only warned about (the kernel may apply
/// its own list).
pub fn usb_quirks_step(
    host: &Host,
    storage: &crate::spec::Storage,
    inventory: &Inventory,
    on_note: &mut dyn FnMut(&str),
) -> Result<Option<Step>, SetupError> {
    let needed = steps::usb::needed(storage, inventory);
    for n in &needed {
        on_note(&format!("USB: {}", n.why));
    }
    let boot = crate::machine::boot_dir(host);
    let boot = Path::new("/").join(boot.strip_prefix(&host.root).unwrap_or(&boot));
    match steps::usb::step(host, &boot.to_string_lossy(), &needed) {
        Ok(Some(step)) => {
            on_note(&format!("USB: {REBOOT_NOTE}"));
            Ok(Some(step))
        }
        Ok(None) => Ok(None),
        Err(cannot) if cannot.named_in_recipe => Err(SetupError::UsbQuirks(cannot.why)),
        Err(cannot) => {
            on_note(&format!("warning: {}", cannot.why));
            Ok(None)
        }
    }
}

/// Said when setup plans the USB quirk step.
pub const REBOOT_NOTE: &str = "the kernel command line gets usb-storage.quirks, and the board reboots once before anything is created; setup continues after the reboot";

/// The console line when setup stops for a reboot a step asked for.
pub const REBOOT_MARKER: &str = "nasforge-setup: rebooting";

/// What first boot runs. Resumes an interrupted setup from its journal;
/// does nothing when setup already finished.
pub fn unattended(
    host: &Host,
    recipe_file: &Path,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
    on_plan: &mut dyn FnMut(&Plan),
    on_note: &mut dyn FnMut(&str),
) -> Result<Outcome, SetupError> {
    let recipe = DeviceRecipe::load(recipe_file)?;
    let storage = recipe
        .storage
        .as_ref()
        .ok_or_else(|| SetupError::NoStorage(recipe_file.to_path_buf()))?;
    if storage.mode == Mode::Wizard {
        return Err(SetupError::WizardMode(recipe_file.to_path_buf()));
    }
    let path = journal::path(host);
    let mut journal = match Journal::load(&path)? {
        Some(j) if j.recipe != recipe => {
            return Err(SetupError::RecipeChanged {
                journal: path,
                done: j.done.len(),
                total: j.steps.len(),
            });
        }
        Some(j) if j.is_complete() => return Ok(Outcome::AlreadyComplete),
        Some(j) => {
            on_plan(&j.plan);
            refuse_fake_root(host)?;
            // After a reboot the guards compare each disk with the planned
            // one: only once udev's database is complete and no disk is
            // still appearing do they see what the plan saw.
            settled_inventory(host, runner, on_note)?;
            j
        }
        None => {
            let prepared = prepare(host, recipe_file, &recipe, runner, on_note)?;
            on_plan(&prepared.plan);
            refuse_fake_root(host)?;
            let journal = Journal::new(recipe, prepared.context, prepared.plan, prepared.steps);
            journal.save(&path)?;
            journal
        }
    };
    match executor::execute(&mut journal, &path, host, runner, on_event)? {
        Ended::Finished => Ok(Outcome::Completed),
        Ended::Rebooting { why, .. } => Ok(Outcome::Rebooting { why }),
    }
}

/// Commands cannot be moved under a fake root, so a rehearsal on one stops
/// before the first step.
fn refuse_fake_root(host: &Host) -> Result<(), SetupError> {
    if host.root == Path::new("/") {
        Ok(())
    } else {
        Err(SetupError::NotTheRealRoot(host.root.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_about_one_key_points_at_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nasforge.toml");
        std::fs::write(
            &file,
            "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"pool\"\nlevel = \"pool\"\nparity = 1\n",
        )
        .unwrap();
        let refusal = |at: Option<&str>| Refusal {
            array: "pool".into(),
            kept: false,
            disk: None,
            reason: "the kept disk 'photos' is larger".into(),
            at: at.map(str::to_string),
        };
        let out = located(
            &file,
            vec![refusal(Some("storage.arrays[0].parity")), refusal(None)],
        );
        assert_eq!(
            out[0].to_string(),
            format!(
                "array 'pool': {}:6:10: storage.arrays[0].parity: the kept disk 'photos' is larger",
                file.display()
            )
        );
        assert_eq!(
            out[1].to_string(),
            "array 'pool': the kept disk 'photos' is larger"
        );
    }
}
