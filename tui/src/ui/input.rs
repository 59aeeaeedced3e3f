//! One-line text fields (tui-input underneath), optionally masked for
//! passwords, and the keys that every screen reads the same way.

use super::theme::Theme;
use ratatui::Frame;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Position, Rect};
use ratatui::text::Span;
use tui_input::Input;
use tui_input::backend::crossterm::to_input_request;

#[derive(Debug, Clone, Default)]
pub struct TextField {
    input: Input,
    masked: bool,
}

impl TextField {
    pub fn new(value: &str) -> TextField {
        TextField {
            input: Input::new(value.to_string()),
            masked: false,
        }
    }

    /// A password field: drawn as one `*` per character.
    pub fn masked() -> TextField {
        TextField {
            input: Input::default(),
            masked: true,
        }
    }

    pub fn value(&self) -> &str {
        self.input.value()
    }

    pub fn clear(&mut self) {
        self.input.reset();
    }

    /// Edits the text with the key (characters, Backspace, Delete, ←/→,
    /// Home/End, Ctrl-U/W/K); false when the key is not an editing key.
    pub fn handle(&mut self, key: KeyEvent) -> bool {
        match to_input_request(&Event::Key(key)) {
            Some(request) => {
                self.input.handle(request);
                true
            }
            None => false,
        }
    }

    /// Draws the text, scrolled so the cursor stays in view, and puts the
    /// terminal cursor there when the field has the focus.
    pub fn draw(&self, frame: &mut Frame, area: Rect, focused: bool, theme: &Theme) {
        let width = area.width.max(1) as usize;
        let (shown, cursor, scroll) = if self.masked {
            let cursor = self.input.cursor();
            let stars = "*".repeat(self.input.value().chars().count());
            (stars, cursor, cursor.saturating_sub(width - 1))
        } else {
            (
                self.input.value().to_string(),
                self.input.visual_cursor(),
                self.input.visual_scroll(width),
            )
        };
        let visible: String = shown.chars().skip(scroll).collect();
        let style = if focused {
            theme.cursor()
        } else {
            ratatui::style::Style::new()
        };
        // Pad so a focused empty field still shows where typing goes.
        let padded = format!("{visible:<width$}");
        frame.render_widget(Span::styled(padded, style), area);
        if focused {
            let x = area.x + (cursor - scroll).min(width - 1) as u16;
            frame.set_cursor_position(Position::new(x, area.y));
        }
    }
}

/// The keys the wizard gives the same meaning on every screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Next,
    Back,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Toggle,
    NextField,
    PrevField,
}

pub fn nav(key: KeyEvent) -> Option<Nav> {
    Some(match key.code {
        KeyCode::Enter => Nav::Next,
        KeyCode::Esc => Nav::Back,
        KeyCode::Up => Nav::Up,
        KeyCode::Down => Nav::Down,
        KeyCode::PageUp => Nav::PageUp,
        KeyCode::PageDown => Nav::PageDown,
        KeyCode::Home => Nav::Home,
        KeyCode::End => Nav::End,
        KeyCode::Char(' ') => Nav::Toggle,
        KeyCode::Tab => Nav::NextField,
        KeyCode::BackTab => Nav::PrevField,
        _ => return None,
    })
}

pub fn is_quit(key: KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn edits_like_a_line_editor() {
        let mut f = TextField::new("/srv/dat");
        assert!(f.handle(key(KeyCode::Char('a'))));
        assert_eq!(f.value(), "/srv/data");
        f.handle(key(KeyCode::Left));
        f.handle(key(KeyCode::Backspace));
        assert_eq!(f.value(), "/srv/daa", "the character before the cursor");
        assert!(!f.handle(key(KeyCode::Enter)), "Enter is for the screen");
        assert!(!f.handle(key(KeyCode::Tab)), "Tab moves between fields");
    }

    #[test]
    fn masked_fields_never_draw_the_password() {
        let mut f = TextField::masked();
        for c in "hunter2".chars() {
            f.handle(key(KeyCode::Char(c)));
        }
        assert_eq!(f.value(), "hunter2");
        let mut terminal = Terminal::new(TestBackend::new(12, 1)).unwrap();
        let theme = Theme {
            colour: false,
            ascii: false,
        };
        terminal
            .draw(|frame| f.draw(frame, frame.area(), true, &theme))
            .unwrap();
        let shown = terminal.backend().to_string();
        assert!(
            shown.contains("*******") && !shown.contains("hunter"),
            "{shown}"
        );
    }
}
