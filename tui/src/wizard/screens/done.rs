//! Done: how to reach the shares from each kind of computer, where the
//! status lives, and what to do when a disk fails, for the plan the setup
//! service finished.
//!
//! Only names the NAS answers to: `<host>.local` through avahi (mDNS, what
//! macOS and Linux ask), and the bare host name through wsdd2 and nmbd
//! (LLMNR and NetBIOS, what Windows asks). A bare name on macOS or Linux
//! would need a DNS entry nobody made.

use super::Help;
use crate::ui::input::{Nav, nav};
use crate::wizard::{Effect, Wizard};
use nasforge_engine::planner::{ArrayPlan, Plan};
use nasforge_engine::spec::{Level, Share};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::style::Style;

pub fn key(w: &mut Wizard, key: KeyEvent) -> Effect {
    let Some(n) = nav(key) else {
        return if key.code == KeyCode::Char('q') {
            Effect::Quit
        } else {
            Effect::None
        };
    };
    if w.done.nav(n) {
        return Effect::None;
    }
    match n {
        Nav::Next | Nav::Back => Effect::Quit,
        _ => Effect::None,
    }
}

pub fn help(_: &Wizard) -> Help {
    vec![("↑↓ PgUp PgDn", "scroll"), ("Enter", "finish")]
}

pub fn draw(frame: &mut Frame, area: Rect, w: &Wizard) {
    let plan = match w.progress.as_ref().map(|p| &p.journal) {
        Some(Ok(Some(j))) => &j.plan,
        _ => return,
    };
    let lines = text(w, plan);
    w.done.draw(frame, area, &lines);
}

/// The screen's lines, each with its style, in the order they are read.
type Lines = Vec<(String, Style)>;

fn text(w: &Wizard, plan: &Plan) -> Lines {
    let theme = &w.settings.theme;
    let mut out: Lines = vec![("Your NAS is ready.".into(), theme.good())];
    out.extend(still_syncing(w));
    for share in &plan.shares {
        out.extend(how_to_connect(w, share));
    }
    out.extend([
        (String::new(), Style::new()),
        ("Status".into(), theme.title()),
        (
            format!(
                "  sudo nasforge-setup status; also written to {}, which any computer can read from the boot partition.",
                w.facts.status_file
            ),
            Style::new(),
        ),
    ]);
    for array in &plan.arrays {
        out.extend(when_a_disk_fails(w, array));
    }
    out
}

/// Arrays md is still resyncing: usable, but not yet redundant.
fn still_syncing(w: &Wizard) -> Lines {
    let mut out = Lines::new();
    for a in w.progress.iter().flat_map(|p| &p.arrays) {
        if let Some(sync) = &a.sync {
            out.push((
                format!(
                    "{} is still building its redundancy, {sync}; it can be used meanwhile.",
                    a.name.as_deref().unwrap_or(&a.device)
                ),
                Style::new(),
            ));
        }
    }
    out
}

/// A share's addresses from Windows, macOS and Linux, and who gets in.
fn how_to_connect(w: &Wizard, share: &Share) -> Lines {
    let host = &w.facts.hostname;
    let mut out: Lines = vec![
        (String::new(), Style::new()),
        (
            format!("Share '{}' ({})", share.name, share.path),
            w.settings.theme.title(),
        ),
    ];
    let mut say = |text: String| out.push((text, Style::new()));
    if let Some(smb) = &share.smb {
        say(format!("  Windows        \\\\{host}\\{}", share.name));
        say(format!(
            "  macOS, Linux   smb://{host}.local/{}",
            share.name
        ));
        if smb.guest {
            say("  Guests         connect without a password and may only read".into());
            let writers = if smb.users.is_empty() {
                "nobody over SMB".to_string()
            } else {
                smb.users.join(", ")
            };
            say(format!("  May write      {writers}"));
        } else {
            say(format!("  Users          {}", smb.users.join(", ")));
        }
        if smb.timemachine {
            say(format!(
                "  Time Machine   choose '{}' on {host}.local in Time Machine's settings",
                share.name
            ));
        }
    }
    if let Some(nfs) = &share.nfs {
        say(format!("  NFS            {host}.local:{}", share.path));
        say(format!(
            "  Mount          sudo mount -t nfs {host}.local:{} /mnt",
            share.path
        ));
        say(format!("  NFS clients    {}", nfs.clients.0.join(" ")));
    }
    out
}

/// What the alert is, and how to swap the disk; or, for an array without
/// redundancy, that there is nothing to rebuild from.
fn when_a_disk_fails(w: &Wizard, array: &ArrayPlan) -> Lines {
    let mut out: Lines = vec![
        (String::new(), Style::new()),
        (
            format!("When a disk of '{}' fails", array.spec.name),
            w.settings.theme.title(),
        ),
    ];
    let mut say = |text: String| out.push((text, Style::new()));
    if array.spec.level == Level::Single || array.tolerance.guaranteed == 0 {
        say(format!(
            "  '{}' has no second copy of the data: one failed disk loses it. Keep backups; smartd logs early warnings.",
            array.spec.name
        ));
        return out;
    }
    let alert = if w.alerts.choices().ok().flatten().is_some() {
        "an alert goes to the channels you chose"
    } else {
        "the alert is logged and shown in the status"
    };
    say(format!(
        "  {alert}, and the status says degraded and names the disk by model and serial. The array keeps working. To replace the disk:"
    ));
    say("  1. Attach a blank disk at least as large (it may replace the failed one).".to_string());
    say(format!(
        "  2. sudo nasforge-setup   (its manage view offers the disks that fit), or: sudo nasforge-setup replace --array {}",
        array.spec.name
    ));
    say("  3. It shows the plan, partitions the disk like the others, adds it and follows the rebuild.".to_string());
    out
}
