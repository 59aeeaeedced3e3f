//! `[system]` and its `[[system.users]]` as the recipe gives them, and the
//! checks that need no image: names the image's account files can hold,
//! passwords someone can use, and share users that exist.

use super::{Vendor, access, secrets};
use crate::diag::Located;
use crate::packages::section::MIRROR_SCHEMES;
use crate::section::{Checked, RecipeText, checked, url_problem};
use nasforge_engine::spec::{Mode, Share, Storage};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSection {
    pub hostname: Option<String>,
    /// An IANA zone name such as `Europe/Berlin`.
    pub timezone: Option<String>,
    #[serde(default)]
    pub users: Vec<UserSpec>,
    /// Enable the SSH server; default: on when any user has SSH keys.
    pub ssh: Option<bool>,
    /// A crypt(3) hash for root; without one root's password is locked.
    pub root_password_hash: Option<String>,
    /// `"security"`: unattended-upgrades takes Debian's security fixes
    /// daily (see [`super::updates`]); `"off"` by default.
    #[serde(default)]
    pub updates: super::updates::Updates,
    /// When a security update that needs a restart may reboot the NAS:
    /// "04:00" unless said, or "never".
    pub updates_reboot: Option<String>,
    /// Debian's security archive (or a mirror of it), listed in the image
    /// when its apt sources have no `<release>-security`; default: the one
    /// this machine's apt uses.
    pub updates_mirror: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    pub name: String,
    /// A crypt(3) hash (`$y$...`, `$6$...`), as `mkpasswd` prints it.
    pub password_hash: Option<String>,
    /// Hashed at build time, never written anywhere.
    pub password: Option<String>,
    #[serde(default)]
    pub ssh_authorized_keys: Vec<String>,
    /// Member of `sudo`, so it may run anything as root. Off unless the
    /// recipe says so: a backup robot's key must not become root.
    #[serde(default)]
    pub sudo: bool,
    /// Further groups, when the image has them.
    #[serde(default)]
    pub groups: Vec<String>,
}

impl SystemSection {
    /// The reboot time of `updates = "security"`.
    pub fn updates_reboot(&self) -> &str {
        self.updates_reboot
            .as_deref()
            .unwrap_or(super::updates::DEFAULT_REBOOT)
    }

    /// Whether the SSH server is wanted: as said, or when a user has keys.
    pub fn wants_ssh(&self) -> bool {
        self.ssh
            .unwrap_or_else(|| self.users.iter().any(|u| !u.ssh_authorized_keys.is_empty()))
    }
}

/// The section as written, when it passes every check that needs no image;
/// `shares` name the users that need Samba password material.
pub fn parse(
    raw: SystemSection,
    storage: Option<&Storage>,
    shares: &[Share],
    at: &RecipeText,
) -> Checked<SystemSection> {
    let smb_users: Vec<String> = shares
        .iter()
        .filter_map(|s| s.smb.as_ref())
        .flat_map(|s| s.users.iter().cloned())
        .collect();
    let mut errs = settings_problems(&raw, at);
    let mut seen = Vec::new();
    for (i, u) in raw.users.iter().enumerate() {
        errs.extend(user_problems(i, u, &seen, &smb_users, at));
        seen.push(u.name.clone());
    }
    for u in &smb_users {
        if !raw.users.iter().any(|x| &x.name == u) {
            errs.push(at.at_path(
                "shares",
                &format!(
                    "share user `{u}` is not in [[system.users]]; add it there with a `password`"
                ),
            ));
        }
    }
    errs.extend(wizard_problem(storage, &raw, at));
    checked(raw, errs)
}

/// The hostname, the time zone and root's password hash.
fn settings_problems(sys: &SystemSection, at: &RecipeText) -> Vec<Located> {
    let mut out = Vec::new();
    if let Some(h) = &sys.hostname {
        let ok = !h.is_empty()
            && h.len() <= 63
            && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !h.starts_with('-')
            && !h.ends_with('-');
        if !ok {
            out.push(at.at_path("system.hostname", &format!("`{h}` is not a valid host name: use letters, digits and `-`, up to 63 characters")));
        }
    }
    if let Some(tz) = &sys.timezone {
        let ok = !tz.is_empty()
            && !tz.starts_with('/')
            && !tz.contains("..")
            && tz
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/_+-".contains(c));
        if !ok {
            out.push(at.at_path(
                "system.timezone",
                &format!("`{tz}` is not a time zone name such as Europe/Berlin or UTC"),
            ));
        }
    }
    if let Some(r) = &sys.updates_reboot {
        if sys.updates != super::updates::Updates::Security {
            out.push(at.at_path(
                "system.updates_reboot",
                "only security updates reboot on their own: add `updates = \"security\"` to [system], or leave updates_reboot out",
            ));
        } else if let Some(why) = super::updates::reboot_problem(r) {
            out.push(at.at_path("system.updates_reboot", &why));
        }
    }
    if let Some(m) = &sys.updates_mirror {
        if sys.updates != super::updates::Updates::Security {
            out.push(at.at_path(
                "system.updates_mirror",
                "the security archive is for security updates: add `updates = \"security\"` to [system], or leave updates_mirror out",
            ));
        } else if let Some(why) = url_problem(m, MIRROR_SCHEMES) {
            out.push(
                at.at_path("system.updates_mirror", &why)
                    .with_help(super::updates::MIRROR_HELP),
            );
        }
    }
    if let Some(h) = &sys.root_password_hash {
        if let Some(why) = secrets::crypt_hash_problem(h) {
            out.push(at.at_path(
                "system.root_password_hash",
                &format!("not a crypt(3) hash: {why}; make one with `mkpasswd -m yescrypt`"),
            ));
        } else if access::password_state("root", h) != access::Password::Set(None) {
            out.push(at.at_path(
                "system.root_password_hash",
                "this is the hash of a password everyone knows; choose another",
            ));
        }
    }
    out
}

/// User `i`: a name useradd takes, once, a way to log in, and SSH keys
/// that are key lines. `seen` are the names of the users before it.
fn user_problems(
    i: usize,
    u: &UserSpec,
    seen: &[String],
    smb_users: &[String],
    at: &RecipeText,
) -> Vec<Located> {
    let field = |f: &str| format!("system.users[{i}].{f}");
    let mut out = Vec::new();
    let name_ok = !u.name.is_empty()
        && u.name.len() <= 32
        && u.name
            .starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && u.name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !name_ok {
        out.push(at.at_path(&field("name"), &format!("`{}` is not a valid user name: lowercase letters, digits, `_` and `-`, starting with a letter, at most 32 characters", u.name)));
    }
    if u.name == "root" {
        out.push(at.at_path(
            &field("name"),
            "root is not listed here: give root's password as `[system] root_password_hash` (root is locked without one), and add your own user with `sudo = true`",
        ));
    }
    if seen.contains(&u.name) {
        out.push(at.at_path(
            &field("name"),
            &format!("user `{}` is listed twice", u.name),
        ));
    }
    if let Some((f, message)) = password_problem(u, smb_users) {
        out.push(at.at_path(&field(f), &message));
    }
    for (k, key) in u.ssh_authorized_keys.iter().enumerate() {
        let kind = key.split_whitespace().next().unwrap_or("");
        if !(kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-"))
            || key.contains('\n')
        {
            out.push(at.at_path(
                &format!("system.users[{i}].ssh_authorized_keys[{k}]"),
                "not an SSH public key line (`ssh-ed25519 AAAA... comment`)",
            ));
        }
    }
    out
}

/// What is wrong with how a user logs in, as (field, message).
fn password_problem(u: &UserSpec, smb_users: &[String]) -> Option<(&'static str, String)> {
    match (&u.password, &u.password_hash) {
        (Some(_), Some(_)) => Some((
            "password",
            "give `password` or `password_hash`, not both".into(),
        )),
        (None, Some(h)) => {
            if let Some(why) = secrets::crypt_hash_problem(h) {
                Some((
                    "password_hash",
                    format!(
                        "not a crypt(3) hash: {why}; make one with `mkpasswd -m yescrypt`, or give `password` and let nasforge hash it"
                    ),
                ))
            } else if smb_users.contains(&u.name) {
                Some((
                    "password_hash",
                    format!(
                        "`{}` is a Samba share user, and Samba needs its own hash of the password: give `password` instead (nasforge stores only hashes)",
                        u.name
                    ),
                ))
            } else {
                None
            }
        }
        (Some(p), None) if p.is_empty() => Some((
            "password",
            "an empty password; leave it out for key-only login".into(),
        )),
        (None, None) if u.ssh_authorized_keys.is_empty() => Some((
            "name",
            format!(
                "`{}` has no password and no SSH key, so nobody could log in as it",
                u.name
            ),
        )),
        _ => None,
    }
}

/// Wizard mode's storage is set up by someone who logs in and runs `sudo
/// nasforge-setup`: without a user who may use sudo, nobody could.
fn wizard_problem(
    storage: Option<&Storage>,
    sys: &SystemSection,
    at: &RecipeText,
) -> Option<Located> {
    let wizard = storage.is_some_and(|s| s.mode == Mode::Wizard);
    if !wizard || sys.users.iter().any(|u| u.sudo) {
        return None;
    }
    Some(at.at_path(
        "storage.mode",
        "the wizard runs only after a login, as `sudo nasforge-setup`, and no [[system.users]] entry may use sudo: add your user with `sudo = true` and a `password` (console and SSH) or `ssh_authorized_keys` (SSH)",
    ))
}

/// Recipe problems that only exist on a base of this kind, found once the
/// base image is known.
pub fn problems_for(vendor: Vendor, sys: &SystemSection, at: &RecipeText) -> Checked<()> {
    if !vendor.userconf {
        return Ok(());
    }
    let Some(first) = sys.users.first() else {
        return Err(vec![at.at_path(
            "system",
            "Raspberry Pi OS creates its first user from userconf.txt, and without one it waits at first boot for a person at the console (tty8): add a [[system.users]] entry",
        )]);
    };
    let n = &first.name;
    let ok = (1..=32).contains(&n.len())
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && n != "root";
    if ok {
        return Ok(());
    }
    Err(vec![at.at_path(
        "system.users[0].name",
        &format!("Raspberry Pi OS's userconf refuses `{n}` for the first user and would wait at first boot for a person at the console: its rule is lowercase letters, digits and `-`, starting with a letter, 1 to 32 characters, not root"),
    )])
}
