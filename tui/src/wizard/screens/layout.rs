//! Layout: the RAID levels that fit the chosen disks, each with what the
//! planner says of it (usable space, failures it survives, expected
//! speed), a recommendation, the filesystem and the mount point; and when
//! idle hard disks spin down. With only kept disks there is no array: the
//! screen says so and offers the spin-down alone.

use super::Help;
use crate::wizard::choices::{self, FILESYSTEMS, LevelOption};
use crate::wizard::input::{Nav, TextField, nav};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::machine::disks::Disk;
use nasforge_engine::planner::ArrayPlan;
use nasforge_engine::spec::{Filesystem, Level, SpinDown};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Levels,
    Filesystem,
    Mount,
    SpinDown,
}

/// The spin-down times offered: hd-idle's makers advise no less than a
/// few minutes, and every spin-up wears the motor.
pub const SPIN_DOWNS: [SpinDown; 3] = [
    SpinDown::Off,
    SpinDown::After(20 * 60),
    SpinDown::After(60 * 60),
];

#[derive(Debug)]
pub struct LayoutForm {
    /// The level the user picked; None follows the recommendation.
    pub picked: Option<Level>,
    pub filesystem: Filesystem,
    pub mount: TextField,
    pub spin_down: SpinDown,
    pub focus: Focus,
}

impl Default for LayoutForm {
    fn default() -> LayoutForm {
        LayoutForm {
            picked: None,
            filesystem: Filesystem::Ext4,
            mount: TextField::new("/srv/data"),
            spin_down: SpinDown::Off,
            focus: Focus::Levels,
        }
    }
}

/// The level in effect: the user's pick while it fits the chosen disks,
/// else the recommendation, else the first that fits.
pub fn level(w: &Wizard) -> Level {
    let chosen = w.chosen();
    let fits =
        |l: Level| chosen.len() >= l.min_disks() && l.max_disks().is_none_or(|m| chosen.len() <= m);
    let (recommended, _) = choices::recommend(&chosen);
    w.layout
        .picked
        .filter(|l| fits(*l))
        .or(fits(recommended).then_some(recommended))
        .or(choices::LEVELS.into_iter().find(|l| fits(*l)))
        .unwrap_or(Level::Single)
}

fn options(w: &Wizard) -> Vec<LevelOption> {
    choices::level_options(
        &w.facts.inventory,
        &w.chosen(),
        w.layout.filesystem,
        w.layout.mount.value().trim(),
    )
}

/// The fields in Tab order: without an array, only the spin-down.
fn fields(w: &Wizard) -> Vec<Focus> {
    if w.disks.chosen.is_empty() {
        vec![Focus::SpinDown]
    } else {
        vec![
            Focus::Levels,
            Focus::Filesystem,
            Focus::Mount,
            Focus::SpinDown,
        ]
    }
}

/// The next (or, `by` -1, previous) of `options` after `current`, round.
fn cycle<T: Copy + PartialEq>(options: &[T], current: T, by: isize) -> T {
    let at = options.iter().position(|o| *o == current).unwrap_or(0);
    options[(at as isize + by).rem_euclid(options.len() as isize) as usize]
}

/// The field in effect: the one focused, while the screen shows it.
fn focus(w: &Wizard) -> Focus {
    let fields = fields(w);
    match fields.contains(&w.layout.focus) {
        true => w.layout.focus,
        false => fields[0],
    }
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let fields = fields(w);
    let focus = focus(w);
    w.layout.focus = focus;
    if focus == Focus::Mount && w.layout.mount.handle(key) {
        return Effect::None;
    }
    let step = match key.code {
        KeyCode::Left => Some(-1),
        KeyCode::Right | KeyCode::Char(' ') => Some(1),
        _ => None,
    };
    match (focus, step) {
        (Focus::Filesystem, Some(by)) => {
            w.layout.filesystem = cycle(&FILESYSTEMS, w.layout.filesystem, by);
            return Effect::None;
        }
        (Focus::SpinDown, Some(by)) => {
            w.layout.spin_down = cycle(&SPIN_DOWNS, w.layout.spin_down, by);
            return Effect::None;
        }
        _ => {}
    }
    let next = |by: isize| cycle(&fields, focus, by);
    let last = fields.last() == Some(&focus);
    match (nav(key), focus) {
        (Some(Nav::Up), Focus::Levels) => {
            move_level(w, -1);
        }
        // Moving is the effect; only at the last level does Down leave the
        // list (a match guard would run it and then fall through).
        #[allow(clippy::collapsible_match)]
        (Some(Nav::Down), Focus::Levels) => {
            if !move_level(w, 1) {
                w.layout.focus = Focus::Filesystem;
            }
        }
        (Some(Nav::Down), _) if last => {}
        (Some(Nav::Up | Nav::PrevField), _) => w.layout.focus = next(-1),
        (Some(Nav::Down | Nav::NextField), _) => w.layout.focus = next(1),
        (Some(Nav::Next), _) => {
            // The shares are checked on their own screen; here only the
            // array and the kept disks must plan.
            let chosen = w.chosen();
            match choices::plan(&w.storage(), &[], &w.facts.inventory, &chosen) {
                Ok(_) => {
                    w.shares
                        .follow_array_name(&choices::array_name(w.layout.mount.value().trim()));
                    w.screen = Screen::Shares;
                }
                Err(problems) => w.error(problems.join("; ")),
            }
        }
        (Some(Nav::Back), _) => w.screen = Screen::Disks,
        _ => {}
    }
    Effect::None
}

/// Moves the pick to the next level that fits, up or down; false at the
/// end of the list.
fn move_level(w: &mut Wizard, by: isize) -> bool {
    let current = w.level();
    let fitting: Vec<Level> = options(w)
        .into_iter()
        .filter(|o| o.outcome.is_ok())
        .map(|o| o.level)
        .collect();
    let Some(at) = fitting.iter().position(|l| *l == current) else {
        return false;
    };
    match at.checked_add_signed(by).and_then(|i| fitting.get(i)) {
        Some(level) => {
            w.layout.picked = Some(*level);
            true
        }
        None => false,
    }
}

pub fn help(w: &Wizard) -> Help {
    let mut keys = vec![("↑↓", "move")];
    match focus(w) {
        Focus::Filesystem => keys.push(("←→", "filesystem")),
        Focus::SpinDown => keys.push(("←→", "spin-down")),
        _ => {}
    }
    if fields(w).len() > 1 {
        keys.push(("Tab", "next field"));
    }
    keys.extend([("Enter", "shares"), ("Esc", "back")]);
    keys
}

/// Disks that may fail: guaranteed, and at best (raid10 mirrors).
fn tolerance(plan: &ArrayPlan) -> String {
    match (plan.tolerance.guaranteed, plan.tolerance.best_case) {
        (0, _) => "none".into(),
        (g, b) if g == b => g.to_string(),
        (g, b) => format!("{g} (up to {b})"),
    }
}

/// ">" before the focused field: visible without colour or reverse video.
fn marker(focused: bool) -> &'static str {
    if focused { ">" } else { " " }
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let [text_area, fs_area, mount_area, spin_area] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(2),
    ])
    .areas(area);
    if w.disks.chosen.is_empty() {
        frame.render_widget(
            Paragraph::new(no_array(w)).wrap(Wrap { trim: false }),
            text_area.union(fs_area).union(mount_area),
        );
    } else {
        frame.render_widget(
            Paragraph::new(levels(w)).wrap(Wrap { trim: false }),
            text_area,
        );
        draw_filesystem(frame, fs_area, w);
        draw_mount(frame, mount_area, w);
    }
    draw_spin_down(frame, spin_area, w);
}

/// Only kept disks: what becomes of them, and that no array is built.
fn no_array(w: &Wizard) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let mut lines = vec![
        Line::styled(
            "No array: no disk was chosen to erase and use.",
            theme.title(),
        ),
        Line::raw("Kept as they are, each shared from its own directory:"),
    ];
    for (k, entry) in w.kept().iter().zip(w.storage().disks) {
        lines.push(Line::raw(format!("  {}, at {}", k.describe(), entry.mount)));
    }
    lines
}

/// The chosen disks, a row per level, the recommendation and what the
/// level in effect is expected to manage.
fn levels(w: &Wizard) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let chosen = w.chosen();
    let options = options(w);
    let current = w.level();
    let (recommended, why) = choices::recommend(&chosen);
    let mut lines = vec![
        Line::styled(heading(&chosen), theme.title()),
        Line::styled(
            "      Level     Usable  Disks that may fail  Speed",
            theme.disabled(),
        ),
    ];
    for o in &options {
        lines.push(level_row(w, o, current, recommended));
    }
    lines.push(Line::raw(format!("Recommended: {recommended}, {why}.")));
    if let Some(Ok(plan)) = options
        .iter()
        .find(|o| o.level == current)
        .map(|o| &o.outcome)
    {
        let b = plan.throughput.bottleneck();
        lines.push(Line::raw(format!(
            "Expected bottleneck: {} at ≈{} MB/s.",
            b.what, b.mb_s
        )));
        for warning in &plan.warnings {
            lines.push(Line::styled(format!("! {warning}"), theme.warning()));
        }
    }
    lines
}

/// "RAID level for 2 disk(s) (2 × 4 TB HDD):"
fn heading(chosen: &[&Disk]) -> String {
    let sizes: Vec<String> = {
        let mut s: Vec<String> = chosen.iter().map(|d| d.size.to_string()).collect();
        s.dedup();
        s
    };
    let kinds = if chosen.iter().all(|d| d.rotational) {
        "HDD"
    } else if chosen.iter().all(|d| !d.rotational) {
        "SSD"
    } else {
        "mixed"
    };
    format!(
        "RAID level for {} disk(s) ({} × {} {kinds}):",
        chosen.len(),
        chosen.len(),
        sizes.join("/")
    )
}

/// One level: what the planner says of it, or why it does not fit.
fn level_row(w: &Wizard, o: &LevelOption, current: Level, recommended: Level) -> Line<'static> {
    let theme = &w.settings.theme;
    let is_current = o.level == current;
    let focused = is_current && w.layout.focus == Focus::Levels;
    let radio = if is_current { "(*)" } else { "( )" };
    let text = match &o.outcome {
        Ok(plan) => format!(
            "{} {radio} {:<8}{:>7}  {:<20} ≈{} MB/s",
            marker(focused),
            o.level.to_string(),
            plan.capacity.to_string(),
            tolerance(plan),
            plan.throughput.bottleneck().mb_s
        ),
        Err(why) => format!("   -  {:<8}{why}", o.level.to_string()),
    };
    let mut spans = vec![Span::raw(text)];
    if o.level == recommended && o.outcome.is_ok() {
        spans.push(Span::styled("  recommended", theme.good()));
    }
    let style = match (&o.outcome, focused) {
        (Err(_), _) => theme.disabled(),
        (Ok(_), true) => theme.cursor(),
        (Ok(_), false) => Style::new(),
    };
    Line::from(spans).style(style)
}

/// The filesystems in a row, the one in effect in angle brackets.
fn draw_filesystem(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let focused = w.layout.focus == Focus::Filesystem;
    let mut spans = vec![
        Span::raw(marker(focused)),
        Span::styled(" Filesystem  ", theme.title()),
    ];
    for f in FILESYSTEMS {
        let text = if f == w.layout.filesystem {
            format!("<{f}>")
        } else {
            format!(" {f} ")
        };
        let style = if f == w.layout.filesystem && focused {
            theme.cursor()
        } else {
            Style::new()
        };
        spans.push(Span::styled(text, style));
        spans.push(Span::raw(" "));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// When idle hard disks spin down, and which disks that leaves alone.
fn draw_spin_down(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let focused = focus(w) == Focus::SpinDown;
    let mut spans = vec![
        Span::raw(marker(focused)),
        Span::styled(" Spin-down   ", theme.title()),
    ];
    for s in SPIN_DOWNS {
        let text = if s == w.layout.spin_down {
            format!("<{s}>")
        } else {
            format!(" {s} ")
        };
        let style = if s == w.layout.spin_down && focused {
            theme.cursor()
        } else {
            Style::new()
        };
        spans.push(Span::styled(text, style));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::raw(" for idle hard disks"));
    let note = Line::styled(
        "SSDs are never spun down; USB disks get hd-idle: many bridges ignore hdparm.",
        theme.disabled(),
    );
    frame.render_widget(
        Paragraph::new(vec![Line::from(spans), note]).wrap(Wrap { trim: false }),
        area,
    );
}

/// The mount point's field, and the array it names.
fn draw_mount(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let focused = w.layout.focus == Focus::Mount;
    let [label, field, note] = Layout::horizontal([
        Constraint::Length(14),
        Constraint::Length(24),
        Constraint::Fill(1),
    ])
    .areas(area);
    frame.render_widget(
        Line::from(vec![
            Span::raw(marker(focused)),
            Span::styled(" Mount point", theme.title()),
        ]),
        label,
    );
    w.layout.mount.draw(frame, field, focused, theme);
    let array = choices::array_name(w.layout.mount.value().trim());
    let device = if w.level() == Level::Single {
        format!("  array '{array}' on one partition")
    } else {
        format!("  as /dev/md/{array}")
    };
    frame.render_widget(Span::raw(device), note);
}
