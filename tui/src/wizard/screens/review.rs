//! Review: the plan in words and every command, exactly as the setup
//! service will run them (the same steps are written to its journal).
//! Nothing starts while a chosen disk that holds data has not been
//! confirmed by typing its name or serial.

use super::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::ui::scroll::{Scroll, wrap_hanging};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::executor;
use nasforge_engine::machine::disks::Disk;
use nasforge_engine::planner::Plan;
use nasforge_engine::shares::samba;
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub struct Review {
    pub scroll: Scroll,
    pub confirm: TextField,
    /// Disks whose erasure the user confirmed by typing their name.
    pub confirmed: BTreeSet<String>,
}

/// The first chosen disk that holds data and is not confirmed yet.
fn pending(w: &Wizard) -> Option<&Disk> {
    w.chosen()
        .into_iter()
        .find(|d| !d.is_blank() && !w.review.confirmed.contains(&d.name))
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let nav = nav(key);
    if let Some(n @ (Nav::Up | Nav::Down | Nav::PageUp | Nav::PageDown | Nav::Home | Nav::End)) =
        nav
    {
        w.review.scroll.nav(n);
        return Effect::None;
    }
    match nav {
        Some(Nav::Next) => {
            if let Some(disk) = pending(w) {
                let name = disk.name.clone();
                if disk.is_named(w.review.confirm.value()) {
                    w.review.confirmed.insert(name.clone());
                    w.review.confirm.clear();
                    w.info(format!("{name} will be erased when setup starts."));
                } else {
                    w.error(format!(
                        "That is not {name}'s name or serial; nothing is erased without it."
                    ));
                }
                return Effect::None;
            }
            match w.handoff() {
                Ok(handoff) => return Effect::Start(Box::new(handoff)),
                Err(problems) => w.error(problems.join("; ")),
            }
        }
        Some(Nav::Back) => w.screen = Screen::Alerts,
        _ => {
            if pending(w).is_some() {
                w.review.confirm.handle(key);
            }
        }
    }
    Effect::None
}

pub fn help(w: &Wizard) -> Help {
    let enter = if pending(w).is_some() {
        Some("confirm")
    } else if w.settings.dry_run {
        Some("print and exit")
    } else {
        Some("start setup")
    };
    let mut keys = vec![("↑↓ PgUp PgDn", "scroll")];
    keys.extend(enter.map(|what| ("Enter", what)));
    keys.extend([("Esc", "back"), ("Ctrl-C", "quit")]);
    keys
}

/// The shares in words. The plan's own line per share (what `plan`
/// prints) says neither who may read without a password nor how much room
/// Time Machine takes, and has no users to name on a share only guests
/// read.
fn describe_shares(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for share in &plan.shares {
        out.push(format!("Share '{}': {}", share.name, share.path));
        if let Some(quota) = share.quota {
            out.push(format!("  holds at most {} (a ZFS quota)", quota.exact()));
        }
        if let Some(smb) = &share.smb {
            let users = smb.users.join(", ");
            out.push(match (smb.guest, smb.users.is_empty()) {
                (false, _) if smb.readonly => format!("  SMB read-only for {users}"),
                (false, _) => format!("  SMB for {users}"),
                (true, true) => {
                    "  SMB: guests may read without a password; nobody may write".to_string()
                }
                (true, false) if smb.readonly => {
                    format!("  SMB: guests and {users} may read without writing")
                }
                (true, false) => {
                    format!("  SMB: guests may read without a password; only {users} may write")
                }
            });
            if smb.timemachine {
                let limit = match (smb.timemachine_max_size, plan.timemachine_limit(share)) {
                    (Some(size), _) => size.exact(),
                    (None, Some(size)) if smb.users.len() > 1 => {
                        format!("half the array shared among its users, about {size} each")
                    }
                    (None, Some(size)) => format!("half the array, about {size}"),
                    (None, None) => "no limit (the share is on no array)".to_string(),
                };
                out.push(format!("  Time Machine for Macs, limited to {limit}"));
            }
        }
        if let Some(nfs) = &share.nfs {
            out.push(format!("  NFS to {}", nfs.clients.0.join(" ")));
        }
    }
    out
}

/// Each kept disk in a line of its own, saying that nothing on it is
/// erased: the one thing its owner needs to read before Enter.
fn describe_kept(w: &Wizard) -> Vec<String> {
    w.kept()
        .iter()
        .zip(w.storage().disks)
        .map(|(k, entry)| {
            format!(
                "Kept as it is: {}, mounted at {}, nothing erased",
                k.describe(),
                entry.mount
            )
        })
        .collect()
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    // Why setup cannot start, shown whole: it says what to do.
    let blocked = w
        .facts
        .packages_missing
        .clone()
        .filter(|_| !w.settings.dry_run)
        .map(|why| format!("Setup cannot start: {why}."));
    let below = blocked
        .as_ref()
        .map_or(3, |t| wrap_hanging(t, area.width as usize, 0).len().max(3));
    let [text, prompt] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(1 + below as u16)]).areas(area);
    let more = w.review.scroll.draw(frame, text, &plan_text(w));
    draw_prompt(frame, prompt, w, more, blocked);
}

/// The plan in words, then every command (or why setup cannot be handed
/// them); or why there is no plan.
fn plan_text(w: &Wizard) -> Vec<(String, Style)> {
    let theme = &w.settings.theme;
    let plan = match w.plan() {
        Ok(plan) => plan,
        Err(problems) => return problems.into_iter().map(|p| (p, theme.error())).collect(),
    };
    let mut lines: Vec<(String, Style)> = vec![
        (
            "Nothing has changed yet. Setup will do this:".into(),
            theme.title(),
        ),
        (String::new(), Style::new()),
    ];
    // Kept disks get their own lines below.
    let arrays = Plan {
        shares: Vec::new(),
        kept: Vec::new(),
        system_mirror: None,
        ..plan.clone()
    };
    for l in arrays.describe().lines() {
        let style = if l.trim_start().starts_with("warning:") {
            theme.warning()
        } else {
            Style::new()
        };
        lines.push((l.to_string(), style));
    }
    for l in describe_kept(w) {
        lines.push((l, theme.good()));
    }
    if !w.layout.spin_down.is_off() {
        lines.push((
            format!(
                "Idle hard disks spin down after {} (hd-idle); SSDs never do.",
                w.layout.spin_down
            ),
            Style::new(),
        ));
    }
    for l in describe_shares(&plan) {
        lines.push((l, Style::new()));
    }
    for l in w
        .alerts
        .choices()
        .ok()
        .flatten()
        .iter()
        .flat_map(|a| a.describe())
    {
        lines.push((l, Style::new()));
    }
    let users: Vec<String> = w
        .passwords_to_stage()
        .into_iter()
        .map(|(user, _, _)| user)
        .collect();
    if !users.is_empty() {
        lines.push((
            format!(
                "Samba passwords for {} are staged as NT hashes in {} (never in clear) for the step that imports them.",
                users.join(", "),
                samba::STAGED_PASSWORDS
            ),
            Style::new(),
        ));
    }
    lines.push((String::new(), Style::new()));
    lines.push(("Commands, in order:".into(), theme.title()));
    match w.handoff() {
        Ok(handoff) => {
            for l in executor::dry_run(&handoff.steps).lines() {
                lines.push((l.to_string(), Style::new()));
            }
        }
        Err(problems) => lines.extend(problems.into_iter().map(|p| (p, theme.error()))),
    }
    lines
}

/// Below the text: whether more follows, then the disk to confirm, why
/// setup cannot start, or what Enter does.
fn draw_prompt(frame: &mut Frame, area: Rect, w: &Wizard, more: bool, blocked: Option<String>) {
    let theme = &w.settings.theme;
    let [rule, ask, field] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Fill(1),
    ])
    .areas(area);
    let rule_text = if more {
        "── more below: ↓ PgDn End ──"
    } else {
        "── end ──"
    };
    frame.render_widget(Line::styled(rule_text, theme.disabled()), rule);
    if let Some(disk) = pending(w) {
        draw_confirm(frame, ask, field, w, disk);
    } else if let Some(why) = blocked {
        frame.render_widget(
            Paragraph::new(why)
                .style(theme.error())
                .wrap(Wrap { trim: false }),
            ask.union(field),
        );
    } else {
        let text = if w.settings.dry_run {
            "Dry run: Enter prints this plan, its commands and the recipe, then exits. Nothing runs."
        } else {
            "Enter starts setup. It runs as a service: closing this screen does not stop it."
        };
        frame.render_widget(
            Paragraph::new(text).wrap(Wrap { trim: false }),
            ask.union(field),
        );
    }
}

/// What the disk holds, and the field its name or serial is typed in.
fn draw_confirm(frame: &mut Frame, ask: Rect, field: Rect, w: &Wizard, disk: &Disk) {
    let serial = disk
        .serial
        .as_deref()
        .map(|s| format!(" or its serial {s}"))
        .unwrap_or_default();
    frame.render_widget(
        Paragraph::new(Span::styled(
            format!(
                "{} holds {}. Type {}{serial} to erase it:",
                disk.name,
                disk.describe_contents(),
                disk.name
            ),
            w.settings.theme.warning(),
        ))
        .wrap(Wrap { trim: false }),
        ask,
    );
    let [mark, input] =
        Layout::horizontal([Constraint::Length(2), Constraint::Length(24)]).areas(field);
    frame.render_widget(Span::raw(">"), mark);
    w.review.confirm.draw(frame, input, true, &w.settings.theme);
}
