//! The manage view: what `sudo nasforge-setup` opens on a NAS that is set
//! up. An overview of the arrays' health, the filesystems, the shares and
//! any pending operation, and the everyday actions: replace a disk, grow
//! an array, change the shares or users, test the alerts. Each action ends
//! on a review of its plan (with the setup's typed confirmation before a
//! disk holding data is erased), then a screen following its steps.
//!
//! Built like the wizard: [`Manager::update`] turns a message into state
//! and an [`Effect`], [`draw`] renders in the frame the wizard uses
//! ([`crate::ui`]), and only [`run`] touches the terminal and, through
//! [`Backend`], the engine.

pub mod backend;
pub mod engine;
pub mod grow;
pub mod model;
pub mod overview;
pub mod pick;
pub mod progress;
pub mod replace;
pub mod review;
pub mod shares;
pub mod users;

pub use backend::{Backend, Erases, ManageAction, Planned, Secret, StepEvent};
use model::Overview;

use crate::ui::input::is_quit;
use crate::ui::theme::Theme;
use crate::ui::{self, Help, Notice};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::layout::Rect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageScreen {
    Overview,
    Replace,
    Grow,
    Shares,
    Users,
    Review,
    Progress,
}

impl ManageScreen {
    fn title(self) -> &'static str {
        match self {
            ManageScreen::Overview => "Overview",
            ManageScreen::Replace => "Replace a disk",
            ManageScreen::Grow => "Grow an array",
            ManageScreen::Shares => "Shares",
            ManageScreen::Users => "Users",
            ManageScreen::Review => "Review",
            ManageScreen::Progress => "Progress",
        }
    }
}

#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// A fresh survey of the NAS.
    Overview(Result<Overview, String>),
    /// The engine's plan for an action, or why it refused.
    Planned(ManageAction, Result<Planned, String>),
    Step(StepEvent),
    /// The operation ended.
    Finished(Result<(), String>),
}

#[derive(Debug, PartialEq)]
pub enum Effect {
    None,
    Quit,
    /// Survey the NAS again.
    Refresh,
    /// Ask the engine to plan this.
    Plan(ManageAction),
    /// Run the reviewed plan (the one in [`Manager::review`]).
    Run,
}

pub struct Manager {
    pub theme: Theme,
    pub hostname: String,
    /// Review plans but never run them.
    pub dry_run: bool,
    pub overview: Overview,
    pub screen: ManageScreen,
    pub notice: Option<Notice>,
    /// The action chosen on the overview.
    pub menu: usize,
    /// The array the replace and grow screens act on, and their choice.
    pub pick: pick::Pick,
    pub shares: shares::ShareEdit,
    pub users: users::UserForm,
    pub review: Option<review::Review>,
    pub progress: progress::Progress,
}

impl Manager {
    pub fn new(overview: Overview, hostname: String, theme: Theme, dry_run: bool) -> Manager {
        Manager {
            theme,
            hostname,
            dry_run,
            overview,
            screen: ManageScreen::Overview,
            notice: None,
            menu: 0,
            pick: pick::Pick::default(),
            shares: shares::ShareEdit::default(),
            users: users::UserForm::default(),
            review: None,
            progress: progress::Progress::default(),
        }
    }

    pub fn update(&mut self, msg: Msg) -> Effect {
        match msg {
            Msg::Key(key) if key.kind == KeyEventKind::Release => Effect::None,
            Msg::Key(key) if is_quit(key) && self.progress.running() => {
                self.error(progress::CANNOT_LEAVE);
                Effect::None
            }
            Msg::Key(key) if is_quit(key) => Effect::Quit,
            Msg::Key(key) => {
                self.notice = None;
                match self.screen {
                    ManageScreen::Overview => overview::key(self, key),
                    ManageScreen::Replace => replace::key(self, key),
                    ManageScreen::Grow => grow::key(self, key),
                    ManageScreen::Shares => shares::key(self, key),
                    ManageScreen::Users => users::key(self, key),
                    ManageScreen::Review => review::key(self, key),
                    ManageScreen::Progress => progress::key(self, key),
                }
            }
            Msg::Overview(Ok(overview)) => {
                self.overview = overview;
                self.menu = self.menu.min(overview::menu(self).len().saturating_sub(1));
                Effect::None
            }
            Msg::Overview(Err(e)) => {
                self.error(format!("Reading the NAS failed: {e}"));
                Effect::None
            }
            Msg::Planned(action, Ok(planned)) => {
                self.review = Some(review::Review::new(action, planned, self.screen));
                self.screen = ManageScreen::Review;
                Effect::None
            }
            Msg::Planned(_, Err(why)) => {
                self.error(why);
                Effect::None
            }
            Msg::Step(event) => {
                self.progress.step(event);
                Effect::None
            }
            Msg::Finished(result) => {
                self.progress.result = Some(result);
                Effect::None
            }
        }
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice::error(text));
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice::info(text));
    }
}

pub fn draw(frame: &mut Frame, m: &Manager) {
    let title = ui::title(
        "nasforge",
        &m.hostname,
        m.screen.title().to_string(),
        m.dry_run,
        &m.theme,
    );
    ui::draw_frame(frame, title, m.notice.as_ref(), &m.theme, |frame, area| {
        draw_screen(frame, area, m)
    });
}

fn draw_screen(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    match m.screen {
        ManageScreen::Overview => overview::draw(frame, area, m),
        ManageScreen::Replace => replace::draw(frame, area, m),
        ManageScreen::Grow => grow::draw(frame, area, m),
        ManageScreen::Shares => shares::draw(frame, area, m),
        ManageScreen::Users => users::draw(frame, area, m),
        ManageScreen::Review => review::draw(frame, area, m),
        ManageScreen::Progress => progress::draw(frame, area, m),
    }
}

/// Runs the manage view on the terminal until the user leaves.
pub fn run(backend: &mut dyn Backend, hostname: String, dry_run: bool) -> anyhow::Result<()> {
    let overview = backend.overview().map_err(anyhow::Error::msg)?;
    let mut manager = Manager::new(overview, hostname, Theme::from_env(), dry_run);
    ui::on_terminal(|terminal| event_loop(terminal, &mut manager, backend))
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    m: &mut Manager,
    backend: &mut dyn Backend,
) -> anyhow::Result<()> {
    loop {
        terminal.draw(|frame| draw(frame, m))?;
        let Some(key) = ui::next_key()? else {
            continue;
        };
        match m.update(Msg::Key(key)) {
            Effect::None => {}
            Effect::Quit => return Ok(()),
            Effect::Refresh => {
                let overview = backend.overview();
                m.update(Msg::Overview(overview));
            }
            Effect::Plan(action) => {
                let planned = backend.plan(&action);
                m.update(Msg::Planned(action, planned));
            }
            Effect::Run => follow(terminal, m, backend)?,
        }
    }
}

/// Runs the reviewed plan on its own thread and redraws the progress
/// screen with each step until it ends.
fn follow(
    terminal: &mut ratatui::DefaultTerminal,
    m: &mut Manager,
    backend: &mut dyn Backend,
) -> anyhow::Result<()> {
    let Some(review) = m.review.as_ref() else {
        return Ok(());
    };
    let (action, planned) = (review.action.clone(), review.planned.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            backend.run(&action, &planned, &mut |event| {
                // The screen may already be gone; the journal keeps the place.
                let _ = tx.send(event);
            })
        });
        loop {
            while let Ok(event) = rx.try_recv() {
                m.update(Msg::Step(event));
            }
            if worker.is_finished() {
                let result = worker
                    .join()
                    .unwrap_or_else(|_| Err("the operation's thread panicked".into()));
                while let Ok(event) = rx.try_recv() {
                    m.update(Msg::Step(event));
                }
                m.update(Msg::Finished(result));
                return Ok(());
            }
            terminal.draw(|frame| draw(frame, m))?;
            if let Some(key) = ui::next_key()? {
                m.update(Msg::Key(key));
            }
        }
    })
}
