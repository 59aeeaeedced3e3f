//! Progress: the setup service's steps as its journal records them, the
//! end of its log, and md's resync estimate. The wizard only watches:
//! leaving this screen leaves the setup running.

use super::Help;
use crate::ui::input::{Nav, nav};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::image_files::SETUP_SERVICE;
use nasforge_engine::journal::Journal;
use nasforge_engine::setup;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

/// Where the setup stands, from the latest reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Starting,
    Running,
    /// Not finished, and the service is not running: it failed, or it never
    /// started (systemd refused, or the board lost power before it ran).
    Stopped,
    Complete,
}

fn stage(w: &Wizard) -> Stage {
    let service = w.progress.as_ref().and_then(|p| p.service.as_deref());
    let stopped = matches!(service, Some("failed" | "inactive"));
    match w.progress.as_ref().map(|p| &p.journal) {
        Some(Ok(Some(j))) if j.is_complete() => Stage::Complete,
        Some(Ok(Some(j))) if j.failure.is_some() || stopped => Stage::Stopped,
        Some(Ok(Some(_))) => Stage::Running,
        _ if stopped => Stage::Stopped,
        _ => Stage::Starting,
    }
}

fn journal(w: &Wizard) -> Option<&Journal> {
    match w.progress.as_ref().map(|p| &p.journal) {
        Some(Ok(Some(j))) => Some(j),
        _ => None,
    }
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    match (stage(w), nav(key), key.code) {
        (Stage::Complete, Some(Nav::Next), _) => w.screen = Screen::Done,
        (Stage::Stopped, _, KeyCode::Char('r')) if w.settings.dry_run => {
            w.error("Dry run: the setup service is not started.")
        }
        (Stage::Stopped, _, KeyCode::Char('r')) => return Effect::Retry,
        (_, Some(Nav::Back), _) | (_, _, KeyCode::Char('q')) => return Effect::Quit,
        _ => {}
    }
    Effect::None
}

pub fn help(w: &Wizard) -> Help {
    match stage(w) {
        Stage::Complete => vec![("Enter", "how to connect"), ("Esc", "leave")],
        Stage::Stopped => vec![("r", "start again where it stopped"), ("Esc", "leave")],
        _ => vec![("Esc", "leave (setup goes on)")],
    }
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let [head, steps_area, output_area, md_area, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(7),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(2),
    ])
    .areas(area);
    draw_header(frame, head, w);
    if let Some(j) = journal(w) {
        draw_steps(frame, steps_area, w, j);
    }
    draw_output(frame, output_area, w);
    frame.render_widget(Line::raw(resync(w)), md_area);
    frame.render_widget(
        Paragraph::new(format!(
            "Setup runs as {SETUP_SERVICE}: leaving this screen does not stop it. Run `sudo nasforge-setup` to come back."
        ))
        .style(w.settings.theme.disabled())
        .wrap(Wrap { trim: true }),
        foot,
    );
}

/// Where the setup stands, in a line, and the service's own state below it.
fn draw_header(frame: &mut Frame, area: Rect, w: &Wizard) {
    let service = w
        .progress
        .as_ref()
        .and_then(|p| p.service.clone())
        .unwrap_or_else(|| "unknown".into());
    let (headline, style) = headline(w);
    frame.render_widget(
        Paragraph::new(vec![
            Line::styled(headline, style),
            Line::styled(
                format!("{SETUP_SERVICE}: {service}"),
                w.settings.theme.disabled(),
            ),
        ])
        .wrap(Wrap { trim: true }),
        area,
    );
}

fn headline(w: &Wizard) -> (String, Style) {
    let theme = &w.settings.theme;
    match (stage(w), journal(w)) {
        (Stage::Complete, Some(j)) => (
            format!("Setup finished: all {} steps done.", j.steps.len()),
            theme.good(),
        ),
        (Stage::Stopped, Some(j)) => match &j.failure {
            Some(f) => (
                format!("Setup FAILED at step {}: {}", f.index + 1, f.error),
                theme.error(),
            ),
            None => (
                format!(
                    "Setup stopped after {} of {} steps; it resumes where it stopped.",
                    j.done.len(),
                    j.steps.len()
                ),
                theme.warning(),
            ),
        },
        (Stage::Stopped, None) => (
            format!(
                "{SETUP_SERVICE} failed before its first step: see `journalctl -u {SETUP_SERVICE}`"
            ),
            theme.error(),
        ),
        (_, Some(j)) => (
            format!(
                "Setting up: {} of {} steps done.",
                j.done.len(),
                j.steps.len()
            ),
            Style::new(),
        ),
        (_, None) => match w.progress.as_ref().map(|p| &p.journal) {
            Some(Err(e)) => (e.clone(), theme.error()),
            _ => ("Starting setup...".into(), Style::new()),
        },
    }
}

/// The journal's steps, each marked done, failed, running or to come.
fn draw_steps(frame: &mut Frame, area: Rect, w: &Wizard, j: &Journal) {
    let theme = &w.settings.theme;
    let current = j.next_step();
    let rows = area.height as usize;
    // Keep the running step in view, with what was just done above it.
    let first = current
        .saturating_sub(rows / 2)
        .min(j.steps.len().saturating_sub(rows));
    let lines: Vec<Line> = j
        .steps
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, step)| {
            let failed = j.failure.as_ref().is_some_and(|f| f.index == i);
            let (mark, style) = if i < current {
                ("ok ", theme.good())
            } else if failed {
                ("!! ", theme.error())
            } else if i == current {
                (">> ", theme.title())
            } else {
                ("   ", Style::new())
            };
            Line::styled(
                format!("{mark}[{}/{}] {}", i + 1, j.steps.len(), step.title),
                style,
            )
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// The end of the setup log, as much as fits.
fn draw_output(frame: &mut Frame, area: Rect, w: &Wizard) {
    let block = Block::new()
        .borders(Borders::TOP)
        .title(format!("Output ({})", setup::LOG));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let log = w
        .progress
        .as_ref()
        .map(|p| p.log.as_slice())
        .unwrap_or_default();
    let tail: Vec<Line> = log[log.len().saturating_sub(inner.height as usize)..]
        .iter()
        .map(|l| Line::raw(l.clone()))
        .collect();
    frame.render_widget(Paragraph::new(tail), inner);
}

/// md's resync of each array still building its redundancy, with a bar.
fn resync(w: &Wizard) -> String {
    let syncing: Vec<String> = w
        .progress
        .iter()
        .flat_map(|p| &p.arrays)
        .filter_map(|a| {
            let sync = a.sync.as_ref()?;
            let name = a.name.as_deref().unwrap_or(&a.device);
            let filled = ((sync.percent / 5.0).round() as usize).min(20);
            Some(format!(
                "{name}: [{}{}] {sync}",
                "#".repeat(filled),
                "-".repeat(20 - filled)
            ))
        })
        .collect();
    syncing.join("  ")
}
