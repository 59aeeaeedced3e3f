//! `nasforge-setup apply`, `share add|remove` and `user add|passwd`: the
//! changes after setup. The engine ([`nasforge_engine::apply`]) compares
//! nasforge.toml with what was set up and makes the steps; this prints the
//! plan, asks, and runs it as an operation.

mod password;
mod recipe_edit;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use nasforge_engine::apply::{self, users};
use nasforge_engine::atomic_file;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::runner::{self, Runner};
use nasforge_engine::setup;
use nasforge_engine::spec::DeviceRecipe;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::Path;

#[derive(Args)]
pub struct Confirm {
    /// Go on after printing the plan, without asking.
    #[arg(long)]
    yes: bool,
    /// Allow erasing this disk for a new array that has `wipe = true`
    /// (kernel name, /dev path or /dev/disk/by-id path); repeat for more.
    #[arg(long, value_name = "DEV")]
    erase: Vec<String>,
}

#[derive(Subcommand)]
pub enum ShareCommand {
    /// Add a share to nasforge.toml and apply it.
    Add(recipe_edit::NewShare),
    /// Take a share out of nasforge.toml and apply it. Its directory and
    /// files stay.
    Remove {
        name: String,
        #[command(flatten)]
        confirm: Confirm,
    },
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user (own group, home, no login password) with a Samba
    /// password, asked twice on the terminal.
    Add {
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user's Samba password.
    Passwd {
        name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
}

/// `nasforge-setup apply`: nasforge.toml as it is on the boot partition.
pub fn apply(host: &Host, recipe_file: &Path, confirm: &Confirm) -> anyhow::Result<()> {
    let recipe = DeviceRecipe::load(recipe_file)?;
    review_and_run(host, recipe_file, &recipe, None, confirm)
}

pub fn share(host: &Host, recipe_file: &Path, command: &ShareCommand) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(recipe_file)
        .with_context(|| format!("cannot read the recipe {}", recipe_file.display()))?;
    // The file as it is must be sound before it is edited.
    DeviceRecipe::parse(&text, recipe_file)?;
    let (edited, confirm) = match command {
        ShareCommand::Add(new) => (recipe_edit::add(&text, new)?, &new.confirm),
        ShareCommand::Remove { name, confirm } => (recipe_edit::remove(&text, name)?, confirm),
    };
    let recipe = DeviceRecipe::parse(&edited, recipe_file)?;
    review_and_run(host, recipe_file, &recipe, Some(&edited), confirm)
}

/// Prints the plan; unless it has nothing to do or is refused, asks, then
/// writes `edited` (the recipe after `share add|remove`) and runs it.
fn review_and_run(
    host: &Host,
    recipe_file: &Path,
    recipe: &DeviceRecipe,
    edited: Option<&str>,
    confirm: &Confirm,
) -> anyhow::Result<()> {
    // Commands run only to look at an old array or pool the recipe adopts
    // (read-only), and then for the plan itself; all go to setup's log.
    let mut runner = runner(host)?;
    let plan = apply::prepare(host, recipe, &confirm.erase, runner.as_mut())?;
    print!("{}", plan.describe());
    if plan.nothing_to_change() {
        return Ok(());
    }
    if !plan.refusals.is_empty() {
        // `share add|remove` wrote nothing yet: the fix is in its own
        // arguments, unless the file already held what is refused.
        match edited {
            None => bail!(
                "nothing was changed: fix {} as said above",
                recipe_file.display()
            ),
            Some(_) => bail!(
                "nothing was changed and {} is as it was: change the command as said above",
                recipe_file.display()
            ),
        }
    }
    refuse_fake_root(host)?;
    ask(confirm.yes)?;
    if let Some(text) = edited {
        atomic_file::write(recipe_file, text.as_bytes(), 0o644)
            .with_context(|| format!("cannot write {}", recipe_file.display()))?;
    }
    apply::run(host, &plan, runner.as_mut(), &mut super::print_step)?;
    println!("nasforge-setup: apply complete");
    Ok(())
}

pub fn user(host: &Host, command: &UserCommand) -> anyhow::Result<()> {
    let (plan, from_stdin, done) = match command {
        UserCommand::Add {
            name,
            password_stdin,
        } => (users::plan_add(host, name)?, *password_stdin, "user add"),
        UserCommand::Passwd {
            name,
            password_stdin,
        } => (
            users::plan_passwd(host, name)?,
            *password_stdin,
            "user passwd",
        ),
    };
    print!("{}", plan.describe());
    refuse_fake_root(host)?;
    let secret = if from_stdin {
        password::from_stdin()?
    } else {
        password::prompt_twice(&format!("Samba password for {}", plan.name))?
    };
    users::run(
        host,
        &plan,
        &secret,
        runner(host)?.as_mut(),
        &mut super::print_step,
    )?;
    println!("nasforge-setup: {done} complete");
    Ok(())
}

/// Commands cannot be moved under a fake root: a rehearsal there ends
/// with the plan.
fn refuse_fake_root(host: &Host) -> anyhow::Result<()> {
    if host.root != Path::new("/") {
        bail!(
            "refusing to change the system with --root {}: the plan above is what would run",
            host.root.display()
        );
    }
    Ok(())
}

fn ask(yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "no terminal to ask on; nothing was changed. Run again with --yes to go on after the plan"
        );
    }
    print!("Type yes to go on: ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        bail!("not confirmed; nothing was changed");
    }
    Ok(())
}

/// Only reached on the real root: apply refuses a fake one first.
fn runner(host: &Host) -> anyhow::Result<Box<dyn Runner>> {
    let log = setup::log_path(host);
    runner::for_host(host, Some(&log), true)
        .with_context(|| format!("opening the log {}", log.display()))
}
