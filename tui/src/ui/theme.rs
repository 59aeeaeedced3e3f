//! How the wizard looks on whatever terminal it gets: colour unless
//! NO_COLOR says otherwise, and plain ASCII where the locale is not UTF-8
//! (a serial console with a bare getty). Meaning never rests on colour
//! alone: selected, disabled and failed things also carry a text marker.

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub colour: bool,
    pub ascii: bool,
}

impl Theme {
    /// NO_COLOR (https://no-color.org: set and not empty), TERM=dumb and
    /// the vt100 family turn colour off; a locale that is not UTF-8 turns
    /// line drawing into ASCII.
    pub fn from_env() -> Theme {
        Theme::from_vars(|name| std::env::var(name).unwrap_or_default())
    }

    /// As [`Theme::from_env`], with the variables read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> String) -> Theme {
        // Serial gettys default to TERM=vt220: a terminal without colour.
        let term = var("TERM");
        let no_colour = !var("NO_COLOR").is_empty() || term == "dumb" || term.starts_with("vt");
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .map(|v| var(v))
            .find(|v| !v.is_empty())
            .unwrap_or_default()
            .to_ascii_lowercase();
        Theme {
            colour: !no_colour,
            ascii: !(locale.contains("utf-8") || locale.contains("utf8")),
        }
    }

    fn pick(&self, coloured: Style, plain: Style) -> Style {
        if self.colour { coloured } else { plain }
    }

    /// The row or field the keys act on.
    pub fn cursor(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Black).bg(Color::Cyan),
            Style::new().add_modifier(Modifier::REVERSED),
        )
    }

    /// Disks and choices that cannot be picked.
    pub fn disabled(&self) -> Style {
        self.pick(
            Style::new().fg(Color::DarkGray),
            Style::new().add_modifier(Modifier::DIM),
        )
    }

    pub fn title(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    pub fn warning(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Yellow),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    pub fn error(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }

    pub fn good(&self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new())
    }

    /// The keys in the help bar.
    pub fn key(&self) -> Style {
        self.pick(
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }
}

/// Replaces what a non-UTF-8 terminal cannot show: line drawing becomes
/// `+-|`, arrows `^v<>`, the planner's `≈` and `×` become `~` and `x`,
/// the separator `·` (titles, the disks' group headers) `-`, anything
/// else `?`.
pub fn asciify(buffer: &mut Buffer) {
    for cell in buffer.content.iter_mut() {
        let symbol = cell.symbol();
        if symbol.is_ascii() {
            continue;
        }
        let plain = match symbol.chars().next().unwrap_or(' ') {
            '─' | '━' | '═' => "-",
            '│' | '┃' | '║' => "|",
            '┌' | '┐' | '└' | '┘' | '├' | '┤' | '┬' | '┴' | '┼' | '╭' | '╮' | '╯' | '╰' => {
                "+"
            }
            '≈' => "~",
            '×' => "x",
            '…' => ".",
            '↑' | '▲' => "^",
            '↓' | '▼' => "v",
            '←' => "<",
            '→' => ">",
            '█' => "#",
            '░' => ".",
            '°' => "o",
            '·' => "-",
            _ => "?",
        };
        cell.set_symbol(plain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theme(vars: &[(&str, &str)]) -> Theme {
        Theme::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map_or(String::new(), |(_, v)| v.to_string())
        })
    }

    #[test]
    fn no_color_and_the_locale_decide() {
        let utf8 = ("LANG", "en_GB.UTF-8");
        assert_eq!(
            theme(&[utf8]),
            Theme {
                colour: true,
                ascii: false
            }
        );
        assert!(!theme(&[utf8, ("NO_COLOR", "1")]).colour);
        assert!(theme(&[utf8, ("NO_COLOR", "")]).colour, "empty means unset");
        assert!(!theme(&[utf8, ("TERM", "dumb")]).colour);
        assert!(!theme(&[utf8, ("TERM", "vt220")]).colour, "a serial getty");
        assert!(
            theme(&[utf8, ("TERM", "linux")]).colour,
            "the console has colour"
        );
        assert!(theme(&[]).ascii, "no locale: plain ASCII");
        assert!(theme(&[("LANG", "C")]).ascii);
        assert!(
            !theme(&[("LANG", "C"), ("LC_ALL", "C.utf8")]).ascii,
            "LC_ALL wins"
        );
    }
}
