//! Grow an array: disks added as more mirrors (raid1) or by a reshape
//! (raid5, raid6), then the filesystem grown; a ZFS pool by whole vdevs of
//! its shape. A level that cannot grow this way says why and offers
//! nothing.

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
    if array(m).cannot_grow.is_some() {
        if nav(key).is_some() {
            m.screen = ManageScreen::Overview;
        }
        return Effect::None;
    }
    match (nav(key), key.code) {
        (Some(Nav::Up), _) => pick::move_cursor(m, false),
        (Some(Nav::Down), _) => pick::move_cursor(m, true),
        (Some(Nav::Toggle), _) => {
            if let Some(disk) = pick::current(m)
                && !m.pick.chosen.remove(&disk)
            {
                m.pick.chosen.insert(disk);
            }
        }
        (Some(Nav::Next), _) if m.pick.chosen.is_empty() => {
            m.error("Choose at least one disk with Space.")
        }
        (Some(Nav::Next), _) => {
            return Effect::Plan(ManageAction::Grow {
                array: array(m).name.clone(),
                disks: m.pick.chosen.iter().cloned().collect(),
            });
        }
        (_, KeyCode::Char('r')) => return Effect::Refresh,
        (Some(Nav::Back), _) => m.screen = ManageScreen::Overview,
        _ => {}
    }
    Effect::None
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let a = array(m);
    let mut lines = vec![Line::raw(format!(
        "'{}' is {} with {} members ({}).",
        a.name, a.level, a.expected, a.md_device
    ))];
    if let Some(why) = &a.cannot_grow {
        lines.push(Line::styled(
            format!("It cannot grow: {why}"),
            m.theme.error(),
        ));
        frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
        return vec![("Esc", "back")];
    }
    if a.level.is_zfs() {
        lines.push(Line::raw(
            "ZFS grows a pool by whole vdevs of its shape: choose as many disks as one of its vdevs has (any number for a stripe). The review names the zpool add.",
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("Choose the disks to add:", m.theme.title()));
    lines.extend(pick::lines(m, true));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
    vec![
        ("↑↓", "disk"),
        ("Space", "choose"),
        ("Enter", "review"),
        ("Esc", "back"),
    ]
}
