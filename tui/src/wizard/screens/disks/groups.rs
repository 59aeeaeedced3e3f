//! The disks table's rows: disks grouped by the controller they hang off,
//! with a header row before each group once there is more than one
//! controller; how the cursor moves over them (never onto a header) and
//! how far the table is scrolled.

use crate::ui::input::Nav;
use nasforge_engine::machine::disks::Disk;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// "LSI SAS1068 · 0000:00:03.0 · 8 disks"
    Group(String),
    /// A disk, by its index in the inventory.
    Disk(usize),
}

impl Row {
    pub fn disk(&self) -> Option<usize> {
        match self {
            Row::Disk(i) => Some(*i),
            Row::Group(_) => None,
        }
    }
}

/// The controller a disk hangs off, by PCI address; None for disks on no
/// PCI controller (an SD card, eMMC).
pub fn controller_of(disk: &Disk) -> Option<&str> {
    disk.controller.as_ref().map(|c| c.pci.as_str())
}

/// Groups in the order of their first disk, disks in discovery order within
/// each. A board whose disks are all on one controller (and perhaps its SD
/// card) gets no headers: they would only repeat the detail line.
pub fn rows(disks: &[Disk]) -> Vec<Row> {
    let mut groups: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
    for (i, disk) in disks.iter().enumerate() {
        let key = controller_of(disk);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let headed = groups.iter().filter(|(k, _)| k.is_some()).count() > 1;
    groups
        .into_iter()
        .flat_map(|(_, members)| {
            let header = headed.then(|| Row::Group(label(&disks[members[0]], members.len())));
            header.into_iter().chain(members.into_iter().map(Row::Disk))
        })
        .collect()
}

fn label(first: &Disk, count: usize) -> String {
    let disks = match count {
        1 => "1 disk".to_string(),
        n => format!("{n} disks"),
    };
    match &first.controller {
        Some(c) => format!("{} · {} · {disks}", c.label(), c.pci),
        None => format!("No PCI controller · {disks}"),
    }
}

/// The row disk `cursor` is on (0 when there is none).
pub fn row_of(rows: &[Row], cursor: usize) -> usize {
    rows.iter()
        .position(|r| *r == Row::Disk(cursor))
        .unwrap_or(0)
}

/// The disk a movement key takes the cursor to from row `at`, `page` rows
/// to a page; None for keys that do not move it.
pub fn step(rows: &[Row], at: usize, nav: Nav, page: usize) -> Option<usize> {
    let here = rows.get(at).and_then(Row::disk);
    let found = match nav {
        Nav::Up => rows.get(..at)?.iter().rev().find_map(Row::disk),
        Nav::Down => rows.get(at + 1..)?.iter().find_map(Row::disk),
        Nav::PageUp => near(rows, at.saturating_sub(page)),
        Nav::PageDown => near(rows, at + page),
        Nav::Home => near(rows, 0),
        Nav::End => near(rows, usize::MAX),
        _ => return None,
    };
    found.or(here)
}

/// The disk on row `at`, or the first after it (a header's first disk),
/// or the last before it.
fn near(rows: &[Row], at: usize) -> Option<usize> {
    let at = at.min(rows.len().saturating_sub(1));
    rows.get(at..)?
        .iter()
        .chain(rows[..at].iter().rev())
        .find_map(Row::disk)
}

/// The first row to show, `height` rows at a time, so that row `at` and
/// the header above it (when `at` is its group's first disk) are visible,
/// moving as little as possible from `offset`: the table scrolls with the
/// cursor instead of jumping.
pub fn scroll(rows: &[Row], offset: usize, at: usize, height: usize) -> usize {
    if height == 0 {
        return 0;
    }
    let top = match at.checked_sub(1).map(|above| &rows[above]) {
        Some(Row::Group(_)) => at - 1,
        _ => at,
    };
    let offset = offset.min(rows.len().saturating_sub(height)).min(top);
    offset.max((at + 1).saturating_sub(height))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two groups of three: header, 0, 1, 2, header, 3, 4, 5.
    fn two_groups() -> Vec<Row> {
        let mut rows = vec![Row::Group("a".into())];
        rows.extend((0..3).map(Row::Disk));
        rows.push(Row::Group("b".into()));
        rows.extend((3..6).map(Row::Disk));
        rows
    }

    #[test]
    fn the_cursor_steps_over_headers_and_stops_at_the_ends() {
        let rows = two_groups();
        assert_eq!(step(&rows, 3, Nav::Down, 4), Some(3), "over header b");
        assert_eq!(step(&rows, 5, Nav::Up, 4), Some(2), "back over it");
        assert_eq!(step(&rows, 1, Nav::Up, 4), Some(0), "the first disk stays");
        assert_eq!(step(&rows, 7, Nav::Down, 4), Some(5), "the last disk stays");
        assert_eq!(
            step(&rows, 1, Nav::PageDown, 3),
            Some(3),
            "a header: its first disk"
        );
        assert_eq!(step(&rows, 7, Nav::PageUp, 3), Some(3));
        assert_eq!(step(&rows, 7, Nav::PageUp, 30), Some(0));
        assert_eq!(step(&rows, 1, Nav::PageDown, 30), Some(5));
        assert_eq!(step(&rows, 6, Nav::Home, 3), Some(0));
        assert_eq!(step(&rows, 1, Nav::End, 3), Some(5));
        assert_eq!(step(&rows, 1, Nav::Toggle, 3), None);
        assert_eq!(step(&[], 0, Nav::Down, 3), None, "no disks");
    }

    #[test]
    fn the_table_scrolls_as_little_as_it_must_and_shows_a_group_s_header() {
        let rows = two_groups();
        assert_eq!(scroll(&rows, 0, 3, 4), 0, "row 3 is on the first page");
        assert_eq!(
            scroll(&rows, 0, 5, 4),
            2,
            "down to the group's first disk: its header too"
        );
        assert_eq!(scroll(&rows, 2, 6, 4), 3, "one row further");
        assert_eq!(scroll(&rows, 4, 7, 4), 4, "the last page stays");
        assert_eq!(
            scroll(&rows, 4, 6, 4),
            4,
            "moving up inside the page does not scroll"
        );
        assert_eq!(scroll(&rows, 4, 3, 4), 3);
        assert_eq!(
            scroll(&rows, 3, 1, 4),
            0,
            "the first disk brings its header"
        );
        assert_eq!(scroll(&rows, 6, 7, 20), 0, "everything fits");
        assert_eq!(scroll(&rows, 3, 2, 0), 0, "no room at all");
    }
}
