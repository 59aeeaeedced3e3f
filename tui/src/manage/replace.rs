//! Replace a disk: the degraded array's missing or failed member, named by
//! model and serial, and the attached disks that could take its place.

use super::pick::{self, array};
use super::{Effect, ManageAction, ManageScreen, Manager};
use crate::ui::Help;
use crate::ui::input::{Nav, nav};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    match (nav(key), key.code) {
        (Some(Nav::Up), _) => pick::move_cursor(m, false),
        (Some(Nav::Down), _) => pick::move_cursor(m, true),
        (Some(Nav::Next), _) => match pick::current(m) {
            Some(disk) => {
                return Effect::Plan(ManageAction::Replace {
                    array: array(m).name.clone(),
                    disk,
                });
            }
            None => m.error(
                "No attached disk fits. Attach a blank disk at least as large as the members, then press r.",
            ),
        },
        (_, KeyCode::Char('r')) => return Effect::Refresh,
        (Some(Nav::Back), _) => m.screen = ManageScreen::Overview,
        _ => {}
    }
    Effect::None
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let a = array(m);
    let (health, _) = a.health();
    let mut lines = vec![
        Line::raw(format!(
            "'{}' ({}, {}) is {health}.",
            a.name, a.level, a.md_device
        )),
        Line::raw(""),
        Line::styled("Choose the disk that takes its place:", m.theme.title()),
    ];
    lines.extend(pick::lines(m, false));
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Nothing changes before the review. Then md rebuilds onto the new disk while the array stays in use.",
        m.theme.disabled(),
    ));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
    vec![
        ("↑↓", "disk"),
        ("Enter", "review"),
        ("r", "look again"),
        ("Esc", "back"),
    ]
}
