//! Disks: every disk the system sees, what it is and what it holds. Disks
//! the system needs are greyed out with the reason; Space chooses the
//! others. A disk holding data may be chosen ("erase and use"), but it is
//! only erased after its name is typed on the review screen; or, when it
//! holds a filesystem setup can mount, k keeps it ("share as it is").
//! A disk holding a member of an md array or a ZFS pool another machine
//! made offers i: adopt that array as it is, all its disks with it.
//! With disks on several controllers (a PC with SAS HBAs) the table groups
//! them under a header per controller, scrolls, and `a` chooses a whole
//! controller's disks.

mod groups;

use super::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::wizard::adopted::{self, Adopted};
use crate::wizard::choices;
use crate::wizard::kept::{self, Kept};
use crate::wizard::{Effect, Screen, Wizard};
use groups::Row as ListRow;
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
    /// The cursor disk, by its index in the inventory.
    pub cursor: usize,
    /// Kernel names of the chosen disks.
    pub chosen: Vec<String>,
    /// Disks shared as they are: never array members, never erased.
    pub kept: Vec<Kept>,
    /// An old NAS's array or pool adopted as it is: the wizard's one array
    /// instead of a new one, its disks neither chosen nor kept.
    pub adopted: Option<Adopted>,
    /// The failing disk Space was pressed on once: a second press on it
    /// chooses it all the same.
    pub asked_failing: Option<String>,
    /// The table's first visible row, kept from frame to frame so the
    /// table scrolls with the cursor, and its height (what PgUp/PgDn
    /// move): both are learnt when drawing.
    offset: std::cell::Cell<usize>,
    page: std::cell::Cell<usize>,
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let rows = groups::rows(&w.facts.inventory.disks);
    let at = groups::row_of(&rows, w.disks.cursor);
    let page = w.disks.page.get().max(1);
    if let Some(to) = nav(key).and_then(|n| groups::step(&rows, at, n, page)) {
        w.disks.cursor = to;
        return Effect::None;
    }
    match nav(key) {
        Some(Nav::Toggle) => toggle(w),
        None if key.code == KeyCode::Char('k') => toggle_kept(w),
        None if key.code == KeyCode::Char('a') => toggle_controller(w),
        None if key.code == KeyCode::Char('i') => toggle_adopted(w),
        Some(Nav::Next) if !w.has_array() && w.disks.kept.is_empty() => w.error(
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
    } else if let Some(adopted) = &w.disks.adopted {
        w.error(one_array(adopted));
    } else if let Some(why) = choices::ineligible(disk) {
        w.error(format!("{name} cannot be used: {why}"));
    } else {
        let failing = w.facts.health.get(&name) == Some(&Some(false));
        if failing && w.disks.asked_failing.as_deref() != Some(name.as_str()) {
            w.error(format!(
                "{} is failing by SMART's account: what is written to it may be lost. Press Space again to choose it all the same.",
                disk.words()
            ));
            w.disks.asked_failing = Some(name);
            return;
        }
        w.disks.asked_failing = None;
        if failing {
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

/// Chooses every disk on the cursor disk's controller that may be chosen
/// and is not kept, or unchooses them when all already are. A disk SMART
/// says is failing is left for Space, which says so.
fn toggle_controller(w: &mut Wizard) {
    let disks = &w.facts.inventory.disks;
    let Some(cursor) = disks.get(w.disks.cursor) else {
        return;
    };
    if let Some(adopted) = &w.disks.adopted {
        w.error(one_array(adopted));
        return;
    }
    let pci = groups::controller_of(cursor);
    let on = cursor.controller.as_ref().map_or_else(
        || "no PCI controller".to_string(),
        |c| format!("the {} ({})", c.label(), c.pci),
    );
    let failing = |d: &Disk| w.facts.health.get(&d.name) == Some(&Some(false));
    let usable: Vec<&Disk> = disks
        .iter()
        .filter(|d| groups::controller_of(d) == pci)
        .filter(|d| choices::ineligible(d).is_none() && !failing(d))
        .filter(|d| !w.disks.kept.iter().any(|k| k.disk == d.name))
        .collect();
    if usable.is_empty() {
        w.error(format!("No disk on {on} can be chosen."));
        return;
    }
    let names: Vec<String> = usable.iter().map(|d| d.name.clone()).collect();
    if names.iter().all(|n| w.disks.chosen.contains(n)) {
        w.disks.chosen.retain(|n| !names.contains(n));
        w.info(format!(
            "The {} disks on {on} are no longer chosen",
            names.len()
        ));
        return;
    }
    let with_data: Vec<&str> = usable
        .iter()
        .filter(|d| !d.is_blank() && !w.disks.chosen.contains(&d.name))
        .map(|d| d.name.as_str())
        .collect();
    let mut text = format!("All {} usable disks on {on} are chosen", names.len());
    match with_data.as_slice() {
        [] => {}
        [one] => {
            text += &format!("; {one} holds data: you will type its name before anything erases it")
        }
        many => {
            text += &format!(
                "; {} hold data: you will type their names before anything erases them",
                many.join(", ")
            )
        }
    }
    for name in names {
        if !w.disks.chosen.contains(&name) {
            w.disks.chosen.push(name);
        }
    }
    w.info(text);
}

/// Why no disk can be chosen beside an adopted array.
fn one_array(adopted: &Adopted) -> String {
    format!(
        "The wizard sets up one array, and the {} {} is adopted: press i on one of its disks to build a new array instead (a recipe can do both)",
        adopted.level,
        if adopted.is_pool() { "pool" } else { "array" }
    )
}

/// "Adopt as it is": the array or pool holding the cursor disk becomes the
/// wizard's array, with all its disks; or is let go again. Nothing is
/// chosen beside it: the wizard sets up one array.
fn toggle_adopted(w: &mut Wizard) {
    let Some(disk) = w.facts.inventory.disks.get(w.disks.cursor) else {
        return;
    };
    let name = disk.name.clone();
    if w.disks
        .adopted
        .as_ref()
        .is_some_and(|a| a.disks.contains(&name))
    {
        w.disks.adopted = None;
        w.info(format!("The array on {name} is no longer adopted"));
        return;
    }
    let adopted = match adopted::of_disk(&name, &w.facts.inventory) {
        None => {
            w.error(format!(
                "{name} holds no md array or ZFS pool another machine made, so there is nothing to adopt"
            ));
            return;
        }
        Some(Err(why)) => {
            w.error(format!("{name} cannot be adopted: {why}"));
            return;
        }
        Some(Ok(adopted)) => adopted,
    };
    if !w.disks.chosen.is_empty() {
        w.error(format!(
            "The wizard sets up one array: unchoose {} to adopt {name}'s, or adopt it with a recipe beside a new one",
            w.disks.chosen.join(", ")
        ));
        return;
    }
    w.disks.kept.retain(|k| !adopted.disks.contains(&k.disk));
    // The layout screen and the shares follow what the array is: its
    // filesystem, and a pool's own name.
    if let Some(filesystem) = adopted.filesystem {
        w.layout.filesystem = filesystem;
    }
    if let Some(pool) = &adopted.pool {
        w.layout.pool = TextField::new(pool);
        w.layout.mount = TextField::new(&format!("/srv/{pool}"));
    }
    w.info(format!(
        "Adopted as it is: {}. Nothing on it is erased, partitioned or formatted",
        adopted.words
    ));
    w.disks.adopted = Some(adopted);
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
    let grouped = groups::rows(&w.facts.inventory.disks)
        .iter()
        .any(|r| r.disk().is_none());
    let mut keys = vec![("↑↓", "move"), ("Space", "choose")];
    if grouped {
        keys.push(("a", "all on controller"));
    }
    let cursor = w.facts.inventory.disks.get(w.disks.cursor);
    if cursor.is_some_and(|d| adopted::of_disk(&d.name, &w.facts.inventory).is_some()) {
        keys.push(("i", "adopt as it is"));
    }
    keys.extend([("Enter", "layout"), ("Esc", "back"), ("Ctrl-C", "quit")]);
    keys
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
    let rows = groups::rows(&w.facts.inventory.disks);
    let about = w
        .facts
        .inventory
        .disks
        .get(w.disks.cursor)
        .map(|d| detail(w, d))
        .unwrap_or_default();
    // When the table does not fit, the detail gives up the lines it does
    // not need and one line says how many disks are out of sight.
    let room = area.height.saturating_sub(warnings_height + 5 + 1);
    let (detail_height, more_height) = if rows.len() + 1 > usize::from(room) {
        let needed: u16 = about
            .iter()
            .map(|l| wrapped_lines(&l.to_string(), area.width))
            .sum();
        (needed.clamp(3, 5), 1)
    } else {
        (5, 0)
    };
    let [
        warnings_area,
        table_area,
        more_area,
        detail_area,
        chosen_area,
    ] = Layout::vertical([
        Constraint::Length(warnings_height),
        Constraint::Fill(1),
        Constraint::Length(more_height),
        Constraint::Length(detail_height),
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

    // The column headings take the table's first line.
    let page = usize::from(table_area.height.saturating_sub(1));
    let at = groups::row_of(&rows, w.disks.cursor);
    let offset = groups::scroll(&rows, w.disks.offset.get(), at, page);
    w.disks.offset.set(offset);
    w.disks.page.set(page);
    let mut state = TableState::default()
        .with_offset(offset)
        .with_selected(Some(at));
    frame.render_stateful_widget(table(w, &rows), table_area, &mut state);
    // A group's header is drawn over its empty table row: a table cell
    // cannot span the columns.
    for (i, row) in rows.iter().enumerate().skip(offset).take(page) {
        if let ListRow::Group(label) = row {
            let line = Rect {
                y: table_area.y + 1 + (i - offset) as u16,
                height: 1,
                ..table_area
            };
            frame.render_widget(
                Line::styled(format!(" {label}"), w.settings.theme.title()),
                line,
            );
        }
    }
    let above = rows[..offset.min(rows.len())]
        .iter()
        .filter_map(ListRow::disk)
        .count();
    let below = rows
        .iter()
        .skip(offset + page)
        .filter_map(ListRow::disk)
        .count();
    let more: Vec<String> = [("↑", above), ("↓", below)]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(arrow, n)| format!("{arrow} {n} more"))
        .collect();
    frame.render_widget(Line::raw(format!(" {}", more.join("  "))), more_area);

    frame.render_widget(
        Paragraph::new(about).wrap(Wrap { trim: false }),
        detail_area,
    );
    frame.render_widget(
        Paragraph::new(chosen_summary(w, usize::from(chosen_area.width))),
        chosen_area,
    );
}

/// Every disk in a row: chosen or not, identity, health and contents; a
/// group's header row is left empty for `draw` to fill.
fn table<'a>(w: &'a Wizard, rows: &[ListRow]) -> Table<'a> {
    let theme = &w.settings.theme;
    let disks = &w.facts.inventory.disks;
    // Name and size columns as wide as their widest value ("mmcblk0",
    // "500.1 GB"), no narrower than their headings.
    let widest = |heading: &str, value: fn(&Disk) -> String| {
        disks
            .iter()
            .map(|d| value(d).chars().count())
            .chain([heading.len()])
            .max()
            .unwrap_or_default() as u16
    };
    let name_width = widest("Disk", |d| d.name.clone());
    let size_width = widest("Size", |d| d.size.to_string());
    let rows = rows.iter().map(|row| {
        let Some(d) = row.disk().and_then(|i| disks.get(i)) else {
            return Row::new(Vec::<Cell>::new());
        };
        let chosen = w.disks.chosen.contains(&d.name);
        let kept = w.disks.kept.iter().any(|k| k.disk == d.name);
        let ineligible = choices::ineligible(d).is_some();
        let adopted = w
            .disks
            .adopted
            .as_ref()
            .is_some_and(|a| a.disks.contains(&d.name));
        let mark = match (chosen, kept, ineligible) {
            _ if adopted => "[i]",
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
            Constraint::Length(name_width),
            Constraint::Length(size_width),
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

/// The chosen disks by name, or counted by controller when the names
/// would not fit on the line.
fn chosen_summary(w: &Wizard, width: usize) -> String {
    let chosen = w.chosen();
    let kept: Vec<&str> = w.kept().iter().map(|k| k.disk.as_str()).collect();
    let kept = match kept.is_empty() {
        true => String::new(),
        false => format!("; kept as it is: {}", kept.join(", ")),
    };
    if let Some(a) = &w.disks.adopted {
        let what = if a.is_pool() { "pool" } else { "array" };
        return format!(
            "Adopted: the {} {what} on {}{kept}",
            a.level,
            a.disks.join(", ")
        );
    }
    if chosen.is_empty() {
        return format!("Chosen: none yet{kept}");
    }
    let names: Vec<&str> = chosen.iter().map(|d| d.name.as_str()).collect();
    let total = nasforge_engine::size::Size(chosen.iter().map(|d| d.size.0).sum());
    let by_name = format!("Chosen: {} ({total} raw){kept}", names.join(", "));
    if by_name.chars().count() <= width {
        return by_name;
    }
    let mut controllers: Vec<Option<&str>> =
        chosen.iter().map(|d| groups::controller_of(d)).collect();
    controllers.sort();
    controllers.dedup();
    let on = match controllers.len() {
        1 => "1 controller".to_string(),
        n => format!("{n} controllers"),
    };
    format!("Chosen: {} disks on {on} ({total} raw){kept}", chosen.len())
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
    let adopted = w
        .disks
        .adopted
        .as_ref()
        .filter(|a| a.disks.contains(&d.name));
    if let Some(a) = adopted {
        lines.push(Line::styled(
            format!("Adopted as it is: {}; nothing on it is erased.", a.words),
            theme.good(),
        ));
    } else if let Some(Ok(a)) = adopted::of_disk(&d.name, &w.facts.inventory) {
        lines.push(Line::styled(
            format!(
                "Holds {}: i adopts it as it is, with its files; Space erases it for a new array.",
                a.words
            ),
            theme.warning(),
        ));
    } else if let Some(k) = w.disks.kept.iter().find(|k| k.disk == d.name) {
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
