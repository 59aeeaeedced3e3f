//! Choosing disks for an array, shared by the replace and grow screens:
//! the disks that fit can be chosen, the others are listed greyed with
//! the reason they do not fit.

use super::model::ArrayView;
use super::{ManageScreen, Manager};
use ratatui::style::Style;
use ratatui::text::Line;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub struct Pick {
    /// Index into the overview's arrays.
    pub array: usize,
    /// Index into the array's fitting candidates.
    pub cursor: usize,
    /// Kernel names chosen (grow chooses several).
    pub chosen: BTreeSet<String>,
}

pub fn open(m: &mut Manager, array: usize, screen: ManageScreen) {
    m.pick = Pick {
        array,
        ..Pick::default()
    };
    m.screen = screen;
}

pub fn array(m: &Manager) -> &ArrayView {
    &m.overview.arrays[m.pick.array]
}

/// The kernel name under the cursor, when a fitting disk is there.
pub fn current(m: &Manager) -> Option<String> {
    array(m)
        .fitting()
        .nth(m.pick.cursor)
        .and_then(|c| c.disk.name.clone())
}

pub fn move_cursor(m: &mut Manager, down: bool) {
    let count = array(m).fitting().count();
    m.pick.cursor = if down {
        (m.pick.cursor + 1).min(count.saturating_sub(1))
    } else {
        m.pick.cursor.saturating_sub(1)
    };
}

/// One line per candidate: fitting ones first (the cursor's reversed,
/// chosen ones checked when `checks`), then the others greyed with why.
pub fn lines(m: &Manager, checks: bool) -> Vec<Line<'static>> {
    let theme = &m.theme;
    let a = array(m);
    let mut out = Vec::new();
    for (i, c) in a.fitting().enumerate() {
        let name = c.disk.name.clone().unwrap_or_default();
        let check = match (checks, m.pick.chosen.contains(&name)) {
            (false, _) => "",
            (true, true) => "[x] ",
            (true, false) => "[ ] ",
        };
        let (mark, style) = if i == m.pick.cursor {
            ("> ", theme.cursor())
        } else {
            ("  ", Style::new())
        };
        out.push(Line::styled(
            format!("{mark}{check}{}, {}", c.disk.label(), c.disk.size),
            style,
        ));
    }
    for c in a.candidates.iter().filter(|c| c.unfit.is_some()) {
        out.push(Line::styled(
            format!(
                "  {}, {}: {}",
                c.disk.label(),
                c.disk.size,
                c.unfit.as_deref().unwrap_or_default()
            ),
            theme.disabled(),
        ));
    }
    if a.candidates.is_empty() {
        out.push(Line::styled(
            "  No other disk is attached.",
            theme.disabled(),
        ));
    }
    out
}
