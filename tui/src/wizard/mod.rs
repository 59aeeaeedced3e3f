//! The first-boot wizard: a person at the console (or over SSH, or on a
//! serial line) turns a box of disks into a NAS without reading a manual,
//! and cannot wipe a disk by accident.
//!
//! Structured like ratatui's examples: [`Wizard`] holds the state,
//! [`Wizard::update`] turns a message (a key, a progress reading) into new
//! state and an [`Effect`] for the event loop to carry out, and [`draw`]
//! renders the state. Only [`run`] touches the terminal and the machine,
//! so tests drive `update` with keys and render `draw` on a `TestBackend`.
//!
//! The wizard only builds a spec: one array (new, or an old NAS's adopted
//! as it is) and its shares, and the disks kept as they are with theirs,
//! in the recipe's own types. The planner, step generator and executor are the
//! ones `--unattended` uses; the setup runs as a service (see [`service`]).

pub mod adopted;
pub mod alerts;
pub mod choices;
pub mod facts;
pub mod hardware;
pub mod kept;
pub mod screens;
pub mod service;

use crate::manage;
use crate::ui::input::is_quit;
use crate::ui::theme::Theme;
use crate::ui::{self, Notice, scroll};
use facts::Facts;
use nasforge_engine::machine::disks::{Disk, Host};
use nasforge_engine::planner::Plan;
use nasforge_engine::runner::{self, Runner};
use nasforge_engine::spec::{Alerts, DeviceRecipe, Filesystem, Level, Share, Storage};
use nasforge_engine::steps::{self, Context, Step};
use nasforge_engine::{journal, shares::smbpasswd};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::layout::Rect;
use ratatui::text::Line;
use screens::{alerts as alerts_screen, disks, done, layout, progress, review, shares, welcome};
use service::{Snapshot, StartError};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Welcome,
    Disks,
    Layout,
    Shares,
    /// Optional, so not counted among the numbered steps.
    Alerts,
    Review,
    Progress,
    Done,
}

impl Screen {
    const ALL: [Screen; 7] = [
        Screen::Welcome,
        Screen::Disks,
        Screen::Layout,
        Screen::Shares,
        Screen::Review,
        Screen::Progress,
        Screen::Done,
    ];

    fn title(self) -> &'static str {
        match self {
            Screen::Welcome => "Welcome",
            Screen::Disks => "Disks",
            Screen::Layout => "Layout",
            Screen::Shares => "Shares",
            Screen::Alerts => "Alerts (optional)",
            Screen::Review => "Review",
            Screen::Progress => "Progress",
            Screen::Done => "Done",
        }
    }
}

/// What the wizard reacts to.
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// A fresh reading of the running setup (boxed: with a pool's status it
    /// is many times the size of a key).
    Progress(Box<Snapshot>),
    /// Whether handing the plan to the setup service worked.
    Launched(Result<(), StartError>),
}

/// What the event loop must do after an update.
#[derive(Debug)]
pub enum Effect {
    None,
    Quit,
    /// The user confirmed the review: run this (or, in a dry run, print it).
    Start(Box<Handoff>),
    /// Start the failed setup service again.
    Retry,
}

/// Everything the setup service needs, as reviewed.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    /// `[storage]` and `[[shares]]`, as a recipe would say them.
    pub recipe: DeviceRecipe,
    pub context: Context,
    pub plan: Plan,
    pub steps: Vec<Step>,
    /// smbpasswd lines (NT hashes) for the share users.
    pub smbpasswd: Vec<String>,
    /// The alerts screen's choices; None when no alerts were chosen. The
    /// recipe carries them as `[alerts]` without the password.
    pub alerts: Option<Alerts>,
    /// The SMTP relay's password, written root-only to
    /// `/etc/nasforge/smtp-password` when setup is handed over.
    pub smtp_password: Option<String>,
}

impl Handoff {
    /// The users whose Samba password is staged.
    pub fn samba_users(&self) -> Vec<&str> {
        self.smbpasswd
            .iter()
            .filter_map(|l| l.split(':').next())
            .collect()
    }
}

/// How this run of the wizard behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    pub theme: Theme,
    /// Show the commands but never hand them to the service.
    pub dry_run: bool,
    /// The UUID the array's filesystem gets: chosen once, so the review
    /// shows the `mkfs` and fstab lines that will really run.
    pub fs_uuid: String,
    /// Seconds since the epoch, for the Samba password's change time.
    pub now: u64,
}

pub struct Wizard {
    pub facts: Facts,
    pub settings: Settings,
    pub screen: Screen,
    pub notice: Option<Notice>,
    pub disks: disks::DiskList,
    pub layout: layout::LayoutForm,
    pub shares: shares::ShareForm,
    pub alerts: alerts_screen::AlertForm,
    pub review: review::Review,
    pub done: scroll::Scroll,
    pub progress: Option<Snapshot>,
}

impl Wizard {
    pub fn new(facts: Facts, settings: Settings) -> Wizard {
        let shares = shares::ShareForm::new(&facts);
        Wizard {
            facts,
            settings,
            screen: Screen::Welcome,
            notice: None,
            disks: disks::DiskList::default(),
            layout: layout::LayoutForm::default(),
            shares,
            alerts: alerts_screen::AlertForm::default(),
            review: review::Review::default(),
            done: scroll::Scroll::default(),
            progress: None,
        }
    }

    pub fn update(&mut self, msg: Msg) -> Effect {
        match msg {
            Msg::Key(key) if key.kind == KeyEventKind::Release => Effect::None,
            Msg::Key(key) if is_quit(key) => Effect::Quit,
            Msg::Key(key) => {
                self.notice = None;
                match self.screen {
                    Screen::Welcome => welcome::key(self, key),
                    Screen::Disks => disks::key(self, key),
                    Screen::Layout => layout::key(self, key),
                    Screen::Shares => shares::key(self, key),
                    Screen::Alerts => alerts_screen::key(self, key),
                    Screen::Review => review::key(self, key),
                    Screen::Progress => progress::key(self, key),
                    Screen::Done => done::key(self, key),
                }
            }
            Msg::Progress(snapshot) => {
                self.progress = Some(*snapshot);
                Effect::None
            }
            Msg::Launched(Ok(())) => {
                self.screen = Screen::Progress;
                Effect::None
            }
            Msg::Launched(Err(e @ StartError::NotHandedOver(_))) => {
                self.error(format!("setup did not start: {e}"));
                Effect::None
            }
            Msg::Launched(Err(e @ StartError::NotStarted(_))) => {
                self.screen = Screen::Progress;
                self.error(format!("{e}; press r to try again"));
                Effect::None
            }
        }
    }

    /// Re-attaches to a setup that was started earlier: its progress, or
    /// how to connect when it finished.
    pub fn attach(&mut self, snapshot: Snapshot) {
        let complete = matches!(&snapshot.journal, Ok(Some(j)) if j.is_complete());
        self.screen = if complete {
            Screen::Done
        } else {
            Screen::Progress
        };
        self.progress = Some(snapshot);
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice::error(text));
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice::info(text));
    }

    /// The chosen disks, in discovery order.
    pub fn chosen(&self) -> Vec<&Disk> {
        self.facts
            .inventory
            .disks
            .iter()
            .filter(|d| self.disks.chosen.contains(&d.name))
            .collect()
    }

    /// Whether there is an array to share: disks chosen for a new one, or
    /// an old one adopted.
    pub fn has_array(&self) -> bool {
        !self.disks.chosen.is_empty() || self.disks.adopted.is_some()
    }

    /// The RAID level in effect for the chosen disks, or the adopted array's.
    pub fn level(&self) -> Level {
        match &self.disks.adopted {
            Some(a) => a.level,
            None => self.level_choice().level,
        }
    }

    /// The level in effect and the vdevs it is split into.
    pub fn level_choice(&self) -> choices::LevelChoice {
        layout::choice(self)
    }

    /// The array's name in the spec: the pool name typed for ZFS, else
    /// the mount point's last directory.
    pub fn array_name(&self) -> String {
        choices::name(
            self.layout.filesystem,
            self.layout.mount.value().trim(),
            self.layout.pool.value(),
        )
    }

    /// The disks marked "share as it is", in discovery order.
    pub fn kept(&self) -> Vec<&kept::Kept> {
        self.facts
            .inventory
            .disks
            .iter()
            .filter_map(|d| self.disks.kept.iter().find(|k| k.disk == d.name))
            .collect()
    }

    pub fn storage(&self) -> Storage {
        let chosen = self.chosen();
        let mount = self.layout.mount.value().trim();
        let mut storage = choices::storage(
            &chosen,
            self.level_choice(),
            layout::spares(self),
            self.layout.filesystem,
            mount,
            &self.array_name(),
        );
        if let Some(adopted) = &self.disks.adopted {
            storage.arrays = vec![adopted.array(mount, &self.array_name())];
        }
        let array = storage.arrays.first().map(|a| a.name.clone());
        storage.disks = kept::entries(&self.kept(), array.as_deref().map(|name| (name, mount)));
        storage.spin_down = self.layout.spin_down;
        // Chosen after the disks screen asked twice: the run that builds
        // them checks SMART again and would refuse them otherwise.
        storage.allow_failing = chosen
            .iter()
            .filter(|d| self.facts.health.get(&d.name) == Some(&Some(false)))
            .filter_map(|d| d.serial.clone())
            .collect();
        storage
    }

    /// The array's shares (when there is an array), then a share for each
    /// kept disk the shares screen leaves on.
    pub fn share_specs(&self) -> Vec<Share> {
        let storage = self.storage();
        let mut specs = if storage.arrays.is_empty() {
            Vec::new()
        } else {
            self.shares.specs(
                self.layout.mount.value().trim(),
                self.layout.filesystem == Filesystem::Zfs,
            )
        };
        for (k, entry) in self.kept().iter().zip(&storage.disks) {
            if !self.shares.kept_unshared.contains(&k.disk) {
                specs.push(kept::share(entry));
            }
        }
        specs
    }

    /// (user, uid, NT hash) to stage for Samba. The users belong to the
    /// array's share; kept disks alone are read by guests, with no password.
    pub fn passwords_to_stage(&self) -> Vec<(String, u32, String)> {
        match self.has_array() {
            false => Vec::new(),
            true => self.shares.passwords_to_stage(&self.facts),
        }
    }

    pub fn plan(&self) -> Result<Plan, Vec<String>> {
        choices::plan(
            &self.storage(),
            &self.share_specs(),
            &self.facts.inventory,
            &self.chosen(),
        )
    }

    /// The spec, its plan and the steps the review shows and the service
    /// runs.
    pub fn handoff(&self) -> Result<Handoff, Vec<String>> {
        let plan = self.plan()?;
        let alerts = self
            .alerts
            .choices()
            .map_err(|(problem, _)| vec![problem])?;
        let context = Context {
            hostname: self.facts.hostname.clone(),
            system_uuid: None,
            fs_uuids: vec![self.settings.fs_uuid.clone()],
        };
        let mut steps = steps::generate(&plan, &context);
        // The screen's [alerts], checked as a recipe's are; the password
        // travels beside it, never in it.
        if let Some(spec_alerts) = &alerts {
            let problems = nasforge_engine::spec::alerts::problems(spec_alerts);
            if !problems.is_empty() {
                return Err(problems.iter().map(|p| p.to_string()).collect());
            }
        }
        let smtp_password = alerts
            .as_ref()
            .and_then(|a| a.smtp.as_ref())
            .and_then(|s| s.password.clone());
        let board_alerts = alerts.as_ref().map(|a| a.without_password());
        nasforge_engine::steps::alerts::add_steps(
            &mut steps,
            board_alerts.as_ref(),
            &self.facts.hostname,
            smtp_password.is_some(),
        );
        let smbpasswd = self
            .passwords_to_stage()
            .into_iter()
            .map(|(user, uid, hash)| smbpasswd::line(&user, uid, &hash, self.settings.now))
            .collect();
        Ok(Handoff {
            recipe: DeviceRecipe {
                storage: Some(self.storage()),
                shares: self.share_specs(),
                alerts: board_alerts,
            },
            context,
            plan,
            steps,
            smbpasswd,
            alerts,
            smtp_password,
        })
    }
}

pub fn draw(frame: &mut Frame, w: &Wizard) {
    let theme = &w.settings.theme;
    ui::draw_frame(frame, title(w), w.notice.as_ref(), theme, |frame, area| {
        draw_screen(frame, area, w)
    });
}

/// The frame's title: the host, and which step of how many this is.
fn title(w: &Wizard) -> Line<'static> {
    let step = match Screen::ALL.iter().position(|s| *s == w.screen) {
        Some(at) => format!("{}/{} {}", at + 1, Screen::ALL.len(), w.screen.title()),
        None => w.screen.title().to_string(),
    };
    ui::title(
        "nasforge setup",
        &w.facts.hostname,
        step,
        w.settings.dry_run,
        &w.settings.theme,
    )
}

/// Draws the current screen inside the frame; the keys it takes, for the
/// help bar.
fn draw_screen(frame: &mut Frame, area: Rect, w: &Wizard) -> ui::Help {
    match w.screen {
        Screen::Welcome => {
            welcome::draw(frame, area, w);
            welcome::help(w)
        }
        Screen::Disks => {
            disks::draw(frame, area, w);
            disks::help(w)
        }
        Screen::Layout => {
            layout::draw(frame, area, w);
            layout::help(w)
        }
        Screen::Shares => {
            shares::draw(frame, area, w);
            shares::help(w)
        }
        Screen::Alerts => {
            alerts_screen::draw(frame, area, w);
            alerts_screen::help(w)
        }
        Screen::Review => {
            review::draw(frame, area, w);
            review::help(w)
        }
        Screen::Progress => {
            progress::draw(frame, area, w);
            progress::help(w)
        }
        Screen::Done => {
            done::draw(frame, area, w);
            done::help(w)
        }
    }
}

/// How the wizard ended.
pub enum Exit {
    Quit,
    /// A dry run reached the end of the review: the caller prints it.
    DryRun(Box<Handoff>),
}

/// Runs the wizard on the terminal until the user leaves.
pub fn run(host: &Host, dry_run: bool) -> anyhow::Result<Exit> {
    run_with(host, dry_run, None)
}

/// As [`run`]; on a NAS whose setup finished, `backend` opens the manage view
/// instead of the setup's last screen.
pub fn run_with(
    host: &Host,
    dry_run: bool,
    backend: Option<&mut dyn manage::Backend>,
) -> anyhow::Result<Exit> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "the wizard needs a terminal. Without one, `nasforge-setup plan` shows what the recipe would do, `nasforge-setup --unattended` sets up from it, and `nasforge-setup --help` lists everything else"
        );
    }
    // Commands are not moved under a fake root, so a rehearsal on one
    // never runs anything, whatever the flag says.
    let fake_root = host.root != std::path::Path::new("/");
    let mut runner = runner::for_host(host, None, false)?;
    eprintln!(
        "nasforge-setup: reading the disks, their SMART health and any old NAS's arrays and pools (read-only)..."
    );
    let facts = facts::gather(host, runner.as_mut())?;
    let settings = Settings {
        theme: Theme::from_env(),
        dry_run: dry_run || fake_root,
        fs_uuid: uuid::Uuid::new_v4().to_string(),
        now: journal::now(),
    };
    let mut wizard = Wizard::new(facts, settings);
    if journal::path(host).exists() {
        let snapshot = service::snapshot(host, runner.as_mut());
        let complete = matches!(&snapshot.journal, Ok(Some(j)) if j.is_complete());
        if let (true, Some(backend)) = (complete, backend) {
            manage::run(
                backend,
                wizard.facts.hostname.clone(),
                wizard.settings.dry_run,
            )?;
            return Ok(Exit::Quit);
        }
        wizard.attach(snapshot);
    }
    ui::on_terminal(|terminal| event_loop(terminal, &mut wizard, host, runner.as_mut()))
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    wizard: &mut Wizard,
    host: &Host,
    runner: &mut dyn Runner,
) -> anyhow::Result<Exit> {
    let mut last_reading: Option<Instant> = None;
    loop {
        let watching = matches!(wizard.screen, Screen::Progress | Screen::Done);
        if watching && last_reading.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            wizard.update(Msg::Progress(Box::new(service::snapshot(host, runner))));
            last_reading = Some(Instant::now());
        }
        terminal.draw(|frame| draw(frame, wizard))?;
        let Some(key) = ui::next_key()? else {
            continue;
        };
        match wizard.update(Msg::Key(key)) {
            Effect::None => {}
            Effect::Quit => return Ok(Exit::Quit),
            Effect::Start(handoff) if wizard.settings.dry_run => return Ok(Exit::DryRun(handoff)),
            Effect::Start(handoff) => {
                let started = service::start(host, &handoff, runner);
                wizard.update(Msg::Launched(started));
                last_reading = None;
            }
            Effect::Retry => {
                let started = service::retry(runner);
                wizard.update(Msg::Launched(started));
                last_reading = None;
            }
        }
    }
}
