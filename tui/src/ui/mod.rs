//! What the wizard and the manage view share on screen: the frame (a
//! bordered body titled with the host and the screen, a notice under it,
//! the help bar), the wait for a key, text fields and lists (`input`),
//! wrapping and scrolling (`scroll`) and the colours (`theme`). Each view
//! keeps its own state and screens; how a screen sits in the terminal is
//! decided here once.

pub mod input;
pub mod scroll;
pub mod theme;

use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Padding, Paragraph};
use std::time::Duration;
use theme::Theme;

/// A help-bar entry: the key and what it does.
pub type Help = Vec<(&'static str, &'static str)>;

/// The line under the screen: what went wrong, or what just happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub error: bool,
}

impl Notice {
    pub fn error(text: impl Into<String>) -> Notice {
        Notice {
            text: text.into(),
            error: true,
        }
    }

    pub fn info(text: impl Into<String>) -> Notice {
        Notice {
            text: text.into(),
            error: false,
        }
    }
}

/// The frame's title: " nasforge setup · pinas · 2/7 Disks ", with a
/// warning badge on a dry run.
pub fn title(
    app: &str,
    hostname: &str,
    screen: String,
    dry_run: bool,
    theme: &Theme,
) -> Line<'static> {
    let mut title = vec![
        Span::raw(format!(" {app} · ")),
        Span::raw(hostname.to_string()),
        Span::raw(" · "),
        Span::styled(screen, theme.title()),
        Span::raw(" "),
    ];
    if dry_run {
        title.push(Span::styled(" dry run ", theme.warning()));
    }
    Line::from(title)
}

/// Draws a view: the bordered body under `title`, where `screen` draws
/// and returns its keys; the notice below it, given the rows it needs (up
/// to three) so no reason is cut off; the help bar at the bottom.
pub fn draw_frame(
    frame: &mut Frame,
    title: Line<'static>,
    notice: Option<&Notice>,
    theme: &Theme,
    screen: impl FnOnce(&mut Frame, Rect) -> Help,
) {
    let notice_lines: Vec<String> = notice.map_or(vec![String::new()], |n| {
        scroll::wrap_hanging(&format!(" {}", n.text), frame.area().width as usize, 1)
            .into_iter()
            .take(3)
            .collect()
    });
    let [body, notice_area, help] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(notice_lines.len() as u16),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let block = Block::bordered()
        .title(title)
        .padding(Padding::horizontal(1));
    let inner = block.inner(body);
    frame.render_widget(block, body);
    let keys = screen(frame, inner);
    if let Some(n) = notice {
        let style = if n.error { theme.error() } else { theme.good() };
        let lines: Vec<Line> = notice_lines.into_iter().map(Line::raw).collect();
        frame.render_widget(Paragraph::new(lines).style(style), notice_area);
    }
    frame.render_widget(Paragraph::new(help_bar(&keys, theme)), help);
    if theme.ascii {
        theme::asciify(frame.buffer_mut());
    }
}

fn help_bar(keys: &Help, theme: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, (key, what)) in keys.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("  "));
        }
        spans.push(Span::styled(*key, theme.key()));
        spans.push(Span::raw(format!(" {what}")));
    }
    Line::from(spans)
}

/// The next key pressed, waiting at most a quarter second: a view's loop
/// wakes up that often to re-read what it follows, and a resize redraws
/// at the new size on the next pass.
pub fn next_key() -> std::io::Result<Option<KeyEvent>> {
    if !event::poll(Duration::from_millis(250))? {
        return Ok(None);
    }
    Ok(match event::read()? {
        Event::Key(key) => Some(key),
        _ => None,
    })
}

/// Runs `view` on the terminal, restoring it afterwards whatever the
/// outcome.
pub fn on_terminal<T>(
    view: impl FnOnce(&mut ratatui::DefaultTerminal) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut terminal = ratatui::try_init()?;
    let result = view(&mut terminal);
    ratatui::restore();
    result
}
