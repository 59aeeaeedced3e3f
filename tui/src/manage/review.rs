//! Review: the action's plan in words and every command, before anything
//! changes. As in setup, a disk that holds data is not erased until its
//! name or serial is typed.

use super::backend::Erases;
use super::{Effect, ManageAction, ManageScreen, Manager, Planned};
use crate::ui::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::ui::scroll::Scroll;
use nasforge_engine::executor;
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::collections::BTreeSet;

#[derive(Debug)]
pub struct Review {
    pub action: ManageAction,
    pub planned: Planned,
    /// The screen Esc goes back to.
    pub back: ManageScreen,
    pub scroll: Scroll,
    pub confirm: TextField,
    /// Disks whose erasure was confirmed by typing their name or serial.
    pub confirmed: BTreeSet<String>,
}

impl Review {
    pub fn new(action: ManageAction, planned: Planned, back: ManageScreen) -> Review {
        Review {
            action,
            planned,
            back,
            scroll: Scroll::default(),
            confirm: TextField::default(),
            confirmed: BTreeSet::new(),
        }
    }

    /// The first disk holding data not confirmed yet.
    pub fn pending(&self) -> Option<&Erases> {
        self.planned
            .erases
            .iter()
            .find(|e| !self.confirmed.contains(&key_of(e)))
    }
}

fn key_of(e: &Erases) -> String {
    e.disk.name.clone().unwrap_or_else(|| e.disk.serial.clone())
}

fn names(e: &Erases, typed: &str) -> bool {
    nasforge_engine::machine::disks::is_named(
        typed,
        e.disk.name.as_deref(),
        None,
        Some(&e.disk.serial),
    )
}

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    let Some(review) = m.review.as_mut() else {
        m.screen = ManageScreen::Overview;
        return Effect::None;
    };
    let nav = nav(key);
    if let Some(n @ (Nav::Up | Nav::Down | Nav::PageUp | Nav::PageDown | Nav::Home | Nav::End)) =
        nav
    {
        review.scroll.nav(n);
        return Effect::None;
    }
    match nav {
        Some(Nav::Next) => {
            if let Some(e) = review.pending() {
                let (id, name) = (key_of(e), e.disk.name.clone().unwrap_or_default());
                if names(e, review.confirm.value().trim()) {
                    review.confirmed.insert(id);
                    review.confirm.clear();
                    m.info(format!("{name} will be erased when this starts."));
                } else {
                    m.error(format!(
                        "That is not {name}'s name or serial; nothing is erased without it."
                    ));
                }
                return Effect::None;
            }
            if m.dry_run {
                m.screen = ManageScreen::Overview;
                m.info("Dry run: nothing was changed.");
                return Effect::None;
            }
            let steps = review
                .planned
                .steps
                .iter()
                .map(|s| s.title.clone())
                .collect();
            m.progress = super::progress::Progress::new(review.planned.title.clone(), steps);
            m.screen = ManageScreen::Progress;
            return Effect::Run;
        }
        Some(Nav::Back) => m.screen = review.back,
        _ => {
            if review.pending().is_some() {
                review.confirm.handle(key);
            }
        }
    }
    Effect::None
}

fn text(m: &Manager, planned: &Planned) -> Vec<(String, Style)> {
    let theme = &m.theme;
    let mut lines = vec![
        (
            "Nothing has changed yet. This will:".to_string(),
            theme.title(),
        ),
        (String::new(), Style::new()),
    ];
    lines.extend(planned.text.lines().map(|l| (l.to_string(), Style::new())));
    if !planned.steps.is_empty() {
        lines.push((String::new(), Style::new()));
        lines.push(("Commands, in order:".into(), theme.title()));
        for l in executor::dry_run(&planned.steps).lines() {
            lines.push((l.to_string(), Style::new()));
        }
    }
    lines
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let Some(review) = &m.review else {
        return Vec::new();
    };
    let theme = &m.theme;
    let [body, rule, ask, field] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(area);
    let more = review.scroll.draw(frame, body, &text(m, &review.planned));
    let rule_text = if more {
        "── more below: ↓ PgDn End ──"
    } else {
        "── end ──"
    };
    frame.render_widget(Line::styled(rule_text, theme.disabled()), rule);
    let enter = if let Some(e) = review.pending() {
        let name = e.disk.name.clone().unwrap_or_default();
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!(
                    "{name} ({}) holds {}. Type {name} or its serial {} to erase it:",
                    e.disk.model, e.holds, e.disk.serial
                ),
                theme.warning(),
            ))
            .wrap(Wrap { trim: false }),
            ask,
        );
        let [mark, input] =
            Layout::horizontal([Constraint::Length(2), Constraint::Length(24)]).areas(field);
        frame.render_widget(Span::raw(">"), mark);
        review.confirm.draw(frame, input, true, theme);
        "confirm"
    } else {
        let (what, enter) = if m.dry_run {
            ("Dry run: Enter goes back; nothing runs.", "back")
        } else {
            (
                "Enter starts it. A power cut on the way resumes it at the next boot.",
                "start",
            )
        };
        frame.render_widget(Paragraph::new(what).wrap(Wrap { trim: false }), ask);
        enter
    };
    vec![
        ("↑↓ PgUp PgDn", "scroll"),
        ("Enter", enter),
        ("Esc", "back"),
        ("Ctrl-C", "quit"),
    ]
}
