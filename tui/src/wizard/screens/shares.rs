//! Shares: how the array is reached. SMB for Windows and Macs (with
//! passwords typed masked, staged only as NT hashes, read access for
//! guests, and Time Machine), NFS for Linux clients on a network. The
//! share is the whole array; on a ZFS pool it may have a quota. Each kept
//! disk has a share of its own, read by guests, which can be turned off.

use super::Help;
use crate::ui::input::{Nav, TextField, nav};
use crate::wizard::facts::Facts;
use crate::wizard::{Effect, Screen, Wizard};
use nasforge_engine::shares::smbpasswd;
use nasforge_engine::size::Size;
use nasforge_engine::spec::{Clients, Filesystem, Nfs, Share, Smb};
use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// The share the wizard adds for Time Machine, in a folder of the array.
const TIME_MACHINE_SHARE: &str = "timemachine";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Name,
    /// On a ZFS pool only: the most the share may hold.
    Quota,
    Smb,
    Users,
    /// The password of the i-th user, and its repetition.
    Password(usize),
    Again(usize),
    Guest,
    TimeMachine,
    TimeMachineSize,
    Nfs,
    Clients,
    /// The share of the i-th kept disk.
    Kept(usize),
}

#[derive(Debug, Clone)]
pub struct Password {
    pub first: TextField,
    pub again: TextField,
}

impl Default for Password {
    fn default() -> Password {
        Password {
            first: TextField::masked(),
            again: TextField::masked(),
        }
    }
}

#[derive(Debug)]
pub struct ShareForm {
    pub name: TextField,
    /// The share is named after the array until the user names it.
    name_follows_array: bool,
    /// The pool's share's quota as typed; empty for none.
    pub quota: TextField,
    pub smb: bool,
    pub users: TextField,
    /// By user name, so a password survives editing the user list.
    pub passwords: BTreeMap<String, Password>,
    pub guest: bool,
    pub timemachine: bool,
    /// Empty for the recipe's default, half the array.
    pub timemachine_size: TextField,
    pub nfs: bool,
    pub clients: TextField,
    /// Kernel names of the kept disks whose share is turned off.
    pub kept_unshared: BTreeSet<String>,
    pub focus: Field,
}

impl ShareForm {
    /// SMB for the first account, NFS (off) offered to this network.
    pub fn new(facts: &Facts) -> ShareForm {
        ShareForm {
            name: TextField::new("data"),
            name_follows_array: true,
            quota: TextField::new(""),
            smb: true,
            users: TextField::new(facts.accounts.first().map_or("", |a| a.name.as_str())),
            passwords: BTreeMap::new(),
            guest: false,
            timemachine: false,
            timemachine_size: TextField::new(""),
            nfs: false,
            clients: TextField::new(facts.hardware.network.as_deref().unwrap_or("")),
            kept_unshared: BTreeSet::new(),
            focus: Field::Name,
        }
    }

    pub fn follow_array_name(&mut self, array: &str) {
        if self.name_follows_array {
            self.name = TextField::new(array);
        }
    }

    pub fn user_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for n in self
            .users
            .value()
            .split([' ', ','])
            .filter(|n| !n.is_empty())
        {
            if !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
        names
    }

    /// The rows: the array's share (when there is an array), then one per
    /// kept disk.
    fn fields(&self, shape: Shape) -> Vec<Field> {
        let mut fields = self.array_fields(shape);
        fields.extend((0..shape.kept).map(Field::Kept));
        fields
    }

    fn array_fields(&self, shape: Shape) -> Vec<Field> {
        if !shape.array {
            return Vec::new();
        }
        let mut fields = vec![Field::Name];
        if shape.zfs {
            fields.push(Field::Quota);
        }
        fields.push(Field::Smb);
        if self.smb {
            fields.push(Field::Users);
            for i in 0..self.user_names().len() {
                fields.extend([Field::Password(i), Field::Again(i)]);
            }
            fields.extend([Field::Guest, Field::TimeMachine]);
            if self.timemachine {
                fields.push(Field::TimeMachineSize);
            }
        }
        fields.push(Field::Nfs);
        if self.nfs {
            fields.push(Field::Clients);
        }
        fields
    }

    fn text_mut(&mut self, field: Field) -> Option<&mut TextField> {
        let names = self.user_names();
        let user = |i: usize| names.get(i).cloned().unwrap_or_default();
        match field {
            Field::Name => Some(&mut self.name),
            Field::Quota => Some(&mut self.quota),
            Field::Users => Some(&mut self.users),
            Field::Clients => Some(&mut self.clients),
            Field::TimeMachineSize => Some(&mut self.timemachine_size),
            Field::Password(i) => Some(&mut self.passwords.entry(user(i)).or_default().first),
            Field::Again(i) => Some(&mut self.passwords.entry(user(i)).or_default().again),
            Field::Smb | Field::Guest | Field::TimeMachine | Field::Nfs | Field::Kept(_) => None,
        }
    }

    fn password(&self, user: &str) -> Option<&Password> {
        self.passwords.get(user)
    }

    /// Turns guest access on or off; on turns Time Machine off, which keeps
    /// each user's backups apart. The message says what else changed.
    fn toggle_guest(&mut self) -> Option<&'static str> {
        self.guest = !self.guest;
        (self.guest && std::mem::take(&mut self.timemachine))
            .then_some("Time Machine is now off: a share open to guests cannot hold backups.")
    }

    fn toggle_timemachine(&mut self) -> Option<&'static str> {
        self.timemachine = !self.timemachine;
        (self.timemachine && std::mem::take(&mut self.guest))
            .then_some("Guest access is now off: Time Machine keeps each user's backups apart.")
    }

    /// The Time Machine limit typed; None when empty (half the array) or
    /// Time Machine is off.
    fn timemachine_max_size(&self) -> Result<Option<Size>, String> {
        let typed = self.timemachine_size.value().trim();
        if !self.timemachine || typed.is_empty() {
            return Ok(None);
        }
        let size: Size = typed.parse().map_err(|e| {
            format!("Time Machine size limit: {e}; or leave it empty for half the array.")
        })?;
        if size.bytes() < 1 << 30 {
            return Err(format!(
                "Time Machine size limit: {typed} is less than 1 GiB, too little for one full backup; give more, or leave it empty for half the array."
            ));
        }
        Ok(Some(size))
    }

    /// The quota typed; None when empty.
    fn quota(&self) -> Result<Option<Size>, String> {
        let typed = self.quota.value().trim();
        if typed.is_empty() {
            return Ok(None);
        }
        let size: Size = typed
            .parse()
            .map_err(|e| format!("Quota: {e}; or leave it empty for no limit."))?;
        // zfs reads quota=0 as no quota at all, which is not what was typed.
        if size.bytes() == 0 {
            return Err(format!(
                "Quota: {typed} would mean no limit to ZFS; give a size, or leave it empty."
            ));
        }
        Ok(Some(size))
    }

    /// The share as the recipe's `[[shares]]` would say it; none when
    /// neither SMB nor NFS is on. The quota goes to the pool's share, which
    /// holds the Time Machine folder too.
    pub fn specs(&self, mount: &str, zfs: bool) -> Vec<Share> {
        if !self.smb && !self.nfs {
            return Vec::new();
        }
        let name = self.name.value().trim().to_string();
        let mut shares = vec![Share {
            // `problem` keeps an invalid quota from leaving this screen.
            quota: self.quota().ok().flatten().filter(|_| zfs),
            name: name.clone(),
            path: mount.to_string(),
            smb: self.smb.then(|| Smb {
                users: self.user_names(),
                timemachine: false,
                timemachine_max_size: None,
                readonly: false,
                guest: self.guest,
            }),
            nfs: self.nfs.then(|| Nfs {
                clients: Clients(
                    self.clients
                        .value()
                        .split([' ', ','])
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                        .collect(),
                ),
                readonly: false,
            }),
        }];
        // Time Machine keeps each user's backups in a folder only that user
        // opens; on a share of its own, the array's share stays a share of
        // files.
        if self.smb && self.timemachine {
            let tm = if name.eq_ignore_ascii_case(TIME_MACHINE_SHARE) {
                "backups"
            } else {
                TIME_MACHINE_SHARE
            };
            shares.push(Share {
                quota: None,
                name: tm.to_string(),
                path: format!("{}/{tm}", mount.trim_end_matches('/')),
                smb: Some(Smb {
                    users: self.user_names(),
                    timemachine: true,
                    // `problem` keeps an invalid limit from leaving this screen.
                    timemachine_max_size: self.timemachine_max_size().ok().flatten(),
                    readonly: false,
                    guest: false,
                }),
                nfs: None,
            });
        }
        shares
    }

    /// (user, uid, NT hash) for every share user given a password here.
    pub fn passwords_to_stage(&self, facts: &Facts) -> Vec<(String, u32, String)> {
        if !self.smb {
            return Vec::new();
        }
        self.user_names()
            .into_iter()
            .filter_map(|user| {
                let typed = self.password(&user)?.first.value();
                let account = facts.accounts.iter().find(|a| a.name == user)?;
                (!typed.is_empty()).then(|| (user, account.uid, smbpasswd::nt_hash(typed)))
            })
            .collect()
    }

    /// What stops the form from being used, and the field to fix; the
    /// array's share has nothing to check without an array.
    fn problem(&self, facts: &Facts, shape: Shape) -> Option<(String, Field)> {
        if !shape.array {
            return None;
        }
        if shape.zfs
            && let Err(problem) = self.quota()
        {
            return Some((problem, Field::Quota));
        }
        if self.smb {
            let users = self.user_names();
            if users.is_empty() && !self.guest {
                return Some((
                    "Name at least one user for SMB, or let guests read without a password.".into(),
                    Field::Users,
                ));
            }
            let known: Vec<&str> = facts.accounts.iter().map(|a| a.name.as_str()).collect();
            if let Some(user) = users.iter().find(|u| !known.contains(&u.as_str())) {
                let have = if known.is_empty() {
                    "there are none: add one with `sudo adduser NAME`".to_string()
                } else {
                    format!("accounts here: {}", known.join(", "))
                };
                return Some((
                    format!("There is no account '{user}' on this system ({have})."),
                    Field::Users,
                ));
            }
            for (i, user) in users.iter().enumerate() {
                let (first, again) = self
                    .password(user)
                    .map_or(("", ""), |p| (p.first.value(), p.again.value()));
                if first.is_empty() && !facts.staged_smb_users.contains(user) {
                    return Some((
                        format!("Type a Samba password for {user}."),
                        Field::Password(i),
                    ));
                }
                if first != again {
                    return Some((
                        format!("The two passwords for {user} differ; type them again."),
                        Field::Again(i),
                    ));
                }
            }
            if let Err(problem) = self.timemachine_max_size() {
                return Some((problem, Field::TimeMachineSize));
            }
        }
        if self.nfs && self.clients.value().trim().is_empty() {
            return Some((
                "Name the NFS clients: a host, or a network such as 192.168.1.0/24.".into(),
                Field::Clients,
            ));
        }
        None
    }
}

/// What there is to share: an array (a ZFS pool or not), kept disks.
#[derive(Debug, Clone, Copy)]
struct Shape {
    array: bool,
    zfs: bool,
    kept: usize,
}

fn shape(w: &Wizard) -> Shape {
    Shape {
        array: w.has_array(),
        zfs: w.layout.filesystem == Filesystem::Zfs,
        kept: w.disks.kept.len(),
    }
}

fn fields(w: &Wizard) -> Vec<Field> {
    w.shares.fields(shape(w))
}

/// The field in effect: the one focused while the screen shows it, else
/// the first (the kept disks' when there is no array).
fn focus(w: &Wizard) -> Field {
    let fields = fields(w);
    match fields.contains(&w.shares.focus) {
        true => w.shares.focus,
        false => fields.first().copied().unwrap_or(Field::Name),
    }
}

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let focus = focus(w);
    w.shares.focus = focus;
    if let Some(field) = w.shares.text_mut(focus)
        && field.handle(key)
    {
        if focus == Field::Name {
            w.shares.name_follows_array = false;
        }
        return Effect::None;
    }
    let fields = fields(w);
    // Nothing to share leaves only the way back (the disks screen does not
    // let anyone get here with neither an array nor a kept disk).
    if fields.is_empty() {
        if nav(key) == Some(Nav::Back) {
            w.screen = Screen::Layout;
        }
        return Effect::None;
    }
    let at = fields.iter().position(|f| *f == focus).unwrap_or(0);
    match nav(key) {
        Some(Nav::Toggle) => {
            let also = match focus {
                Field::Smb => {
                    w.shares.smb = !w.shares.smb;
                    None
                }
                Field::Guest => w.shares.toggle_guest(),
                Field::TimeMachine => w.shares.toggle_timemachine(),
                Field::Nfs => {
                    w.shares.nfs = !w.shares.nfs;
                    None
                }
                Field::Kept(i) => {
                    if let Some(disk) = w.kept().get(i).map(|k| k.disk.clone())
                        && !w.shares.kept_unshared.remove(&disk)
                    {
                        w.shares.kept_unshared.insert(disk);
                    }
                    None
                }
                _ => None,
            };
            if let Some(also) = also {
                w.info(also);
            }
        }
        Some(Nav::Down | Nav::NextField) => w.shares.focus = fields[(at + 1).min(fields.len() - 1)],
        Some(Nav::Up | Nav::PrevField) => w.shares.focus = fields[at.saturating_sub(1)],
        Some(Nav::Next) => {
            if let Some((problem, field)) = w.shares.problem(&w.facts, shape(w)) {
                w.shares.focus = field;
                w.error(problem);
            } else if let Err(problems) = w.plan() {
                w.error(problems.join("; "));
            } else {
                w.screen = Screen::Alerts;
            }
        }
        Some(Nav::Back) => w.screen = Screen::Layout,
        _ => {}
    }
    Effect::None
}

pub fn help(w: &Wizard) -> Help {
    let mut keys = vec![("↑↓", "field")];
    if matches!(
        focus(w),
        Field::Smb | Field::Guest | Field::TimeMachine | Field::Nfs | Field::Kept(_)
    ) {
        keys.push(("Space", "on/off"));
    }
    keys.extend([("Enter", "review"), ("Esc", "back"), ("Ctrl-C", "quit")]);
    keys
}

/// One row of the form as drawn.
enum FormRow<'a> {
    Text {
        label: String,
        field: Cow<'a, TextField>,
        note: String,
    },
    Check(String),
}

impl<'a> FormRow<'a> {
    fn text(label: &str, field: Cow<'a, TextField>, note: String) -> FormRow<'a> {
        FormRow::Text {
            label: label.to_string(),
            field,
            note,
        }
    }
}

fn form_row(w: &Wizard, field: Field) -> FormRow<'_> {
    let form = &w.shares;
    let check = |on: bool| if on { "[x]" } else { "[ ]" };
    match field {
        Field::Name => FormRow::text(
            "Share name",
            Cow::Borrowed(&form.name),
            format!(
                "\\\\{}\\{}, at {}",
                w.facts.hostname,
                form.name.value().trim(),
                w.layout.mount.value().trim()
            ),
        ),
        Field::Quota => FormRow::text(
            "Quota",
            Cow::Borrowed(&form.quota),
            "e.g. 500GiB; empty: no limit".into(),
        ),
        Field::Smb => FormRow::Check(format!(
            "{} SMB: Windows, macOS and Linux file sharing",
            check(form.smb)
        )),
        Field::Users => users_row(w),
        Field::Password(i) => password_row(w, i, false),
        Field::Again(i) => password_row(w, i, true),
        Field::Guest => FormRow::Check(format!(
            "    {} Guests may read without a password (read-only for them)",
            check(form.guest)
        )),
        Field::TimeMachine => FormRow::Check(format!(
            "    {} Time Machine for Macs (its own share, timemachine)",
            check(form.timemachine)
        )),
        Field::TimeMachineSize => FormRow::text(
            "    Time Machine size limit",
            Cow::Borrowed(&form.timemachine_size),
            "empty: half the array".into(),
        ),
        Field::Nfs => FormRow::Check(format!(
            "{} NFS: for Linux and Unix clients",
            check(form.nfs)
        )),
        Field::Clients => FormRow::text(
            "    Allowed clients",
            Cow::Borrowed(&form.clients),
            "hosts or networks".into(),
        ),
        Field::Kept(i) => kept_row(w, i),
    }
}

/// A kept disk's share, on or off: its name, where it is and who reads it.
fn kept_row(w: &Wizard, i: usize) -> FormRow<'_> {
    let kept = w.kept();
    let storage = w.storage();
    let (Some(k), Some(entry)) = (kept.get(i), storage.disks.get(i)) else {
        return FormRow::Check(String::new());
    };
    let on = !w.shares.kept_unshared.contains(&k.disk);
    FormRow::Check(format!(
        "{} Kept disk {} ({}): \\\\{}\\{}, read-only for guests",
        if on { "[x]" } else { "[ ]" },
        entry.name,
        entry.mount,
        w.facts.hostname,
        entry.name,
    ))
}

fn users_row(w: &Wizard) -> FormRow<'_> {
    let known: Vec<&str> = w.facts.accounts.iter().map(|a| a.name.as_str()).collect();
    // With guests reading, the users listed are the ones who write.
    let label = if w.shares.guest {
        "    Users who may write"
    } else {
        "    Users"
    };
    FormRow::text(
        label,
        Cow::Borrowed(&w.shares.users),
        format!("accounts: {}", known.join(", ")),
    )
}

/// The i-th user's password, or (`again`) its repetition; a user not
/// typed for yet gets an empty field.
fn password_row(w: &Wizard, i: usize, again: bool) -> FormRow<'_> {
    let form = &w.shares;
    let user = form.user_names().get(i).cloned().unwrap_or_default();
    let field = match form.password(&user) {
        Some(p) if again => Cow::Borrowed(&p.again),
        Some(p) => Cow::Borrowed(&p.first),
        None => Cow::Owned(TextField::masked()),
    };
    if again {
        return FormRow::text("    Same again", field, String::new());
    }
    let note = if w.facts.staged_smb_users.contains(&user) {
        "empty: keep the image's"
    } else {
        ""
    };
    FormRow::text(&format!("    Password for {user}"), field, note.into())
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let theme = &w.settings.theme;
    let form = &w.shares;
    let fields = fields(w);
    let Shape { array, kept, .. } = shape(w);
    let rows = Layout::vertical(
        fields
            .iter()
            .map(|_| Constraint::Length(1))
            .chain([Constraint::Fill(1)]),
    )
    .split(area);
    let focus = focus(w);
    for (field, area) in fields.iter().zip(rows.iter()) {
        let focused = *field == focus;
        // ">" marks the focused field without relying on colour.
        let mark = if focused { ">" } else { " " };
        match form_row(w, *field) {
            FormRow::Text { label, field, note } => {
                let [label_area, input, note_area] = Layout::horizontal([
                    Constraint::Length(29),
                    Constraint::Length(17),
                    Constraint::Fill(1),
                ])
                .spacing(1)
                .areas(*area);
                frame.render_widget(
                    Span::styled(format!("{mark}{label}"), theme.title()),
                    label_area,
                );
                field.draw(frame, input, focused, theme);
                frame.render_widget(Span::styled(note, theme.disabled()), note_area);
            }
            FormRow::Check(label) => {
                let style = if focused {
                    theme.cursor()
                } else {
                    Style::new()
                };
                frame.render_widget(Line::styled(format!("{mark}{label}"), style), *area);
            }
        }
    }
    let mut notes = vec![Line::raw("")];
    if kept > 0 {
        notes.push(Line::raw(
            "A kept disk's share lets guests read without a password; nobody writes, so its files stay as they are.",
        ));
    }
    if array && form.smb {
        notes.push(Line::raw(
            "Samba keeps only a hash of each password; the wizard stages that hash for setup to import, never the password itself.",
        ));
        notes.push(Line::raw(
            "Guests or Time Machine, not both: turning one on turns the other off.",
        ));
    }
    if array && !form.smb && !form.nfs {
        notes.push(Line::styled(
            "Neither SMB nor NFS: the array is only usable on this machine.",
            theme.warning(),
        ));
    }
    frame.render_widget(
        Paragraph::new(notes).wrap(Wrap { trim: false }),
        rows[fields.len()],
    );
}
