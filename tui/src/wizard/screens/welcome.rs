//! Welcome: what this box is, what the kernel sees of its SATA card or SAS
//! HBA (or why it sees none), and where it is on the network.

use super::Help;
use crate::ui::input::{Nav, nav};
use crate::ui::scroll::wrap_hanging;
use crate::ui::theme::Theme;
use crate::wizard::choices;
use crate::wizard::hardware::StorageController;
use crate::wizard::{Effect, Screen, Wizard};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    match nav(key) {
        Some(Nav::Next) => w.screen = Screen::Disks,
        Some(Nav::Back) => return Effect::Quit,
        _ => {}
    }
    Effect::None
}

pub fn help(_: &Wizard) -> Help {
    vec![("Enter", "choose disks"), ("Esc", "quit")]
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let mut lines: Vec<Line> = [
        "This wizard turns the disks in this box into network storage: a RAID",
        "array, a filesystem and shares. Nothing on any disk changes until you",
        "confirm on the review screen.",
        "",
    ]
    .into_iter()
    .map(Line::raw)
    .collect();
    lines.extend(machine(w, area.width as usize));
    lines.push(Line::raw(""));
    lines.extend(warnings(w));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

/// The board, its kernel, storage controllers, network and disks: a labelled
/// row each.
fn machine(w: &Wizard, width: usize) -> Vec<Line<'static>> {
    let hw = &w.facts.hardware;
    let unknown = || "unknown".to_string();
    let mut lines = Vec::new();
    let mut row =
        |label: &str, value: String| lines.extend(labelled(&w.settings.theme, width, label, value));
    row("Board", hw.board.clone().unwrap_or_else(unknown));
    row("Kernel", hw.kernel.clone().unwrap_or_else(unknown));
    if hw.controllers.is_empty() {
        row("SATA", "no controller found".into());
    }
    for c in &hw.controllers {
        row(&c.bus.to_string(), controller(c));
    }
    row("Network", network(w));
    row("Disks", disk_summary(w));
    lines
}

/// A label, then its value wrapped under itself.
fn labelled(theme: &Theme, width: usize, label: &str, value: String) -> Vec<Line<'static>> {
    let wrapped = wrap_hanging(&format!("{label:<10}{value}"), width, 10);
    wrapped
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                let rest: String = l.chars().skip(10).collect();
                Line::from(vec![
                    Span::styled(format!("{label:<10}"), theme.title()),
                    Span::raw(rest),
                ])
            } else {
                Line::raw(l)
            }
        })
        .collect()
}

fn controller(c: &StorageController) -> String {
    let mut text = format!("{} at {}", c.name, c.pci);
    if let Some(link) = &c.link {
        text += &format!(", {link}");
    }
    text += &match &c.driver {
        Some(driver) => match c.disks {
            1 => format!(", driver {driver}, 1 disk"),
            n => format!(", driver {driver}, {n} disks"),
        },
        None => ", NO DRIVER".to_string(),
    };
    text
}

fn network(w: &Wizard) -> String {
    let hw = &w.facts.hardware;
    match (&hw.address, &w.facts.inventory.network) {
        (Some(addr), link) => {
            let mut text = addr.to_string();
            if let Some(net) = &hw.network {
                text += &format!(" on {net}");
            }
            if let Some(link) = link {
                text += &format!(", {} at {} Mbit/s", link.interface, link.mbit);
            }
            text
        }
        (None, _) => "no address yet: is the cable in, and is there DHCP?".into(),
    }
}

/// What stands in the way (hardware problems, missing packages, no root),
/// and whether this is a dry run.
fn warnings(w: &Wizard) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let mut lines: Vec<Line> = w
        .facts
        .hardware
        .problems
        .iter()
        .map(|problem| Line::styled(format!("! {problem}"), theme.warning()))
        .collect();
    if let Some(why) = &w.facts.packages_missing {
        lines.push(Line::styled(
            format!("! Setup cannot start: {why}."),
            theme.error(),
        ));
    }
    if w.facts.not_root {
        lines.push(Line::styled(
            "! Not running as root: disks cannot be read or set up. Run `sudo nasforge-setup`.",
            theme.error(),
        ));
    }
    if w.settings.dry_run {
        lines.push(Line::styled(
            "Dry run: the review screen shows every command; nothing is run.",
            Style::new(),
        ));
    }
    lines
}

fn disk_summary(w: &Wizard) -> String {
    let disks = &w.facts.inventory.disks;
    let usable: Vec<_> = disks
        .iter()
        .filter(|d| choices::ineligible(d).is_none())
        .collect();
    let with_data = usable.iter().filter(|d| !d.is_blank()).count();
    let mut text = format!("{} found, {} can be used", disks.len(), usable.len());
    match with_data {
        0 => {}
        1 => text += " (one holds data)",
        n => text += &format!(" ({n} hold data)"),
    }
    let system: Vec<&str> = disks
        .iter()
        .filter(|d| {
            d.in_use
                .contains(&nasforge_engine::machine::disks::InUse::Boot)
        })
        .map(|d| d.name.as_str())
        .collect();
    if !system.is_empty() {
        text += &format!("; the system is on {}", system.join(", "));
    }
    text
}
