//! Disks: every disk the system sees, what it is and what it holds. Disks
//! the system needs are greyed out with the reason; Space chooses the
//! others. A disk holding data may be chosen ("erase and use"), but it is
//! only erased after its name is typed on the review screen; or, when it
//! holds a filesystem setup can mount, k keeps it ("share as it is").

use super::Help;
use crate::wizard::choices;
use crate::wizard::input::{Nav, nav};
use crate::wizard::kept::{self, Kept};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::machine::disks::Disk;
use nasforge_engine::machine::uas_quirks;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Cell, HighlightSpacing, Paragraph, Row, Table, TableState, Wrap};

#[derive(Debug, Default)]
pub struct DiskList {
    pub cursor: usize,
    /// Kernel names of the chosen disks.
    pub chosen: Vec<String>,
    /// Disks shared as they are: never array members, never erased.
    pub kept: Vec<Kept>,
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let count = w.facts.inventory.disks.len();
    match nav(key) {
        Some(Nav::Up) => w.disks.cursor = w.disks.cursor.saturating_sub(1),
        Some(Nav::Down) => w.disks.cursor = (w.disks.cursor + 1).min(count.saturating_sub(1)),
        Some(Nav::Home) => w.disks.cursor = 0,
        Some(Nav::End) => w.disks.cursor = count.saturating_sub(1),
        Some(Nav::Toggle) => toggle(w),
        None if key.code == KeyCode::Char('k') => toggle_kept(w),
        Some(Nav::Next) if w.disks.chosen.is_empty() && w.disks.kept.is_empty() => w.error(
            "Choose at least one disk with Space, or keep one that holds files with k, first.",
        ),
        Some(Nav::Next) => w.screen = Screen::Layout,
        Some(Nav::Back) => w.screen = Screen::Welcome,
        _ => {}
    }
    Effect::None
}

fn toggle(w: &mut Wizard) {
    let Some(disk) = w.facts.inventory.disks.get(w.disks.cursor) else {
        return;
    };
    let name = disk.name.clone();
    if let Some(i) = w.disks.chosen.iter().position(|n| *n == name) {
        w.disks.chosen.remove(i);
    } else if let Some(why) = choices::ineligible(disk) {
        w.error(format!("{name} cannot be used: {why}"));
    } else {
        if w.facts.health.get(&name) == Some(&Some(false)) {
            w.error(format!(
                "{name} is failing by SMART's account; chosen all the same"
            ));
        } else if !disk.is_blank() {
            w.info(format!(
                "{name} holds data: you will type its name before anything erases it"
            ));
        }
        w.disks.kept.retain(|k| k.disk != name);
        w.disks.chosen.push(name);
    }
}

/// "Share as it is": marks the cursor disk kept (no longer chosen for the
/// array), or unmarks it.
fn toggle_kept(w: &mut Wizard) {
    let Some(disk) = w.facts.inventory.disks.get(w.disks.cursor) else {
        return;
    };
    let name = disk.name.clone();
    if let Some(i) = w.disks.kept.iter().position(|k| k.disk == name) {
        w.disks.kept.remove(i);
        return;
    }
    match kept::keep(disk, &w.facts.inventory) {
        Ok(kept) => {
            w.info(format!(
                "{name} is kept: its {} is shared as it is, nothing on it is erased",
                kept.filesystem_words()
            ));
            w.disks.chosen.retain(|n| *n != name);
            w.disks.kept.push(kept);
        }
        Err(why) => w.error(format!("{name} cannot be shared as it is: {why}")),
    }
}

/// Over a disk holding a filesystem setup can keep, Space erases it and k
/// keeps it: both are named, and Ctrl-C makes room for them.
pub fn help(w: &Wizard) -> Help {
    let keepable = w
        .facts
        .inventory
        .disks
        .get(w.disks.cursor)
        .is_some_and(|d| kept::keep(d, &w.facts.inventory).is_ok());
    if keepable {
        return vec![
            ("↑↓", "move"),
            ("Space", "erase and use"),
            ("k", "share as it is"),
            ("Enter", "layout"),
            ("Esc", "back"),
        ];
    }
    vec![
        ("↑↓", "move"),
        ("Space", "choose"),
        ("Enter", "layout"),
        ("Esc", "back"),
        ("Ctrl-C", "quit"),
    ]
}

fn health(w: &Wizard, disk: &Disk) -> &'static str {
    match w.facts.health.get(&disk.name).copied().flatten() {
        Some(true) => "passed",
        Some(false) => "FAILING",
        None => "unknown",
    }
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    // Power trouble goes above the list: a disk that drops off for want of
    // power later looks like a failing disk.
    let warnings: Vec<String> = w
        .facts
        .power_warnings
        .iter()
        .map(|text| format!("! {text}"))
        .collect();
    let warnings_height = warnings
        .iter()
        .map(|text| wrapped_lines(text, area.width))
        .sum::<u16>()
        .min(area.height / 3);
    let [warnings_area, table_area, detail_area, chosen_area] = Layout::vertical([
        Constraint::Length(warnings_height),
        Constraint::Fill(1),
        Constraint::Length(5),
        Constraint::Length(1),
    ])
    .areas(area);
    let style = w.settings.theme.warning();
    let lines: Vec<Line> = warnings
        .into_iter()
        .map(|text| Line::styled(text, style))
        .collect();
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }),
        warnings_area,
    );
    let mut state = TableState::default().with_selected(Some(w.disks.cursor));
    frame.render_stateful_widget(table(w), table_area, &mut state);
    if let Some(d) = w.facts.inventory.disks.get(w.disks.cursor) {
        frame.render_widget(
            Paragraph::new(detail(w, d)).wrap(Wrap { trim: false }),
            detail_area,
        );
    }
    frame.render_widget(Paragraph::new(chosen_summary(w)), chosen_area);
}

/// Every disk in a row: chosen or not, identity, health and contents.
fn table(w: &Wizard) -> Table<'_> {
    let theme = &w.settings.theme;
    let rows = w.facts.inventory.disks.iter().map(|d| {
        let chosen = w.disks.chosen.contains(&d.name);
        let kept = w.disks.kept.iter().any(|k| k.disk == d.name);
        let ineligible = choices::ineligible(d).is_some();
        let mark = match (chosen, kept, ineligible) {
            (true, _, _) => "[x]",
            (_, true, _) => "[k]",
            (false, false, true) => " - ",
            (false, false, false) => "[ ]",
        };
        let kind = format!(
            "{} {}",
            if d.rotational { "HDD" } else { "SSD" },
            d.transport.map_or("?".to_string(), |t| t.to_string())
        );
        let style = if ineligible {
            theme.disabled()
        } else {
            Style::new()
        };
        Row::new(vec![
            Cell::from(mark),
            Cell::from(d.name.clone()),
            Cell::from(d.size.to_string()),
            Cell::from(kind),
            Cell::from(d.model.clone().unwrap_or_default()),
            Cell::from(d.serial.clone().unwrap_or_default()),
            Cell::from(health(w, d)),
            Cell::from(choices::holds(d)),
        ])
        .style(style)
    });
    Table::new(
        rows,
        [
            Constraint::Length(3),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Fill(1),
            Constraint::Length(15),
            Constraint::Length(7),
            Constraint::Length(13),
        ],
    )
    .header(
        Row::new([
            "", "Disk", "Size", "Type", "Model", "Serial", "SMART", "Holds",
        ])
        .style(theme.title()),
    )
    .row_highlight_style(theme.cursor())
    // A marker as well as the style: some consoles show neither colour nor
    // reverse video.
    .highlight_symbol(">")
    .highlight_spacing(HighlightSpacing::Always)
}

/// About how many lines `text` takes wrapped at spaces to `width`.
fn wrapped_lines(text: &str, width: u16) -> u16 {
    let width = usize::from(width);
    let mut lines = 1;
    let mut used = 0;
    for word in text.split(' ').map(|w| w.chars().count()) {
        if used > 0 && used + 1 + word > width {
            lines += 1;
            used = word;
        } else {
            used += usize::from(used > 0) + word;
        }
    }
    lines
}

/// "usb 5 Gbit/s, uas, JMicron JMS566 357d:7788 — on the UAS problem list"
fn usb_words(d: &Disk) -> Option<String> {
    let speed = d.usb_mbit.map(|mbit| match mbit {
        1000.. => format!("usb {} Gbit/s", mbit / 1000),
        _ => format!("usb {mbit} Mbit/s"),
    });
    let bridge = d.usb.as_ref().map(|b| {
        let driver = b.driver.map_or("no driver".to_string(), |d| d.to_string());
        let name = b.name.as_ref().map(|n| format!("{n} ")).unwrap_or_default();
        let problem = uas_quirks::lookup(b.vendor, b.product)
            .map(|_| " — on the UAS problem list")
            .unwrap_or_default();
        format!("{driver}, {name}{}{problem}", b.id())
    });
    match (speed, bridge) {
        (Some(speed), Some(bridge)) => Some(format!("{speed}, {bridge}")),
        (speed, bridge) => speed.or(bridge),
    }
}

fn chosen_summary(w: &Wizard) -> String {
    let chosen = w.chosen();
    let kept: Vec<&str> = w.kept().iter().map(|k| k.disk.as_str()).collect();
    let kept = match kept.is_empty() {
        true => String::new(),
        false => format!("; kept as it is: {}", kept.join(", ")),
    };
    if chosen.is_empty() {
        return format!("Chosen: none yet{kept}");
    }
    let names: Vec<&str> = chosen.iter().map(|d| d.name.as_str()).collect();
    let total = nasforge_engine::size::Size(chosen.iter().map(|d| d.size.0).sum());
    format!("Chosen: {} ({total} raw){kept}", names.join(", "))
}

/// The cursor disk in full: identity, where it hangs, what it holds.
fn detail(w: &Wizard, d: &Disk) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let mut id = format!(
        "{}: {}",
        d.name,
        d.model.as_deref().unwrap_or("unknown model")
    );
    if let Some(serial) = &d.serial {
        id += &format!(", serial {serial}");
    }
    if let Some(c) = &d.controller {
        id += &format!(", on the {} ({})", c.label(), c.pci);
    }
    if let Some(usb) = usb_words(d) {
        id += &format!(", {usb}");
    }
    id += &format!(", SMART {}", health(w, d));
    let mut lines = vec![Line::raw(id)];
    if w.facts.health.get(&d.name) == Some(&Some(false)) {
        lines.push(Line::styled(
            "SMART says this disk is failing: replace it rather than build on it.",
            theme.error(),
        ));
    }
    if let Some(k) = w.disks.kept.iter().find(|k| k.disk == d.name) {
        lines.push(Line::styled(
            format!(
                "Holds {}. Kept: {} is shared as it is; nothing on it is erased.",
                d.describe_contents(),
                k.device
            ),
            theme.good(),
        ));
    } else if let Some(why) = choices::ineligible(d) {
        // A disk with no serial of its own may still be found by its WWN
        // or model and size, which is enough to keep one disk.
        let keep = match kept::keep(d, &w.facts.inventory) {
            Ok(_) => "; k shares it as it is",
            Err(_) => "",
        };
        lines.push(Line::styled(
            format!("Cannot be used: {why}{keep}."),
            theme.disabled(),
        ));
    } else if d.is_blank() {
        lines.push(Line::raw("Empty: ready to use."));
    } else {
        let keep = match kept::keep(d, &w.facts.inventory) {
            Ok(_) => "; k shares it as it is instead".to_string(),
            Err(why) => format!(". It cannot be shared as it is: {why}"),
        };
        lines.push(Line::styled(
            format!(
                "Holds {}. Space erases it for the array (you will type its name to confirm){keep}.",
                d.describe_contents()
            ),
            theme.warning(),
        ));
    }
    lines
}
