//! Progress: the operation's steps as the executor reports them, then
//! how it ended. A rebuild or reshape goes on in md after the last step;
//! the overview shows it with an estimate.

use super::{Effect, ManageScreen, Manager, StepEvent};
use crate::ui::Help;
use crate::ui::input::{Nav, nav};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use std::collections::BTreeSet;

/// Said when a key would leave while the operation runs.
pub const CANNOT_LEAVE: &str = "The operation is running; wait for it here. Were this session cut, the next boot or `sudo nasforge-setup resume` would finish it.";

#[derive(Debug, Default)]
pub struct Progress {
    pub title: String,
    pub steps: Vec<String>,
    pub current: Option<usize>,
    pub done: BTreeSet<usize>,
    /// None while running.
    pub result: Option<Result<(), String>>,
}

impl Progress {
    pub fn new(title: String, steps: Vec<String>) -> Progress {
        Progress {
            title,
            steps,
            ..Progress::default()
        }
    }

    pub fn running(&self) -> bool {
        !self.title.is_empty() && self.result.is_none()
    }

    pub fn step(&mut self, event: StepEvent) {
        match event {
            StepEvent::Starting { index, title, .. } => {
                self.current = Some(index);
                if let Some(slot) = self.steps.get_mut(index) {
                    *slot = title;
                }
            }
            StepEvent::AlreadyDone { index } | StepEvent::Finished { index } => {
                self.done.insert(index);
            }
        }
    }
}

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    if m.progress.running() {
        m.error(CANNOT_LEAVE);
        return Effect::None;
    }
    match nav(key) {
        Some(Nav::Next | Nav::Back) => {
            m.progress = Progress::default();
            m.screen = ManageScreen::Overview;
            Effect::Refresh
        }
        _ => Effect::None,
    }
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let theme = &m.theme;
    let p = &m.progress;
    let [head, steps] = Layout::vertical([Constraint::Length(3), Constraint::Fill(1)]).areas(area);
    let (headline, style) = match &p.result {
        None => (
            format!(
                "{}: {} of {} steps done.",
                p.title,
                p.done.len(),
                p.steps.len()
            ),
            Style::new(),
        ),
        Some(Ok(())) => (format!("{}: done.", p.title), theme.good()),
        Some(Err(e)) => (format!("{} FAILED: {e}", p.title), theme.error()),
    };
    frame.render_widget(
        Paragraph::new(Line::styled(headline, style)).wrap(Wrap { trim: true }),
        head,
    );
    let total = p.steps.len();
    let failed = matches!(p.result, Some(Err(_)));
    let lines: Vec<Line> = p
        .steps
        .iter()
        .enumerate()
        .map(|(i, title)| {
            let (mark, style) = if p.done.contains(&i) {
                ("ok ", theme.good())
            } else if p.current == Some(i) && failed {
                ("!! ", theme.error())
            } else if p.current == Some(i) {
                (">> ", theme.title())
            } else {
                ("   ", Style::new())
            };
            Line::styled(format!("{mark}[{}/{total}] {title}", i + 1), style)
        })
        .collect();
    let skip = p
        .current
        .unwrap_or(0)
        .saturating_sub(steps.height as usize / 2);
    frame.render_widget(Paragraph::new(lines).scroll((skip as u16, 0)), steps);
    if p.running() {
        vec![("", "working: wait for it to end")]
    } else {
        vec![("Enter", "back to the overview")]
    }
}
