//! Layout: the RAID levels that fit the chosen disks, each with what the
//! planner says of it (usable space, failures it survives, expected
//! speed), a recommendation, the filesystem and the mount point; and when
//! idle hard disks spin down. With only kept disks there is no array: the
//! screen says so and offers the spin-down alone. An adopted array has its
//! level and filesystem already: the screen says what it is and what
//! adopting does, and asks where it is mounted.
//!
//! A ZFS pool is one more filesystem, zfs, offered where the board can run
//! it (else one line says why not): choosing it turns the list into ZFS's
//! levels, one and two vdevs, with the same figures, and asks the pool's
//! name. One list at a time keeps the screen inside 80×24; raid5 and
//! raidz1 would show the same figures side by side anyway.
//!
//! Beside the filesystem, how many of the chosen disks are hot spares:
//! every row is planned with as many as its level leaves room for. A large
//! layout (`choices::LARGE_LAYOUT_FROM` disks) also lists md's raid5 and
//! raid6 as two legs striped (raid50, raid60), and says on a two-group row
//! that does not split evenly how many spares would split it.

use super::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::wizard::adopted::Adopted;
use crate::wizard::choices::{self, DEFAULT_POOL, LevelChoice, LevelOption};
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::machine::disks::Disk;
use nasforge_engine::planner::ArrayPlan;
use nasforge_engine::spec::{self, Filesystem, Level, SpinDown};
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
    /// How many of the chosen disks are hot spares, beside the filesystem.
    Spares,
    Mount,
    /// A ZFS pool's name, beside the mount point.
    Pool,
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
    pub picked: Option<LevelChoice>,
    pub filesystem: Filesystem,
    pub mount: TextField,
    pub pool: TextField,
    /// The hot spares asked for; each level takes as many as it leaves
    /// room for (see [`spares`]).
    pub spares: usize,
    pub spin_down: SpinDown,
    pub focus: Focus,
}

impl Default for LayoutForm {
    fn default() -> LayoutForm {
        LayoutForm {
            picked: None,
            filesystem: Filesystem::Ext4,
            mount: TextField::new("/srv/data"),
            pool: TextField::new(DEFAULT_POOL),
            spares: 0,
            spin_down: SpinDown::Off,
            focus: Focus::Levels,
        }
    }
}

/// The level in effect: the user's pick while the list shows it and it
/// fits the chosen disks, else the recommendation, else the first that
/// fits. A pick from the other list (md's or ZFS's) waits for the
/// filesystem to come back to it.
pub fn choice(w: &Wizard) -> LevelChoice {
    let chosen = w.chosen();
    let n = chosen.len();
    let filesystem = w.layout.filesystem;
    let wanted = w.layout.spares;
    let offered = choices::offered_for(filesystem, &chosen, wanted);
    let fits = |c: &LevelChoice| c.fits(n - c.spares(n, wanted));
    let shown = |c: &LevelChoice| offered.contains(c) && fits(c);
    let (recommended, _) = choices::recommend(&chosen, filesystem);
    w.layout
        .picked
        .filter(shown)
        .or(shown(&recommended).then_some(recommended))
        .or(offered.iter().copied().find(fits))
        .unwrap_or(recommended)
}

/// The hot spares of the level in effect: as many as asked for, up to
/// what the level leaves room for.
pub fn spares(w: &Wizard) -> usize {
    choice(w).spares(w.chosen().len(), w.layout.spares)
}

fn options(w: &Wizard) -> Vec<LevelOption> {
    choices::level_options(
        &w.facts.inventory,
        &w.chosen(),
        w.layout.spares,
        w.layout.filesystem,
        w.layout.mount.value().trim(),
        &w.array_name(),
    )
}

/// The most hot spares the level in effect leaves room for.
fn max_spares(w: &Wizard) -> usize {
    choice(w).max_spares(w.chosen().len())
}

fn is_zfs(w: &Wizard) -> bool {
    w.layout.filesystem == Filesystem::Zfs
}

/// The fields in Tab order: without an array, only the spin-down.
fn fields(w: &Wizard) -> Vec<Focus> {
    if w.disks.adopted.is_some() {
        return vec![Focus::Mount, Focus::SpinDown];
    }
    if w.disks.chosen.is_empty() {
        return vec![Focus::SpinDown];
    }
    let mut fields = vec![Focus::Levels, Focus::Filesystem];
    if max_spares(w) > 0 {
        fields.push(Focus::Spares);
    }
    fields.push(Focus::Mount);
    if is_zfs(w) {
        fields.push(Focus::Pool);
    }
    fields.push(Focus::SpinDown);
    fields
}

/// The spec's word on the pool's name, which zpool would refuse; None
/// for md arrays, whose name comes from the mount point.
fn pool_name_problem(w: &Wizard) -> Option<String> {
    if !is_zfs(w) {
        return None;
    }
    spec::validate(&w.storage(), &[])
        .into_iter()
        .find(|p| p.path.starts_with("storage.arrays[") && p.path.ends_with("].name"))
        .map(|p| p.message)
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
    if focus == Focus::Pool && w.layout.pool.handle(key) {
        return Effect::None;
    }
    let step = match key.code {
        KeyCode::Left => Some(-1),
        KeyCode::Right | KeyCode::Char(' ') => Some(1),
        _ => None,
    };
    match (focus, step) {
        (Focus::Filesystem, Some(by)) => {
            let offered = choices::filesystems(w.facts.zfs.is_ok());
            w.layout.filesystem = cycle(&offered, w.layout.filesystem, by);
            return Effect::None;
        }
        (Focus::SpinDown, Some(by)) => {
            w.layout.spin_down = cycle(&SPIN_DOWNS, w.layout.spin_down, by);
            return Effect::None;
        }
        (Focus::Spares, Some(by)) => {
            let counts: Vec<usize> = (0..=max_spares(w)).collect();
            w.layout.spares = cycle(&counts, spares(w), by);
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
            if let Some(problem) = pool_name_problem(w) {
                w.layout.focus = Focus::Pool;
                w.error(problem);
                return Effect::None;
            }
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
    let current = w.level_choice();
    let fitting: Vec<LevelChoice> = options(w)
        .into_iter()
        .filter(|o| o.outcome.is_ok())
        .map(|o| o.choice)
        .collect();
    let Some(at) = fitting.iter().position(|l| *l == current) else {
        return false;
    };
    match at.checked_add_signed(by).and_then(|i| fitting.get(i)) {
        Some(choice) => {
            w.layout.picked = Some(*choice);
            true
        }
        None => false,
    }
}

pub fn help(w: &Wizard) -> Help {
    let mut keys = vec![("↑↓", "move")];
    match focus(w) {
        Focus::Filesystem => keys.push(("←→", "filesystem")),
        Focus::Spares => keys.push(("←→", "spares")),
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
    if let Some(a) = &w.disks.adopted {
        frame.render_widget(
            Paragraph::new(adopting(w, a)).wrap(Wrap { trim: false }),
            text_area,
        );
        draw_mount(frame, mount_area, w);
    } else if w.disks.chosen.is_empty() {
        frame.render_widget(
            Paragraph::new(no_array(w)).wrap(Wrap { trim: false }),
            text_area.union(fs_area).union(mount_area),
        );
    } else {
        frame.render_widget(
            Paragraph::new(levels(
                w,
                text_area.width as usize,
                text_area.height as usize,
            ))
            .wrap(Wrap { trim: false }),
            text_area,
        );
        draw_filesystem(frame, fs_area, w);
        draw_mount(frame, mount_area, w);
    }
    draw_spin_down(frame, spin_area, w);
}

/// An adopted array: what it is, what adopting does, and what the planner
/// says of it (a member missing, a pool that cannot be adopted).
fn adopting(w: &Wizard, a: &Adopted) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let mut lines = vec![
        Line::styled(
            format!(
                "Adopting the {} {} as it is:",
                a.level,
                if a.is_pool() { "pool" } else { "array" }
            ),
            theme.title(),
        ),
        Line::raw(format!("  {}", a.words)),
        Line::raw(""),
    ];
    let how = match &a.pool {
        Some(pool) => format!(
            "Nothing on its disks is erased, partitioned or formatted. It keeps its name '{pool}', is imported and mounted at the mount point below with its datasets, and is never upgraded: the old machine can still read the disks."
        ),
        None => format!(
            "Nothing on its disks is erased, partitioned or formatted. Setup assembles it read-only, checks that it still holds the {} seen there now, and only then makes it writable and mounts it at the mount point below.",
            a.filesystem
                .map_or("filesystem".to_string(), |f| format!("{f} filesystem"))
        ),
    };
    lines.push(Line::raw(how));
    match w.plan() {
        Ok(plan) => {
            for warning in plan.arrays.iter().flat_map(|p| &p.warnings) {
                lines.push(Line::styled(format!("! {warning}"), theme.warning()));
            }
        }
        Err(problems) => {
            for problem in problems {
                lines.push(Line::styled(format!("! {problem}"), theme.error()));
            }
        }
    }
    lines
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

/// The chosen disks, a row per level, ZFS's line, the recommendation and
/// what the level in effect is expected to manage, in `height` rows: when
/// a large layout's rows and warnings need more, the recommendation goes
/// without its reason, which the warnings say again.
fn levels(w: &Wizard, width: usize, height: usize) -> Vec<Line<'static>> {
    let theme = &w.settings.theme;
    let chosen = w.chosen();
    let options = options(w);
    let current = w.level_choice();
    let (recommended, why) = choices::recommend(&chosen, w.layout.filesystem);
    // Wide enough for "2 × raidz1"; md's levels keep their 8.
    let column = options
        .iter()
        .map(|o| o.choice.to_string().chars().count() + 1)
        .max()
        .unwrap_or(0)
        .max(8);
    let mut lines = vec![
        Line::styled(heading(&chosen, is_zfs(w)), theme.title()),
        Line::styled(
            format!(
                "      {:<column$}  Usable  Disks that may fail  Speed",
                "Level"
            ),
            theme.disabled(),
        ),
    ];
    for o in &options {
        lines.push(level_row(w, o, current, recommended, column));
    }
    lines.push(zfs_line(w, width));
    lines.push(Line::raw(format!("Recommended: {recommended}, {why}.")));
    let reason_at = lines.len() - 1;
    if let Some(Ok(plan)) = options
        .iter()
        .find(|o| o.choice == current)
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
    let rows = |lines: &[Line]| -> usize {
        lines
            .iter()
            .map(|l| l.width().div_ceil(width.max(1)).max(1))
            .sum()
    };
    if rows(&lines) > height {
        lines[reason_at] = Line::raw(format!("Recommended: {recommended}."));
    }
    lines
}

/// What ZFS means here, in one line cut to `width`: how to choose it, what
/// a pool gives up against md (growing disk by disk: `care::grow::cannot_grow`
/// refuses pools), or why it is not offered, without the remedy that follows the
/// reason's ';' (the image is rebuilt on the workstation, not here).
fn zfs_line(w: &Wizard, width: usize) -> Line<'static> {
    let theme = &w.settings.theme;
    let (text, style) = match &w.facts.zfs {
        Err(why) => (
            format!(
                "ZFS pools: not offered, {}.",
                why.split(';').next().unwrap_or(why).trim_end_matches('.')
            ),
            theme.disabled(),
        ),
        Ok(_) if is_zfs(w) => (
            "ZFS checksums every block; unlike md, a pool cannot later grow by one disk.".into(),
            Style::new(),
        ),
        Ok(_) => {
            let (level, _) = choices::recommend(&w.chosen(), Filesystem::Zfs);
            (
                format!("Or a ZFS pool ({level} here, checksummed): set Filesystem to zfs below."),
                Style::new(),
            )
        }
    };
    let text = match text.chars().count() > width {
        true => {
            text.chars()
                .take(width.saturating_sub(1))
                .collect::<String>()
                + "…"
        }
        false => text,
    };
    Line::styled(text, style)
}

/// "RAID level for 2 disk(s) (2 × 4 TB HDD):", or "ZFS pool for ...".
fn heading(chosen: &[&Disk], zfs: bool) -> String {
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
    let what = if zfs { "ZFS pool" } else { "RAID level" };
    format!(
        "{what} for {} disk(s) ({} × {} {kinds}):",
        chosen.len(),
        chosen.len(),
        sizes.join("/")
    )
}

/// One level: what the planner says of it, or why it does not fit.
fn level_row(
    w: &Wizard,
    o: &LevelOption,
    current: LevelChoice,
    recommended: LevelChoice,
    column: usize,
) -> Line<'static> {
    let theme = &w.settings.theme;
    let is_current = o.choice == current;
    let focused = is_current && w.layout.focus == Focus::Levels;
    let radio = if is_current { "(*)" } else { "( )" };
    let text = match &o.outcome {
        Ok(plan) => format!(
            "{} {radio} {:<column$}{:>7}  {:<20} ≈{} MB/s",
            marker(focused),
            o.choice.to_string(),
            plan.capacity.to_string(),
            tolerance(plan),
            plan.throughput.bottleneck().mb_s
        ),
        Err(why) => format!("   -  {:<column$}{why}", o.choice.to_string()),
    };
    let mut spans = vec![Span::raw(text)];
    if o.choice == recommended && o.outcome.is_ok() {
        spans.push(Span::styled("  recommended", theme.good()));
    }
    let style = match (&o.outcome, focused) {
        (Err(_), _) => theme.disabled(),
        (Ok(_), true) => theme.cursor(),
        (Ok(_), false) => Style::new(),
    };
    Line::from(spans).style(style)
}

/// The filesystems in a row, the one in effect in angle brackets; the hot
/// spares beside them.
fn draw_filesystem(frame: &mut Frame, area: Rect, w: &Wizard) {
    // " Filesystem  " and the four names with their brackets and gaps.
    let [area, spares_area] =
        Layout::horizontal([Constraint::Length(42), Constraint::Fill(1)]).areas(area);
    draw_spares(frame, spares_area, w);
    let theme = &w.settings.theme;
    let focused = focus(w) == Focus::Filesystem;
    let mut spans = vec![
        Span::raw(marker(focused)),
        Span::styled(" Filesystem  ", theme.title()),
    ];
    for f in choices::filesystems(w.facts.zfs.is_ok()) {
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

/// How many hot spares, of how many the level in effect could have; or,
/// dimmed, why it can have none.
fn draw_spares(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let max = max_spares(w);
    let line = if max == 0 {
        let why = match w.level().is_redundant() {
            true => "no disk to spare".to_string(),
            false => format!("none with {}", w.level()),
        };
        Line::styled(format!("  Hot spares  {why}"), theme.disabled())
    } else {
        let focused = focus(w) == Focus::Spares;
        let style = if focused {
            theme.cursor()
        } else {
            Style::new()
        };
        Line::from(vec![
            Span::raw(marker(focused)),
            Span::styled(" Hot spares  ", theme.title()),
            Span::styled(format!("<{}>", spares(w)), style),
            Span::styled(format!("  of up to {max}"), theme.disabled()),
        ])
    };
    frame.render_widget(Paragraph::new(line), area);
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

/// The mount point's field, and the array it names (a pool's name is a
/// field of its own beside it).
fn draw_mount(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let focused = focus(w) == Focus::Mount;
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
    if is_zfs(w) {
        let focused = w.layout.focus == Focus::Pool;
        let [label, field] =
            Layout::horizontal([Constraint::Length(13), Constraint::Length(16)]).areas(note);
        frame.render_widget(
            Line::from(vec![
                Span::raw(format!(" {}", marker(focused))),
                Span::styled(" ZFS pool", theme.title()),
            ]),
            label,
        );
        w.layout.pool.draw(frame, field, focused, theme);
        return;
    }
    let array = choices::array_name(w.layout.mount.value().trim());
    let device = if w.level() == Level::Single {
        format!("  array '{array}' on one partition")
    } else {
        format!("  as /dev/md/{array}")
    };
    frame.render_widget(Span::raw(device), note);
}
