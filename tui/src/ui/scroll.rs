//! Long text in a box that scrolls with the keys: the plan and its
//! commands on the review screen, the instructions on the done screen.

use super::input::Nav;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use std::cell::Cell;

/// The offset is changed by keys; the limits are learnt when drawing,
/// because only then is the box's size known.
#[derive(Debug, Default)]
pub struct Scroll {
    offset: usize,
    max: Cell<usize>,
    page: Cell<usize>,
}

impl Scroll {
    /// Moves with ↑↓, PgUp/PgDn, Home/End; false for other keys.
    pub fn nav(&mut self, nav: Nav) -> bool {
        let page = self.page.get().max(1);
        let max = self.max.get();
        self.offset = match nav {
            Nav::Up => self.offset.saturating_sub(1),
            Nav::Down => self.offset + 1,
            Nav::PageUp => self.offset.saturating_sub(page),
            Nav::PageDown => self.offset + page,
            Nav::Home => 0,
            Nav::End => max,
            _ => return false,
        }
        .min(max);
        true
    }

    /// Wraps `lines` to the box, draws the visible part, and returns
    /// whether there is more below (for a "more" hint).
    pub fn draw(&self, frame: &mut Frame, area: Rect, lines: &[(String, Style)]) -> bool {
        let width = area.width as usize;
        let wrapped: Vec<Line> = lines
            .iter()
            .flat_map(|(text, style)| {
                wrap(text, width)
                    .into_iter()
                    .map(move |l| Line::styled(l, *style))
            })
            .collect();
        let height = area.height as usize;
        let max = wrapped.len().saturating_sub(height);
        self.max.set(max);
        self.page.set(height.saturating_sub(1));
        let offset = self.offset.min(max);
        let visible: Vec<Line> = wrapped.into_iter().skip(offset).take(height).collect();
        frame.render_widget(Paragraph::new(visible), area);
        offset < max
    }
}

/// Breaks a line to `width` columns, at spaces where it can; continuation
/// lines keep the original indent plus two, so a wrapped command still
/// reads as one.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let indent = text.chars().take_while(|c| *c == ' ').count() + 2;
    wrap_hanging(text, width, indent)
}

/// As [`wrap`], with continuation lines indented by `indent` columns.
pub fn wrap_hanging(text: &str, width: usize, indent: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if width < 8 || chars.len() <= width {
        return vec![text.to_string()];
    }
    let indent = indent.min(width / 2);
    let mut out = Vec::new();
    let mut rest: &[char] = &chars;
    let mut prefix = 0;
    loop {
        let room = width - prefix;
        let pad = " ".repeat(prefix);
        if rest.len() <= room {
            out.push(format!("{pad}{}", rest.iter().collect::<String>()));
            return out;
        }
        let cut = rest[..=room]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&i| i > room / 2)
            .unwrap_or(room);
        let line: String = rest[..cut].iter().collect();
        out.push(format!("{pad}{}", line.trim_end()));
        rest = &rest[cut..];
        while rest.first() == Some(&' ') {
            rest = &rest[1..];
        }
        if rest.is_empty() {
            return out;
        }
        prefix = indent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_and_indents_continuations() {
        let text = "  mdadm --create /dev/md/data --run --homehost=pinas --name=data";
        let lines = wrap(text, 30);
        assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:#?}");
        assert_eq!(lines[0], "  mdadm --create /dev/md/data");
        assert!(lines[1].starts_with("    --run"), "{lines:#?}");
        let joined: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(joined, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn cuts_words_longer_than_the_line() {
        let long = "x".repeat(25);
        let lines = wrap(&long, 10);
        assert!(lines.iter().all(|l| l.chars().count() <= 10), "{lines:#?}");
        assert_eq!(lines.concat().replace(' ', ""), long);
    }
}
