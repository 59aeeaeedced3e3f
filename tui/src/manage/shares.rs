//! Shares: the current shares, each of which can be marked for removal,
//! and one new SMB share to add. Enter hands the whole new list to the
//! engine, which applies it as `nasforge-setup apply` applies an edited
//! recipe; the review shows the difference.

use super::{Effect, ManageAction, ManageScreen, Manager};
use crate::ui::Help;
use crate::ui::input::{Nav, TextField, nav};
use nasforge_engine::spec::{Share, Smb};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub struct ShareEdit {
    /// Names of the shares marked for removal.
    pub remove: BTreeSet<String>,
    pub name: TextField,
    /// Empty for a folder named after the share on the first array.
    pub path: TextField,
    pub users: TextField,
    /// The existing shares come first, then the new share's three fields.
    pub focus: usize,
}

const NEW_FIELDS: usize = 3;

fn words(field: &TextField) -> Vec<String> {
    field
        .value()
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The new share list, or what is wrong with the new share.
pub fn new_list(m: &Manager) -> Result<Vec<Share>, String> {
    let edit = &m.shares;
    let mut list: Vec<Share> = m
        .overview
        .shares
        .iter()
        .filter(|s| !edit.remove.contains(&s.name))
        .cloned()
        .collect();
    let name = edit.name.value().trim();
    if name.is_empty() {
        return Ok(list);
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "Share name '{name}': use letters, digits, - and _ only."
        ));
    }
    if list.iter().any(|s| s.name.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "There is already a share '{name}'; choose another name."
        ));
    }
    let path = match edit.path.value().trim() {
        "" => match m.overview.filesystems.first() {
            Some(fs) => format!("{}/{name}", fs.mount.trim_end_matches('/')),
            None => return Err("There is no array to put the share on.".into()),
        },
        p if p.starts_with('/') => p.to_string(),
        p => {
            return Err(format!(
                "Folder '{p}': give the full path, starting with /."
            ));
        }
    };
    let users = words(&edit.users);
    if users.is_empty() {
        return Err("Name at least one user who may use the share.".into());
    }
    if let Some(u) = users.iter().find(|u| !m.overview.users.contains(u)) {
        return Err(format!(
            "There is no user '{u}' (users: {}); add one under Users first.",
            m.overview.users.join(", ")
        ));
    }
    list.push(Share {
        quota: None,
        name: name.to_string(),
        path,
        smb: Some(Smb {
            users,
            timemachine: false,
            timemachine_max_size: None,
            readonly: false,
            guest: false,
        }),
        nfs: None,
    });
    Ok(list)
}

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    let existing = m.overview.shares.len();
    let rows = existing + NEW_FIELDS;
    let focus = m.shares.focus;
    if focus >= existing {
        let edit = &mut m.shares;
        let field = [&mut edit.name, &mut edit.path, &mut edit.users]
            .into_iter()
            .nth(focus - existing);
        if field.is_some_and(|f| f.handle(key)) {
            return Effect::None;
        }
    }
    match nav(key) {
        Some(Nav::Up | Nav::PrevField) => m.shares.focus = focus.saturating_sub(1),
        Some(Nav::Down | Nav::NextField) => m.shares.focus = (focus + 1).min(rows - 1),
        Some(Nav::Toggle) if focus < existing => {
            let name = m.overview.shares[focus].name.clone();
            if !m.shares.remove.remove(&name) {
                m.shares.remove.insert(name);
            }
        }
        Some(Nav::Next) => match new_list(m) {
            Ok(list) if list == m.overview.shares => {
                m.error("Nothing changed: mark a share with Space, or name a new one.")
            }
            Ok(list) => return Effect::Plan(ManageAction::Shares(list)),
            Err(problem) => m.error(problem),
        },
        Some(Nav::Back) => m.screen = ManageScreen::Overview,
        _ => {}
    }
    Effect::None
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let theme = &m.theme;
    let edit = &m.shares;
    let existing = m.overview.shares.len();
    let mut rows = vec![Constraint::Length(1); existing + NEW_FIELDS + 2];
    rows.push(Constraint::Fill(1));
    let areas = Layout::vertical(rows).split(area);
    frame.render_widget(
        Line::styled("Shares (Space: remove or keep)", theme.title()),
        areas[0],
    );
    for (i, share) in m.overview.shares.iter().enumerate() {
        let gone = edit.remove.contains(&share.name);
        let style = if edit.focus == i {
            theme.cursor()
        } else {
            Style::new()
        };
        let mark = if gone { "[remove]" } else { "[keep]  " };
        frame.render_widget(
            Line::styled(format!("{mark} {} {}", share.name, share.path), style),
            areas[1 + i],
        );
    }
    frame.render_widget(
        Line::styled(
            "Add a share (SMB; leave the name empty to add none)",
            theme.title(),
        ),
        areas[1 + existing],
    );
    let fields = [
        ("Name", &edit.name, ""),
        (
            "Folder",
            &edit.path,
            "empty: on the array, named after the share",
        ),
        ("Users", &edit.users, "who may read and write"),
    ];
    for (k, (label, field, note)) in fields.into_iter().enumerate() {
        let [l, v, n] = Layout::horizontal([
            Constraint::Length(9),
            Constraint::Length(24),
            Constraint::Fill(1),
        ])
        .areas(areas[2 + existing + k]);
        frame.render_widget(Span::raw(label), l);
        field.draw(frame, v, edit.focus == existing + k, theme);
        frame.render_widget(Span::styled(format!(" {note}"), theme.disabled()), n);
    }
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!("Users: {}", m.overview.users.join(", ")),
            theme.disabled(),
        )),
        areas[existing + NEW_FIELDS + 2],
    );
    vec![
        ("↑↓", "row"),
        ("Space", "remove/keep"),
        ("Enter", "review"),
        ("Esc", "back"),
    ]
}
