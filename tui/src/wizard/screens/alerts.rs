//! Alerts: who hears of a failing disk. Email through an SMTP relay (the
//! board has no mail server of its own), a webhook, an ntfy topic; any of
//! them, or none (Enter on an empty form skips it).

use super::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::wizard::alerts::{address_problem, url_problem};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::spec::{Alerts, Smtp, Tls};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Email,
    Host,
    Port,
    Tls,
    From,
    User,
    Password,
    Webhook,
    Ntfy,
}

const FIELDS: [Field; 9] = [
    Field::Email,
    Field::Host,
    Field::Port,
    Field::Tls,
    Field::From,
    Field::User,
    Field::Password,
    Field::Webhook,
    Field::Ntfy,
];

#[derive(Debug)]
pub struct AlertForm {
    pub email: TextField,
    pub host: TextField,
    /// Empty for the TLS mode's usual port.
    pub port: TextField,
    pub tls: Tls,
    pub from: TextField,
    pub user: TextField,
    pub password: TextField,
    pub webhook: TextField,
    pub ntfy: TextField,
    pub focus: Field,
}

impl Default for AlertForm {
    fn default() -> AlertForm {
        AlertForm {
            email: TextField::default(),
            host: TextField::default(),
            port: TextField::default(),
            tls: Tls::Starttls,
            from: TextField::default(),
            user: TextField::default(),
            password: TextField::masked(),
            webhook: TextField::default(),
            ntfy: TextField::default(),
            focus: Field::Email,
        }
    }
}

fn typed(field: &TextField) -> Option<String> {
    let text = field.value().trim();
    (!text.is_empty()).then(|| text.to_string())
}

impl AlertForm {
    fn text_mut(&mut self, field: Field) -> Option<&mut TextField> {
        Some(match field {
            Field::Email => &mut self.email,
            Field::Host => &mut self.host,
            Field::Port => &mut self.port,
            Field::From => &mut self.from,
            Field::User => &mut self.user,
            Field::Password => &mut self.password,
            Field::Webhook => &mut self.webhook,
            Field::Ntfy => &mut self.ntfy,
            Field::Tls => return None,
        })
    }

    /// The choices, None when the form is empty (no alerts); or what is
    /// wrong and the field to fix.
    pub fn choices(&self) -> Result<Option<Alerts>, (String, Field)> {
        let email = typed(&self.email);
        let smtp = self.smtp(email.is_some())?;
        let webhook = typed(&self.webhook);
        let ntfy = typed(&self.ntfy);
        if let Some(p) = email.as_deref().and_then(|e| address_problem("Email", e)) {
            return Err((p, Field::Email));
        }
        if let Some(p) = webhook.as_deref().and_then(|u| url_problem("Webhook", u)) {
            return Err((p, Field::Webhook));
        }
        if let Some(p) = ntfy.as_deref().and_then(|u| url_problem("ntfy", u)) {
            return Err((p, Field::Ntfy));
        }
        let choices = Alerts {
            email,
            webhook,
            ntfy,
            temperature: None,
            smtp,
        };
        Ok(
            (choices.email.is_some() || choices.webhook.is_some() || choices.ntfy.is_some())
                .then_some(choices),
        )
    }

    /// The relay, required with an email address and refused without one
    /// (it would send nothing).
    fn smtp(&self, email: bool) -> Result<Option<Smtp>, (String, Field)> {
        let host = typed(&self.host);
        let filled = [&self.port, &self.from, &self.user, &self.password]
            .iter()
            .any(|f| typed(f).is_some());
        let host = match (email, host) {
            (false, None) if !filled => return Ok(None),
            (false, _) => {
                return Err((
                    "The SMTP relay only carries email: type the address alerts go to, or clear the SMTP fields.".into(),
                    Field::Email,
                ));
            }
            (true, None) => {
                return Err((
                    "Email needs an SMTP relay: the host of your mail provider's server (e.g. smtp.example.com).".into(),
                    Field::Host,
                ));
            }
            (true, Some(host)) if host.contains(['/', ':', ' ']) => {
                return Err((
                    format!(
                        "SMTP host: '{host}' is not a host name; type only the name, the port goes below."
                    ),
                    Field::Host,
                ));
            }
            (true, Some(host)) => host,
        };
        let port = match typed(&self.port) {
            None => self.tls.default_port(),
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                (
                    format!("SMTP port: '{p}' is not a port number (1 to 65535); leave it empty for {}.", self.tls.default_port()),
                    Field::Port,
                )
            })?,
        };
        let from = typed(&self.from);
        if let Some(p) = from.as_deref().and_then(|f| address_problem("From", f)) {
            return Err((p, Field::From));
        }
        let password =
            (!self.password.value().is_empty()).then(|| self.password.value().to_string());
        Ok(Some(Smtp {
            host,
            port: Some(i64::from(port)),
            tls: self.tls,
            from,
            user: typed(&self.user),
            password,
        }))
    }
}

/// The TLS mode after `tls`, as Space steps through them.
fn next_tls(tls: Tls) -> Tls {
    match tls {
        Tls::Starttls => Tls::Tls,
        Tls::Tls => Tls::Off,
        Tls::Off => Tls::Starttls,
    }
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let focus = w.alerts.focus;
    if let Some(field) = w.alerts.text_mut(focus)
        && field.handle(key)
    {
        return Effect::None;
    }
    let at = FIELDS.iter().position(|f| *f == focus).unwrap_or(0);
    match nav(key) {
        Some(Nav::Toggle) if focus == Field::Tls => w.alerts.tls = next_tls(w.alerts.tls),
        Some(Nav::Down | Nav::NextField) => w.alerts.focus = FIELDS[(at + 1).min(FIELDS.len() - 1)],
        Some(Nav::Up | Nav::PrevField) => w.alerts.focus = FIELDS[at.saturating_sub(1)],
        Some(Nav::Next) => match w.alerts.choices() {
            Err((problem, field)) => {
                w.alerts.focus = field;
                w.error(problem);
            }
            Ok(_) => {
                w.review.scroll = Default::default();
                w.screen = Screen::Review;
            }
        },
        Some(Nav::Back) => w.screen = Screen::Shares,
        _ => {}
    }
    Effect::None
}

pub fn help(w: &Wizard) -> Help {
    let mut keys = vec![("↑↓", "field")];
    if w.alerts.focus == Field::Tls {
        keys.push(("Space", "change"));
    }
    let enter = if matches!(w.alerts.choices(), Ok(None)) {
        "review (no alerts)"
    } else {
        "review"
    };
    keys.extend([("Enter", enter), ("Esc", "back"), ("Ctrl-C", "quit")]);
    keys
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let form = &w.alerts;
    let [intro, rows] = Layout::vertical([Constraint::Length(3), Constraint::Fill(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(
            "Who hears of a failing disk, a rebuild or a full filesystem? Fill in any of these, or leave them all empty for no alerts.",
        )
        .wrap(Wrap { trim: true }),
        intro,
    );
    let port_hint = format!("empty: {}", form.tls.default_port());
    let lines: [(Field, &str, Option<&TextField>, &str); 9] = [
        (
            Field::Email,
            "Email to",
            Some(&form.email),
            "where alerts are mailed",
        ),
        (
            Field::Host,
            "SMTP host",
            Some(&form.host),
            "your provider's relay",
        ),
        (Field::Port, "SMTP port", Some(&form.port), &port_hint),
        (Field::Tls, "TLS", None, "Space: starttls, tls, off"),
        (
            Field::From,
            "From",
            Some(&form.from),
            "empty: nasforge@<host>",
        ),
        (Field::User, "SMTP user", Some(&form.user), "optional"),
        (
            Field::Password,
            "Password",
            Some(&form.password),
            "kept root-only",
        ),
        (
            Field::Webhook,
            "Webhook URL",
            Some(&form.webhook),
            "JSON POST",
        ),
        (
            Field::Ntfy,
            "ntfy URL",
            Some(&form.ntfy),
            "https://ntfy.sh/topic",
        ),
    ];
    let areas = Layout::vertical(vec![Constraint::Length(1); lines.len()]).split(rows);
    for ((field, label, text, note), row) in lines.iter().zip(areas.iter()) {
        let focused = form.focus == *field;
        let [label_area, value, note_area] = Layout::horizontal([
            Constraint::Length(13),
            Constraint::Length(32),
            Constraint::Fill(1),
        ])
        .areas(*row);
        frame.render_widget(Span::raw(*label), label_area);
        match text {
            Some(t) => t.draw(frame, value, focused, theme),
            None => {
                let style = if focused {
                    theme.cursor()
                } else {
                    Default::default()
                };
                frame.render_widget(
                    Span::styled(format!("< {} >", form.tls.word()), style),
                    value,
                );
            }
        }
        frame.render_widget(
            Line::styled(format!(" {note}"), theme.disabled()),
            note_area,
        );
    }
}
