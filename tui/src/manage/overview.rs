//! Overview: each array's health in words (naming a missing or failed
//! member by model and serial), how full the filesystems are, the shares,
//! any unfinished operation, and the actions to choose from.

use super::model::Tone;
use super::{Effect, ManageAction, ManageScreen, Manager};
use crate::ui::Help;
use crate::ui::input::{Nav, nav};
use nasforge_engine::spec::Share;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// Replace the missing or failed member of the i-th array.
    Replace(usize),
    Grow(usize),
    Shares,
    Users,
    TestAlerts,
}

/// The actions on offer: a replace only for a degraded array that is not
/// already rebuilding.
pub fn menu(m: &Manager) -> Vec<Item> {
    let arrays = &m.overview.arrays;
    let mut items: Vec<Item> = (0..arrays.len())
        .filter(|&i| arrays[i].degraded && arrays[i].sync.is_none())
        .map(Item::Replace)
        .collect();
    items.extend((0..arrays.len()).map(Item::Grow));
    items.extend([Item::Shares, Item::Users, Item::TestAlerts]);
    items
}

fn item_text(m: &Manager, item: Item) -> String {
    let name = |i: usize| m.overview.arrays[i].name.clone();
    match item {
        Item::Replace(i) => format!("Replace the failed disk of '{}'", name(i)),
        Item::Grow(i) => format!("Grow '{}' with more disks", name(i)),
        Item::Shares => "Shares: add or remove".into(),
        Item::Users => "Users: add one, change an SMB password".into(),
        Item::TestAlerts => "Send a test alert".into(),
    }
}

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    let items = menu(m);
    match (nav(key), key.code) {
        (Some(Nav::Up), _) => m.menu = m.menu.saturating_sub(1),
        (Some(Nav::Down), _) => m.menu = (m.menu + 1).min(items.len().saturating_sub(1)),
        (Some(Nav::Next), _) => return choose(m, items[m.menu.min(items.len() - 1)]),
        (_, KeyCode::Char('r')) => return Effect::Refresh,
        (Some(Nav::Back), _) | (_, KeyCode::Char('q')) => return Effect::Quit,
        _ => {}
    }
    Effect::None
}

fn choose(m: &mut Manager, item: Item) -> Effect {
    match item {
        Item::Replace(i) => super::pick::open(m, i, ManageScreen::Replace),
        Item::Grow(i) => super::pick::open(m, i, ManageScreen::Grow),
        Item::Shares => {
            m.shares = Default::default();
            m.screen = ManageScreen::Shares;
        }
        Item::Users => {
            m.users = Default::default();
            m.screen = ManageScreen::Users;
        }
        Item::TestAlerts => return Effect::Plan(ManageAction::TestAlerts),
    }
    Effect::None
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let theme = &m.theme;
    let mut lines: Vec<Line> = vec![Line::styled("Arrays", theme.title())];
    for a in &m.overview.arrays {
        let (words, tone) = a.health();
        let style = match tone {
            Tone::Good => theme.good(),
            Tone::Busy => theme.warning(),
            Tone::Bad => theme.error(),
        };
        lines.push(Line::styled(
            format!("  {} {} {}: {words}", a.name, a.level, a.md_device),
            style,
        ));
    }
    lines.push(Line::styled("Filesystems", theme.title()));
    for f in &m.overview.filesystems {
        lines.push(Line::raw(format!(
            "  {} ({}): {}",
            f.mount,
            f.array,
            f.usage()
        )));
    }
    lines.push(Line::styled("Shares", theme.title()));
    if m.overview.shares.is_empty() {
        lines.push(Line::styled("  none", theme.disabled()));
    }
    for s in &m.overview.shares {
        lines.push(Line::raw(format!("  {} {}: {}", s.name, s.path, reach(s))));
    }
    if let Some(title) = &m.overview.pending {
        lines.push(Line::styled(
            format!("Unfinished: {title}; `sudo nasforge-setup resume` finishes it."),
            theme.warning(),
        ));
    }
    lines.push(Line::styled("Actions", theme.title()));
    for (i, item) in menu(m).into_iter().enumerate() {
        let (mark, style) = if i == m.menu {
            ("> ", theme.cursor())
        } else {
            ("  ", Style::new())
        };
        lines.push(Line::styled(format!("{mark}{}", item_text(m, item)), style));
    }
    frame.render_widget(Paragraph::new(lines), area);
    vec![
        ("↑↓", "action"),
        ("Enter", "choose"),
        ("r", "read again"),
        ("Esc", "leave"),
    ]
}

/// Who reaches a share, and how, in a few words.
fn reach(share: &Share) -> String {
    let mut ways = Vec::new();
    if let Some(smb) = &share.smb {
        let mut who = smb.users.join(", ");
        if smb.guest {
            who = if who.is_empty() {
                "guests read".into()
            } else {
                format!("{who}; guests read")
            };
        }
        ways.push(format!("SMB for {who}"));
    }
    if let Some(nfs) = &share.nfs {
        ways.push(format!("NFS to {}", nfs.clients.0.join(" ")));
    }
    ways.join("; ")
}
