//! Users: add an account that may use the shares, or change a user's SMB
//! password. The password is typed twice, masked.

use super::{Effect, ManageAction, ManageScreen, Manager, Secret};
use crate::ui::Help;
use crate::ui::input::{Nav, TextField, nav};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Mode,
    Name,
    Password,
    Again,
}

const FIELDS: [Field; 4] = [Field::Mode, Field::Name, Field::Password, Field::Again];

#[derive(Debug)]
pub struct UserForm {
    /// Adding a user, or changing an existing user's password.
    pub add: bool,
    pub name: TextField,
    pub password: TextField,
    pub again: TextField,
    pub focus: Field,
}

impl Default for UserForm {
    fn default() -> UserForm {
        UserForm {
            add: false,
            name: TextField::default(),
            password: TextField::masked(),
            again: TextField::masked(),
            focus: Field::Mode,
        }
    }
}

/// A name `adduser` takes without `--allow-bad-names`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name.len() <= 32
}

/// The action, or what is wrong and the field to fix.
pub fn action(m: &Manager) -> Result<ManageAction, (String, Field)> {
    let form = &m.users;
    let name = form.name.value().trim().to_string();
    let known = m.overview.users.contains(&name);
    if form.add && !valid_name(&name) {
        return Err((
            format!(
                "User name '{name}': start with a lowercase letter; then lowercase letters, digits, - and _."
            ),
            Field::Name,
        ));
    }
    if form.add && known {
        return Err((
            format!("'{name}' exists already; change its password instead."),
            Field::Name,
        ));
    }
    if !form.add && !known {
        return Err((
            format!(
                "There is no user '{name}' (users: {}).",
                m.overview.users.join(", ")
            ),
            Field::Name,
        ));
    }
    if form.password.value().is_empty() {
        return Err((format!("Type an SMB password for {name}."), Field::Password));
    }
    if form.password.value() != form.again.value() {
        return Err((
            "The two passwords differ; type them again.".into(),
            Field::Again,
        ));
    }
    let password = Secret(form.password.value().to_string());
    Ok(if form.add {
        ManageAction::AddUser { name, password }
    } else {
        ManageAction::SetPassword { name, password }
    })
}

pub fn key(m: &mut Manager, key: KeyEvent) -> Effect {
    let form = &mut m.users;
    let field = match form.focus {
        Field::Name => Some(&mut form.name),
        Field::Password => Some(&mut form.password),
        Field::Again => Some(&mut form.again),
        Field::Mode => None,
    };
    if field.is_some_and(|f| f.handle(key)) {
        return Effect::None;
    }
    let at = FIELDS.iter().position(|f| *f == form.focus).unwrap_or(0);
    match nav(key) {
        Some(Nav::Toggle) if form.focus == Field::Mode => form.add = !form.add,
        Some(Nav::Down | Nav::NextField) => form.focus = FIELDS[(at + 1).min(FIELDS.len() - 1)],
        Some(Nav::Up | Nav::PrevField) => form.focus = FIELDS[at.saturating_sub(1)],
        Some(Nav::Next) => match action(m) {
            Ok(action) => return Effect::Plan(action),
            Err((problem, field)) => {
                m.users.focus = field;
                m.error(problem);
            }
        },
        Some(Nav::Back) => m.screen = ManageScreen::Overview,
        _ => {}
    }
    Effect::None
}

pub fn draw(frame: &mut Frame, area: Rect, m: &Manager) -> Help {
    let theme = &m.theme;
    let form = &m.users;
    let areas = Layout::vertical([Constraint::Length(1); 6]).split(area);
    let mode = if form.add {
        "< Add a user >"
    } else {
        "< Change an SMB password >"
    };
    let style = if form.focus == Field::Mode {
        theme.cursor()
    } else {
        Default::default()
    };
    frame.render_widget(Span::styled(mode, style), areas[0]);
    let fields = [
        (Field::Name, "User", &form.name),
        (Field::Password, "Password", &form.password),
        (Field::Again, "Again", &form.again),
    ];
    for (k, (field, label, text)) in fields.into_iter().enumerate() {
        let [l, v] = Layout::horizontal([Constraint::Length(10), Constraint::Length(32)])
            .areas(areas[2 + k]);
        frame.render_widget(Span::raw(label), l);
        text.draw(frame, v, form.focus == field, theme);
    }
    frame.render_widget(
        Line::styled(
            format!("Users: {}", m.overview.users.join(", ")),
            theme.disabled(),
        ),
        areas[5],
    );
    let mut keys = vec![("↑↓", "field")];
    if form.focus == Field::Mode {
        keys.push(("Space", "add / change"));
    }
    keys.extend([("Enter", "review"), ("Esc", "back")]);
    keys
}
