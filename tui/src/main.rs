//! The `nasforge-setup` command line: each command is a call into
//! [`nasforge_engine`] (or the wizard) and the printing of what it
//! returned; planning, setup and status live in the engine, so first boot
//! and the wizard share them.

mod cli;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cli::{alert, apply, care, pool};
use nasforge_engine::executor;
use nasforge_engine::journal::Journal;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::planner::Plan;
use nasforge_engine::runner::{self, Runner};
use nasforge_engine::setup::{self, COMPLETE_MARKER, Outcome, REBOOT_MARKER, SetupError};
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::status::{self, Setup};
use nasforge_setup::wizard::{self, Exit};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// First-boot storage setup for a nasforge NAS image.
///
/// Without a command it runs the setup wizard: choose disks, a RAID level
/// and shares on screen, review every command, then watch setup run.
/// With --unattended it builds RAID arrays, filesystems, mounts and
/// Samba/NFS shares from the [storage] and [[shares]] sections of the
/// recipe the image was built from. Disks that hold data are never touched
/// unless the recipe says `wipe = true` for their array, or their name was
/// typed in the wizard.
#[derive(Parser)]
#[command(name = "nasforge-setup", version)]
struct Cli {
    /// Set up everything from the recipe without asking (what first boot
    /// runs). Resumes an interrupted setup; does nothing once complete.
    #[arg(long)]
    unattended: bool,

    /// Wizard: show the plan and every command on the review screen, then
    /// print them and the chosen recipe instead of running anything.
    #[arg(long, conflicts_with = "unattended")]
    dry_run: bool,

    /// Root of the system to inspect: sysfs, udev's database, /proc, /dev
    /// and /etc are read beneath it. For tests and rehearsals on fake
    /// trees; only `/` can be changed.
    #[arg(long, global = true, default_value = "/", value_name = "DIR")]
    root: PathBuf,

    /// The recipe [default: <root>/boot/firmware/nasforge.toml, else
    /// <root>/boot/nasforge.toml]
    #[arg(long, global = true, value_name = "PATH")]
    recipe: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Show the disks each array would use, its capacity, what it survives
    /// and its expected bottleneck.
    Plan {
        /// Also print every command and file write, in order, without
        /// running anything.
        #[arg(long)]
        dry_run: bool,
    },
    /// After setup: compare nasforge.toml with what was set up, print the
    /// difference as a plan and apply it (shares, users they name, new
    /// arrays). Arrays are never removed or rebuilt.
    Apply {
        #[command(flatten)]
        confirm: apply::Confirm,
    },
    /// Add or remove a share in nasforge.toml and apply it.
    #[command(subcommand)]
    Share(apply::ShareCommand),
    /// Add a user or change a user's Samba password.
    #[command(subcommand)]
    User(apply::UserCommand),
    /// Show setup progress, arrays, filesystems, shares and disk health, and
    /// write it to nasforge-status.txt on the boot partition.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Replace a failed or missing member of an array with another disk:
    /// show the arrays and the plan, then rebuild onto the new disk.
    Replace {
        /// The array [default: the one that lacks a member]
        #[arg(long, value_name = "NAME")]
        array: Option<String>,
        /// The new disk: sdd, /dev/sdd or /dev/disk/by-id/... [default: the
        /// one blank disk that fits]
        #[arg(long, value_name = "DEV")]
        disk: Option<String>,
        /// Allow erasing this disk (it holds data); name it with --disk too.
        #[arg(long, value_name = "DEV")]
        erase: Vec<String>,
        /// Go on after showing the plan, without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Add disks to an array: more mirrors for raid1, a reshape and a
    /// larger filesystem for raid5 and raid6.
    Grow {
        #[arg(long, value_name = "NAME")]
        array: String,
        /// A disk to add (repeat for more): sdd, /dev/sdd or /dev/disk/by-id/...
        #[arg(long, value_name = "DEV", required = true)]
        disk: Vec<String>,
        /// Allow erasing this disk (it holds data); name it with --disk too.
        #[arg(long, value_name = "DEV")]
        erase: Vec<String>,
        /// Go on after showing the plan, without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Finish the replace, grow or apply a power cut interrupted (run at
    /// boot by nasforge-resume.service).
    Resume,
    /// Raise, test or retry alerts (mdadm, smartd and the timers run this).
    Alert(alert::AlertArgs),
    /// A pool's care: join its disks at boot, the nightly parity sync and
    /// the weekly scrub (its systemd units run these).
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    /// Print a shell's completions for nasforge-setup (first boot installs
    /// bash's, zsh's and fish's).
    Completions { shell: clap_complete::Shell },
    /// Print nasforge-setup's manual page (roff; first boot installs it:
    /// `man nasforge-setup`).
    Man,
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Checked here, not with clap's args_conflicts_with_subcommands, which
    // would refuse `--root` and `--recipe` before a command too.
    if let (Some(name), true) = (matches.subcommand_name(), cli.unattended || cli.dry_run) {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--unattended and --dry-run are for setup itself, not for `{name}`; a command's own options go after it (`nasforge-setup {name} --help`)"
                ),
            )
            .exit();
    }
    let host = Host::new(&cli.root);
    let recipe = cli
        .recipe
        .clone()
        .unwrap_or_else(|| setup::recipe_path(&host));
    let result = match (&cli.command, cli.unattended) {
        (Some(Command::Plan { dry_run }), _) => plan(&host, &recipe, *dry_run),
        (Some(Command::Status { json }), _) => show_status(&host, *json),
        (
            Some(Command::Replace {
                array,
                disk,
                erase,
                yes,
            }),
            _,
        ) => {
            let request = nasforge_engine::care::ReplaceRequest {
                array: array.clone(),
                disk: disk.clone(),
                erase: erase.clone(),
            };
            care::replace(&host, &request, *yes)
        }
        (
            Some(Command::Grow {
                array,
                disk,
                erase,
                yes,
            }),
            _,
        ) => {
            let request = nasforge_engine::care::GrowRequest {
                array: array.clone(),
                disks: disk.clone(),
                erase: erase.clone(),
            };
            care::grow(&host, &request, *yes)
        }
        (Some(Command::Resume), _) => care::resume(&host),
        (Some(Command::Apply { confirm }), _) => apply::apply(&host, &recipe, confirm),
        (Some(Command::Share(command)), _) => apply::share(&host, &recipe, command),
        (Some(Command::User(command)), _) => apply::user(&host, command),
        (Some(Command::Alert(args)), _) => alert::run(&host, args),
        (Some(Command::Pool(command)), _) => pool::run(&host, command),
        (Some(Command::Completions { shell }), _) => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "nasforge-setup",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        (Some(Command::Man), _) => clap_mangen::Man::new(Cli::command())
            .section("8")
            .render(&mut std::io::stdout())
            .context("writing the manual page"),
        (None, true) => unattended(&host, &recipe),
        (None, false) => wizard(&host, cli.dry_run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nasforge-setup: {e:#}");
            alert_if_an_operation_failed(&host, &e);
            ExitCode::FAILURE
        }
    }
}

/// A replace, grow or apply that stopped at a failed step leaves its
/// operation pending with the failure recorded: that is worth an alert (a
/// refusal or an unconfirmed plan changed nothing and is not).
fn alert_if_an_operation_failed(host: &Host, error: &anyhow::Error) {
    let Ok(Some(op)) = nasforge_engine::operation::pending(host) else {
        return;
    };
    if let Some(failure) = &op.failure {
        alert::notify(
            host,
            nasforge_engine::alerts::Kind::ApplyFailed,
            &format!(
                "{} stopped at step {} ({}): {error:#}. Run `sudo nasforge-setup resume` once the cause is fixed.",
                op.title,
                failure.index + 1,
                failure.step
            ),
        );
    }
}

fn wizard(host: &Host, dry_run: bool) -> anyhow::Result<()> {
    // On a NAS already set up, the wizard opens its manage view instead.
    let mut backend = nasforge_setup::manage::engine::EngineBackend::new(host);
    let handoff = match wizard::run_with(host, dry_run, Some(&mut backend))? {
        Exit::Quit => return Ok(()),
        Exit::DryRun(handoff) => handoff,
    };
    println!("Dry run: nothing was changed. The plan:\n");
    print!("{}", handoff.plan.describe());
    let users = handoff.samba_users();
    if !users.is_empty() {
        println!(
            "Samba passwords for {} would be staged as NT hashes in {}.",
            users.join(", "),
            nasforge_engine::shares::samba::STAGED_PASSWORDS
        );
    }
    println!("\nSteps (nothing is run):");
    print!("{}", executor::dry_run(&handoff.steps));
    println!(
        "\nThe choices as a recipe (for `nasforge-setup --unattended --recipe FILE`, or the image's recipe):\n"
    );
    print!("{}", toml::to_string(&handoff.recipe)?);
    Ok(())
}

fn plan(host: &Host, recipe_file: &Path, dry_run: bool) -> anyhow::Result<()> {
    let recipe = DeviceRecipe::load(recipe_file)?;
    let prepared = setup::prepare(
        host,
        recipe_file,
        &recipe,
        query_runner(host)?.as_mut(),
        &mut note,
    )?;
    print!("{}", prepared.plan.describe());
    if dry_run {
        println!("\nSteps (nothing is run):");
        print!("{}", executor::dry_run(&prepared.steps));
    }
    Ok(())
}

fn show_status(host: &Host, json: bool) -> anyhow::Result<()> {
    let journal = Journal::load(&nasforge_engine::journal::path(host))?;
    let status = status::collect(host, journal.as_ref(), query_runner(host)?.as_mut());
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{}", status.render());
    }
    if let Err(e) = status::write_file(host, &status) {
        eprintln!(
            "nasforge-setup: could not write {} to the boot partition: {e}",
            status::FILE_NAME
        );
    }
    Ok(())
}

fn note(text: &str) {
    eprintln!("nasforge-setup: {text}");
}

/// SMART queries, `udevadm settle` and waiting for late disks happen only
/// when the root is the real one: a fake tree does not change.
fn query_runner(host: &Host) -> anyhow::Result<Box<dyn Runner>> {
    Ok(runner::for_host(host, None, true)?)
}

fn unattended(host: &Host, recipe_file: &Path) -> anyhow::Result<()> {
    // Commands cannot be moved under a fake root: a rehearsal there only
    // records them (and setup stops before the first step).
    let mut runner = runner::for_host(host, Some(&setup::log_path(host)), true)
        .with_context(|| format!("opening the log {}", setup::log_path(host).display()))?;
    let mut on_plan = |plan: &Plan| eprint!("{}", plan.describe());
    let result = setup::unattended(
        host,
        recipe_file,
        runner.as_mut(),
        &mut cli::print_step,
        &mut on_plan,
        &mut note,
    );

    let journal = Journal::load(&nasforge_engine::journal::path(host))
        .ok()
        .flatten();
    let mut status = status::collect(host, journal.as_ref(), query_runner(host)?.as_mut());
    if let Err(
        e @ (SetupError::Refused(_)
        | SetupError::Recipe(_)
        | SetupError::NoStorage(_)
        | SetupError::UsbQuirks(_)),
    ) = &result
    {
        status.setup = Setup::NotPossible {
            problems: vec![e.to_string()],
        };
    }
    match status::write_file(host, &status) {
        Ok(path) => eprintln!("nasforge-setup: status written to {}", path.display()),
        Err(e) => eprintln!("nasforge-setup: could not write the status file: {e}"),
    }
    if let Err(e) = &result
        && host.root == Path::new("/")
    {
        alert::notify(
            host,
            nasforge_engine::alerts::Kind::SetupFailed,
            &format!(
                "{e}\n\nEvery command's output is in {}; `sudo nasforge-setup status` says where setup stopped.",
                setup::LOG
            ),
        );
    }
    match result? {
        Outcome::AlreadyComplete => {
            eprintln!("nasforge-setup: setup was already complete; nothing to do")
        }
        Outcome::Rebooting { why } => return wait_for_reboot(&why),
        Outcome::Completed => {}
    }
    println!("{COMPLETE_MARKER}");
    Ok(())
}

/// After a step asked for a reboot: setup must not end as if it had
/// finished (first boot would disable itself), so it waits for the
/// shutdown to stop it, and fails if none comes.
fn wait_for_reboot(why: &str) -> anyhow::Result<()> {
    const AT_MOST: std::time::Duration = std::time::Duration::from_secs(600);
    println!("{REBOOT_MARKER}: {why}; setup continues after the reboot");
    std::thread::sleep(AT_MOST);
    anyhow::bail!(
        "the reboot setup asked for has not happened after {} s; reboot the board (`sudo systemctl reboot`) and setup continues from its journal",
        AT_MOST.as_secs()
    )
}
