//! Accounts after setup: `user add` makes a Linux account for the shares
//! (own group, home from /etc/skel, the same number for uid and group, and
//! `/usr/sbin/nologin`: Debian's smb.conf has `unix password sync = yes`,
//! so the Samba password it gets would otherwise become a way to log in
//! over SSH) and gives it a Samba password; `user passwd` changes that
//! password.
//!
//! The password is staged exactly as the builder stages one: an NT hash in
//! smbpasswd format in a root-only file, which the operation's step imports
//! with pdbedit (an existing account is updated) and deletes. So neither
//! the password nor its hash enters the operation journal, the log or any
//! command line.

use super::ApplyError;
use crate::atomic_file;
use crate::executor::Event;
use crate::machine::disks::Host;
use crate::operation::{self, Kind, Operation, OperationError};
use crate::runner::Runner;
use crate::shares::{samba, smbpasswd};
use crate::steps::{Action, Cmd, Guard, Step};

/// One line of /etc/passwd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
}

/// The accounts in the board's /etc/passwd.
pub fn accounts(host: &Host) -> Result<Vec<Account>, ApplyError> {
    Ok(id_file(host, "/etc/passwd")?
        .into_iter()
        .map(|(name, uid)| Account { name, uid })
        .collect())
}

/// (name, id) of each line of a passwd- or group-format file.
fn id_file(host: &Host, file: &str) -> Result<Vec<(String, u32)>, ApplyError> {
    let path = host.path(file);
    let text = std::fs::read_to_string(&path).map_err(|source| ApplyError::Io {
        what: "cannot read",
        path: path.clone(),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse().ok()?))
        })
        .collect())
}

/// A user name the recipe's checks accept and useradd takes as it is.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && name.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// What `user add` or `user passwd` will do, before the password is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPlan {
    pub name: String,
    pub uid: u32,
    pub new_account: bool,
    pub steps: Vec<Step>,
}

impl UserPlan {
    pub fn describe(&self) -> String {
        if self.new_account {
            format!(
                "+ user '{}' (uid {}, group '{}', home /home/{}, no shell, no login password) with a Samba password\n",
                self.name, self.uid, self.name, self.name
            )
        } else {
            format!("~ user '{}': new Samba password\n", self.name)
        }
    }
}

/// A new account; refused when the name is taken.
pub fn plan_add(host: &Host, name: &str) -> Result<UserPlan, ApplyError> {
    if !valid_name(name) {
        return Err(ApplyError::User(format!(
            "`{}` is not a valid user name; use lowercase letters, digits, '-' and '_', starting with a letter or '_', at most 32 characters",
            name.escape_debug()
        )));
    }
    let users = id_file(host, "/etc/passwd")?;
    let groups = id_file(host, "/etc/group").unwrap_or_default();
    if users.iter().any(|(n, _)| n == name) {
        return Err(ApplyError::User(format!(
            "the user '{name}' already exists; change its Samba password with `nasforge-setup user passwd {name}`"
        )));
    }
    if groups.iter().any(|(n, _)| n == name) {
        return Err(ApplyError::User(format!(
            "a group named '{name}' already exists, and the new user gets a group of its own name; pick another user name"
        )));
    }
    let taken = |id: u32| users.iter().chain(&groups).any(|(_, i)| *i == id);
    let uid = (1000..60000)
        .find(|i| !taken(*i))
        .ok_or_else(|| ApplyError::User("no free user id between 1000 and 60000".into()))?;
    // `id` first: a resumed step finds the account it already made.
    let useradd = format!(
        "id -u {name} >/dev/null 2>&1 || useradd --create-home --user-group --uid {uid} --shell /usr/sbin/nologin {name}"
    );
    let account = Step {
        id: format!("useradd:{name}"),
        title: format!("Create the user '{name}'"),
        guard: Guard::Always,
        actions: vec![Action::Run(Cmd::new(&["sh", "-c", &useradd]))],
        always: vec![],
    };
    Ok(UserPlan {
        name: name.into(),
        uid,
        new_account: true,
        steps: vec![account, import_step(name)],
    })
}

/// A new Samba password for an account that exists.
pub fn plan_passwd(host: &Host, name: &str) -> Result<UserPlan, ApplyError> {
    let Some(account) = accounts(host)?.into_iter().find(|a| a.name == name) else {
        return Err(ApplyError::User(format!(
            "there is no user '{name}' on this NAS; add it with `nasforge-setup user add {name}`"
        )));
    };
    Ok(UserPlan {
        name: name.into(),
        uid: account.uid,
        new_account: false,
        steps: vec![import_step(name)],
    })
}

fn import_step(name: &str) -> Step {
    Step {
        id: format!("samba-password:{name}"),
        title: format!("Set the Samba password of '{name}'"),
        guard: Guard::FilePresent {
            path: samba::STAGED_PASSWORDS.into(),
        },
        actions: vec![
            Action::Run(Cmd {
                fails_if_stdout_has: Some("failed".into()),
                ..Cmd::new(&samba::import_command())
            }),
            Action::RemoveFile {
                path: samba::STAGED_PASSWORDS.into(),
            },
        ],
        always: vec![],
    }
}

/// Stages the password's hash and runs the plan as an operation.
pub fn run(
    host: &Host,
    plan: &UserPlan,
    password: &str,
    runner: &mut dyn Runner,
    on_event: &mut dyn FnMut(Event),
) -> Result<Operation, ApplyError> {
    if password.is_empty() {
        return Err(ApplyError::User(
            "the password is empty; Samba clients refuse an empty password".into(),
        ));
    }
    // Checked before staging: a staged hash waiting behind another
    // operation would be imported by whichever step runs next.
    if let Some(busy) = operation::pending(host)? {
        return Err(OperationError::Busy {
            title: busy.title,
            done: busy.done.len(),
            total: busy.steps.len(),
            path: operation::path(host),
        }
        .into());
    }
    let staged = host.path(samba::STAGED_PASSWORDS);
    let existing = std::fs::read_to_string(&staged).unwrap_or_default();
    let line = smbpasswd::line(
        &plan.name,
        plan.uid,
        &smbpasswd::nt_hash(password),
        crate::journal::now(),
    );
    atomic_file::write(
        &staged,
        smbpasswd::merge(&existing, &[line]).as_bytes(),
        0o600,
    )
    .map_err(|source| ApplyError::Io {
        what: "cannot stage the Samba password in",
        path: staged.clone(),
        source,
    })?;
    let title = if plan.new_account {
        format!("Add the user '{}'", plan.name)
    } else {
        format!("Change the Samba password of '{}'", plan.name)
    };
    let op = Operation::new(Kind::Apply, title, plan.describe(), plan.steps.clone());
    Ok(operation::start(host, op, runner, on_event)?)
}
