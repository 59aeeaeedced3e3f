//! The set-up state (the journal's recipe, plan and context) against a
//! new recipe: what changed, what is refused, and the steps.

use super::{ApplyPlan, ShareChange, withdraw};
use crate::journal::{self, Journal};
use crate::machine::disks::Inventory;
use crate::planner::{self, ArrayPlan, Plan};
use crate::spec::{Alerts, Array, DEFAULT_TEMPERATURE, DeviceRecipe, Mode, Share, Storage, Tls};
use crate::steps::{self, Action, Context, Guard, Step};

/// What apply needs to know about the board besides the journal.
pub struct Board<'a> {
    pub inventory: &'a Inventory,
    /// The accounts in /etc/passwd.
    pub users: &'a [String],
    /// The disks named with `--erase` (kernel name, /dev path or by-id path).
    pub erase: &'a [String],
    /// The relay's password is in its root-only file.
    pub smtp_password: bool,
}

pub fn diff(setup: &Journal, new: &DeviceRecipe, board: &Board) -> ApplyPlan {
    let old = &setup.recipe;
    // A NAS set up in the wizard keeps `mode = "wizard"` and no arrays on
    // its card: its arrays are the ones the wizard chose, in the journal.
    let adopted;
    let new = match &new.storage {
        Some(s) if s.mode == Mode::Wizard && s.arrays.is_empty() => {
            adopted = DeviceRecipe {
                storage: old.storage.clone(),
                ..new.clone()
            };
            &adopted
        }
        _ => new,
    };
    let mut refusals = storage_refusals(old.storage.as_ref(), new.storage.as_ref());
    if new
        .alerts
        .as_ref()
        .and_then(|a| a.smtp.as_ref())
        .is_some_and(|s| s.password.is_some())
    {
        refusals.push(format!(
            "alerts.smtp.password: a password in nasforge.toml on the boot partition can be read by anyone who holds the card, and would be recorded in the journals; remove it from the file and put it in {} instead (`sudo install -m 600 /dev/stdin {}`, then type it and Ctrl-D)",
            crate::paths::PASSWORD_FILE,
            crate::paths::PASSWORD_FILE
        ));
    }
    let added_specs: Vec<(usize, &Array)> = new_arrays(old.storage.as_ref(), new.storage.as_ref());
    let arrays_added = if refusals.is_empty() && !added_specs.is_empty() {
        plan_arrays(
            new.storage.as_ref(),
            &added_specs,
            &setup.plan,
            board,
            &mut refusals,
        )
    } else {
        Vec::new()
    };
    refusals.extend(missing_users(&new.shares, board.users));

    let (shares_added, shares_removed, shares_changed) = compare_shares(&old.shares, &new.shares);
    let users_added = users_added(&old.shares, &new.shares);

    let mut plan = setup.plan.clone();
    plan.arrays.extend(arrays_added.iter().cloned());
    plan.shares = new.shares.clone();
    refusals.extend(new.shares.iter().enumerate().filter_map(|(i, s)| {
        Some(format!(
            "shares[{i}].path: share '{}': {}",
            s.name,
            plan.unservable(&s.path)?
        ))
    }));
    let mut context = setup.context.clone();
    context.fs_uuids.extend(
        arrays_added
            .iter()
            .map(|_| uuid::Uuid::new_v4().to_string()),
    );

    let mut steps = Vec::new();
    if refusals.is_empty() && *new != *old {
        let first_added: Vec<usize> = (setup.plan.arrays.len()..plan.arrays.len()).collect();
        steps.extend(steps::added_array_steps(&plan, &context, &first_added));
        if new.shares != old.shares {
            steps.extend(steps::share_steps(&plan));
            steps.extend(withdraw::steps(&old.shares, &new.shares));
        }
        if new.alerts != old.alerts {
            let temperature = new
                .alerts
                .as_ref()
                .map_or(crate::spec::DEFAULT_TEMPERATURE, |a| a.temperature());
            steps.push(crate::steps::alerts::smartd_step(temperature));
            crate::steps::alerts::add_steps(
                &mut steps,
                new.alerts.as_ref(),
                &setup.context.hostname,
                board.smtp_password,
            );
        }
        steps.push(record_step(setup, new, &plan, &context));
    }
    ApplyPlan {
        alerts_changed: alerts_changes(
            old.alerts.as_ref(),
            new.alerts.as_ref(),
            board.smtp_password,
        ),
        shares_added,
        shares_removed,
        shares_changed,
        users_added,
        arrays_added,
        refusals,
        recipe: new.clone(),
        plan,
        context,
        steps,
    }
}

/// `[alerts]` as it was against as it is, a line per channel gone (`-`)
/// or come (`+`) and the temperature limit; and, when the relay's password
/// is stored on the board, a warning that a relay it was not given to
/// before would receive it (in clear text with `tls = "off"`): a changed
/// line in nasforge.toml on the card must not send it elsewhere unseen.
fn alerts_changes(old: Option<&Alerts>, new: Option<&Alerts>, has_password: bool) -> Vec<String> {
    if old == new {
        return Vec::new();
    }
    let lines = |a: Option<&Alerts>| a.map(Alerts::describe).unwrap_or_default();
    let (was, now) = (lines(old), lines(new));
    let mut out: Vec<String> = was
        .iter()
        .filter(|l| !now.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        now.iter()
            .filter(|l| !was.contains(l))
            .map(|l| format!("+ {l}")),
    );
    let temperature = |a: Option<&Alerts>| a.map_or(DEFAULT_TEMPERATURE, Alerts::temperature);
    if temperature(old) != temperature(new) {
        out.push(format!(
            "~ disks warn over {} °C (was {} °C)",
            temperature(new),
            temperature(old)
        ));
    }
    let relay = |a: Option<&Alerts>| {
        a.and_then(|a| a.smtp.as_ref())
            .map(|s| (s.host.clone(), s.port()))
    };
    if let Some(smtp) = new.and_then(|a| a.smtp.as_ref())
        && has_password
        && relay(old) != relay(new)
    {
        let clear = if smtp.tls == Tls::Off {
            ", in clear text (tls = \"off\")"
        } else {
            ""
        };
        out.push(format!(
            "! the SMTP password kept in {} will be sent to {}:{}{clear}: check that this relay is yours",
            crate::paths::PASSWORD_FILE,
            smtp.host,
            smtp.port()
        ));
    }
    if out.is_empty() {
        out.push("~ [alerts.smtp]: the sender or how the port is written changed".into());
    }
    out
}

/// Arrays removed or changed, and other `[storage]` settings changed: none
/// is done by apply, each says what to do instead.
fn storage_refusals(old: Option<&Storage>, new: Option<&Storage>) -> Vec<String> {
    let none = Vec::new();
    let old_arrays = old.map_or(&none, |s| &s.arrays);
    let new_arrays = new.map_or(&none, |s| &s.arrays);
    let mut out = Vec::new();
    for was in old_arrays {
        match new_arrays.iter().find(|a| a.name == was.name) {
            None => out.push(format!(
                "array '{}' was set up but is no longer in nasforge.toml: apply never removes an array (its data would go with it); put its [[storage.arrays]] entry back",
                was.name
            )),
            Some(now) => out.extend(array_change(was, now)),
        }
    }
    if let (Some(old), Some(new)) = (old, new)
        && (old.mailaddr != new.mailaddr || old.alert_program != new.alert_program)
    {
        out.push("storage.mailaddr / storage.alert_program changed: apply does not rewrite mdadm.conf; put the old values back".into());
    }
    let old_kept = old.map_or(&[][..], |s| &s.disks[..]);
    let new_kept = new.map_or(&[][..], |s| &s.disks[..]);
    if old_kept != new_kept {
        out.push("storage.disks changed: apply does not yet mount or unmount kept disks; put the set-up [[storage.disks]] entries back as they were".into());
    }
    if old.and_then(|s| s.system_mirror.as_ref()) != new.and_then(|s| s.system_mirror.as_ref()) {
        out.push("storage.system_mirror changed: the system is mirrored (or not) at first boot only, and apply does not move a running system; put the old value back".into());
    }
    out
}

/// Why a set-up array cannot become `now`, and the command that changes
/// it instead.
fn array_change(was: &Array, now: &Array) -> Option<String> {
    let name = &was.name;
    let mut what = Vec::new();
    if was.level != now.level {
        what.push(format!("level {} → {}", was.level, now.level));
    }
    if was.filesystem != now.filesystem {
        what.push(format!(
            "filesystem {} → {}",
            was.filesystem, now.filesystem
        ));
    }
    if was.mount != now.mount {
        what.push(format!("mount {} → {}", was.mount, now.mount));
    }
    if (was.import, &was.uuid) != (now.import, &now.uuid) {
        what.push("import or uuid".to_string());
    }
    if was.vdev_count() != now.vdev_count() {
        what.push(format!("vdevs {} → {}", was.vdev_count(), now.vdev_count()));
    }
    if !what.is_empty() {
        return Some(format!(
            "array '{name}': {} would mean rebuilding it and erasing its data, which apply never does; put the old value back",
            what.join(", ")
        ));
    }
    if was.spares != now.spares {
        return Some(format!(
            "array '{name}': spares {} → {}: apply does not turn members into spares or spares into members; put the old value back",
            was.spares, now.spares
        ));
    }
    if was.disks() != now.disks() {
        return Some(format!(
            "array '{name}': its disks changed in nasforge.toml; apply does not add or swap disks. Put the old `disks` back, then use `nasforge-setup grow --array {name} --disk DEV` to add a disk or `nasforge-setup replace --array {name}` to swap a failed one"
        ));
    }
    None
}

/// The arrays `new` has and `old` had not, with their index in `new`.
pub(super) fn new_arrays<'a>(
    old: Option<&Storage>,
    new: Option<&'a Storage>,
) -> Vec<(usize, &'a Array)> {
    let Some(new) = new else { return Vec::new() };
    new.arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| !old.is_some_and(|o| o.arrays.iter().any(|b| b.name == a.name)))
        .collect()
}

/// The new arrays planned on the disks no set-up array uses, with setup's
/// rules; a disk that holds data also needs `--erase`. An array or pool
/// another machine made is adopted as it is (`import = true`), as setup
/// adopts one: nothing on it is erased, so it needs no `--erase`.
fn plan_arrays(
    storage: Option<&Storage>,
    added: &[(usize, &Array)],
    setup: &Plan,
    board: &Board,
    refusals: &mut Vec<String>,
) -> Vec<ArrayPlan> {
    let Some(storage) = storage else {
        return Vec::new();
    };
    let used: Vec<&str> = setup
        .arrays
        .iter()
        .flat_map(|a| a.members.iter().map(|m| m.disk.name.as_str()))
        .collect();
    let inventory = Inventory {
        disks: board
            .inventory
            .disks
            .iter()
            .filter(|d| !used.contains(&d.name.as_str()))
            .cloned()
            .collect(),
        ..board.inventory.clone()
    };
    let only_new = Storage {
        arrays: added.iter().map(|(_, a)| (*a).clone()).collect(),
        system_mirror: None,
        ..storage.clone()
    };
    match planner::plan(&only_new, &[], &inventory) {
        Err(refused) => {
            // The planner numbered the new arrays from 0; the recipe does not.
            refusals.extend(refused.iter().map(|r| {
                let mut text = r.to_string();
                if let Some(j) = added.iter().position(|(_, a)| a.name == r.array) {
                    text = text.replace(
                        &format!("storage.arrays[{j}]"),
                        &format!("storage.arrays[{}]", added[j].0),
                    );
                }
                text
            }));
            Vec::new()
        }
        Ok(plan) => {
            for array in &plan.arrays {
                for m in array.members.iter().filter(|m| m.erase) {
                    if !board.erase.iter().any(|e| m.disk.is_named(e)) {
                        refusals.push(format!(
                            "array '{}': {} holds {} and would be erased; if that is meant, run again with `--erase {}`",
                            array.spec.name,
                            m.disk.name,
                            m.disk.describe_contents(),
                            m.disk.name
                        ));
                    }
                }
            }
            plan.arrays
        }
    }
}

fn missing_users(shares: &[Share], users: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for share in shares {
        let Some(smb) = &share.smb else { continue };
        for user in smb.users.iter().filter(|u| !users.contains(u)) {
            out.push(format!(
                "share '{}': the user '{user}' does not exist on this NAS; add it with `nasforge-setup user add {user}`",
                share.name
            ));
        }
    }
    out
}

fn smb_users(shares: &[Share]) -> Vec<&str> {
    shares
        .iter()
        .filter_map(|s| s.smb.as_ref())
        .flat_map(|s| s.users.iter().map(String::as_str))
        .collect()
}

fn users_added(old: &[Share], new: &[Share]) -> Vec<String> {
    let before = smb_users(old);
    let mut out: Vec<String> = Vec::new();
    for user in smb_users(new) {
        if !before.contains(&user) && !out.iter().any(|u| u == user) {
            out.push(user.to_string());
        }
    }
    out
}

type Compared = (Vec<Share>, Vec<Share>, Vec<ShareChange>);

/// Shares matched by name as Samba matches them (ignoring case).
fn compare_shares(old: &[Share], new: &[Share]) -> Compared {
    let same = |a: &Share, b: &Share| a.name.eq_ignore_ascii_case(&b.name);
    let added = new
        .iter()
        .filter(|n| !old.iter().any(|o| same(o, n)))
        .cloned()
        .collect();
    let removed = old
        .iter()
        .filter(|o| !new.iter().any(|n| same(o, n)))
        .cloned()
        .collect();
    let changed = new
        .iter()
        .filter_map(|n| {
            let o = old.iter().find(|o| same(o, n))?;
            let what = super::describe::share_changes(o, n);
            (!what.is_empty()).then(|| ShareChange {
                name: n.name.clone(),
                what,
            })
        })
        .collect();
    (added, removed, changed)
}

/// The setup journal as it stands, with `new`, `plan` and `context` as the
/// set-up state; written last, so an apply cut short is applied again.
fn record_step(setup: &Journal, new: &DeviceRecipe, plan: &Plan, context: &Context) -> Step {
    let mut journal = setup.clone();
    journal.recipe = new.clone();
    journal.plan = plan.clone();
    journal.context = context.clone();
    let contents = serde_json::to_string_pretty(&journal).expect("a journal is plain data");
    Step {
        id: "record-setup".into(),
        title: "Record nasforge.toml as what is set up".into(),
        guard: Guard::Always,
        actions: vec![Action::WriteFile {
            path: journal::PATH.into(),
            contents,
            mode: 0o600,
        }],
        always: vec![],
    }
}
