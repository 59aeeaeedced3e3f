//! The manage view: what `sudo nasforge-setup` opens on a NAS that is set
//! up. An overview of the arrays' health, the filesystems, the shares and
//! any pending operation, and the everyday actions: replace a disk, grow
//! an array, change the shares or users, test the alerts. Each action ends
//! on a review of its plan (with the setup's typed confirmation before a
//! disk holding data is erased), then a screen following its steps.
//!
//! Built like the wizard: [`Manager::update`] turns a message into state
//! and an [`Effect`], [`draw`] renders, and only [`run`] touches the
//! terminal and, through [`Care`], the engine.

pub mod care;
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

pub use care::{Care, Erases, ManageAction, Planned, Secret, StepEvent};
use model::Overview;

use super::input::is_quit;
use super::theme::{self, Theme};
use super::{Notice, help_bar, screens::Help, scroll};
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyEvent, KeyEventKind};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Padding, Paragraph};
use std::time::Duration;

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
        self.notice = Some(Notice {
            text: text.into(),
            error: true,
        });
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.notice = Some(Notice {
            text: text.into(),
            error: false,
        });
    }
}

pub fn draw(frame: &mut Frame, m: &Manager) {
    let theme = m.theme;
    let notice_lines: Vec<String> = m.notice.as_ref().map_or(vec![String::new()], |n| {
        scroll::wrap_hanging(&format!(" {}", n.text), frame.area().width as usize, 1)
            .into_iter()
            .take(3)
            .collect()
    });
    let [body, notice, help] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(notice_lines.len() as u16),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let mut title = vec![
        Span::raw(" nasforge · "),
        Span::raw(m.hostname.clone()),
        Span::raw(" · "),
        Span::styled(m.screen.title(), theme.title()),
        Span::raw(" "),
    ];
    if m.dry_run {
        title.push(Span::styled(" dry run ", theme.warning()));
    }
    let block = Block::bordered()
        .title(Line::from(title))
        .padding(Padding::horizontal(1));
    let inner = block.inner(body);
    frame.render_widget(block, body);
    let keys = draw_screen(frame, inner, m);
    if let Some(n) = &m.notice {
        let style = if n.error { theme.error() } else { theme.good() };
        let lines: Vec<Line> = notice_lines.into_iter().map(Line::raw).collect();
        frame.render_widget(Paragraph::new(lines).style(style), notice);
    }
    frame.render_widget(Paragraph::new(help_bar(&keys, &theme)), help);
    if theme.ascii {
        theme::asciify(frame.buffer_mut());
    }
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
pub fn run(care: &mut dyn Care, hostname: String, dry_run: bool) -> anyhow::Result<()> {
    let overview = care.overview().map_err(anyhow::Error::msg)?;
    let mut manager = Manager::new(overview, hostname, Theme::from_env(), dry_run);
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &mut manager, care);
    ratatui::restore();
    result
}

/// The next key pressed, waiting at most a quarter second.
fn next_key() -> anyhow::Result<Option<KeyEvent>> {
    if !event::poll(Duration::from_millis(250))? {
        return Ok(None);
    }
    Ok(match event::read()? {
        Event::Key(key) => Some(key),
        _ => None,
    })
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    m: &mut Manager,
    care: &mut dyn Care,
) -> anyhow::Result<()> {
    loop {
        terminal.draw(|frame| draw(frame, m))?;
        let Some(key) = next_key()? else {
            continue;
        };
        match m.update(Msg::Key(key)) {
            Effect::None => {}
            Effect::Quit => return Ok(()),
            Effect::Refresh => {
                let overview = care.overview();
                m.update(Msg::Overview(overview));
            }
            Effect::Plan(action) => {
                let planned = care.plan(&action);
                m.update(Msg::Planned(action, planned));
            }
            Effect::Run => follow(terminal, m, care)?,
        }
    }
}

/// Runs the reviewed plan on its own thread and redraws the progress
/// screen with each step until it ends.
fn follow(
    terminal: &mut ratatui::DefaultTerminal,
    m: &mut Manager,
    care: &mut dyn Care,
) -> anyhow::Result<()> {
    let Some(review) = m.review.as_ref() else {
        return Ok(());
    };
    let (action, planned) = (review.action.clone(), review.planned.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            care.run(&action, &planned, &mut |event| {
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
            if let Some(key) = next_key()? {
                m.update(Msg::Key(key));
            }
        }
    })
}
