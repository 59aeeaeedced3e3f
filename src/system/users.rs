//! `[[system.users]]` written into the image: accounts added the way
//! useradd would (or, for Raspberry Pi OS's first user, left to its
//! userconf), homes from /etc/skel, SSH keys, root's password, and Samba's
//! password material staged for the first boot.

use super::accounts::{self, Accounts};
use super::{Applied, SMBPASSWD, STAGED_KEYS, SystemSection, UserSpec, Vendor, access, record};
use super::{replace, secrets};
use crate::image::ext4::{Ext4, Kind, Op};
use crate::manifest::Change;
use anyhow::{Context, Result};

/// The image's account files as read, before any change.
pub(super) struct Before {
    pub passwd: Vec<u8>,
    pub shadow: Vec<u8>,
    pub group: Vec<u8>,
    pub gshadow: Option<Vec<u8>>,
}

/// What the first boot picks up from /var/lib/nasforge.
#[derive(Default)]
struct Staged {
    /// smbpasswd lines of share users, imported by nasforge-setup.
    smbpasswd: String,
    /// (user, authorized_keys) of users Raspberry Pi OS creates itself.
    keys: Vec<(String, String)>,
}

impl Staged {
    /// The smbpasswd line of share user `u`, whose Samba password is only
    /// known now, in plaintext.
    fn samba_user(&mut self, u: &UserSpec, uid: u32, now: u64) -> Result<()> {
        use nasforge_engine::shares::smbpasswd;
        let password = u
            .password
            .as_deref()
            .context("validated: share users have a password")?;
        let hash = smbpasswd::nt_hash(password);
        self.smbpasswd
            .push_str(&smbpasswd::line(&u.name, uid, &hash, now));
        self.smbpasswd.push('\n');
        Ok(())
    }
}

/// What adding a user takes from the image: /etc/skel's files, copied
/// into each new home, and today for shadow's last-change field.
struct NewUsers<'a> {
    root: &'a Ext4,
    skel_paths: Vec<String>,
    skel_data: Vec<Option<Vec<u8>>>,
    days: u64,
}

pub(super) fn apply(
    root: &Ext4,
    sys: &SystemSection,
    smb_users: &[String],
    vendor: Vendor,
    before: Before,
    out: &mut Applied,
) -> Result<()> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut acc = Accounts {
        passwd: text(&before.passwd),
        shadow: text(&before.shadow),
        group: text(&before.group),
        gshadow: before.gshadow.as_deref().map(text),
    };
    let locked = lock_passwords(&mut acc, sys, &mut out.warnings)?;
    // Raspberry Pi OS renames its uid-1000 user from userconf.txt on first
    // boot; using that for the first user keeps its own wizard quiet.
    let pios_first_user = if vendor.userconf {
        acc.name_of_uid(1000)
    } else {
        None
    };
    let skel_paths: Vec<String> = root
        .list("/etc/skel")?
        .unwrap_or_default()
        .iter()
        .filter(|e| e.kind == Kind::File)
        .map(|e| format!("/etc/skel/{}", e.name))
        .collect();
    let skel_data = root.read_many(&skel_paths)?;
    out.ops.extend(root.missing_dirs(&["/home"])?);
    let status = root.read("/var/lib/dpkg/status")?.unwrap_or_default();
    let scheme = secrets::Scheme::for_dpkg_status(&String::from_utf8_lossy(&status));
    let mut staged = Staged::default();
    let new_users = NewUsers {
        root,
        skel_paths,
        skel_data,
        days: super::days_since_epoch(),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (i, u) in sys.users.iter().enumerate() {
        let hash = match (&u.password, &u.password_hash) {
            (Some(p), _) => Some(secrets::crypt_password(p, scheme)?),
            (None, Some(h)) => Some(h.clone()),
            (None, None) => None,
        };
        let groups = groups_of(u, &acc, &mut out.warnings);
        let uid = match (i, &pios_first_user) {
            (0, Some(first)) => userconf_user(
                &mut acc,
                first,
                u,
                hash.as_deref(),
                &groups,
                out,
                &mut staged,
            )?,
            _ => new_user(&new_users, &mut acc, u, hash.as_deref(), &groups, out)?,
        };
        if smb_users.contains(&u.name) {
            staged.samba_user(u, uid, now)?;
        }
    }
    write_accounts(root, out, &before, &acc, locked)?;
    stage(root, out, staged)
}

/// The groups the user asked for, plus `sudo`; those the image lacks are
/// skipped with a warning.
fn groups_of(u: &UserSpec, acc: &Accounts, warnings: &mut Vec<String>) -> Vec<String> {
    let mut groups: Vec<String> = u.groups.clone();
    if u.sudo {
        groups.push("sudo".into());
    }
    for g in &groups {
        if !acc.has_group(g) {
            warnings.push(format!(
                "user {}: the image has no group `{g}`; skipped",
                u.name
            ));
        }
    }
    groups
}

/// The first user on Raspberry Pi OS: its userconf renames the uid-1000
/// account `first` on first boot, from userconf.txt on the boot partition.
fn userconf_user(
    acc: &mut Accounts,
    first: &str,
    u: &UserSpec,
    hash: Option<&str>,
    groups: &[String],
    out: &mut Applied,
    staged: &mut Staged,
) -> Result<u32> {
    // The rename keeps the account's groups (pi-gen's, sudo among them), so
    // the recipe's are set on it now.
    acc.join_groups(first, groups);
    if !u.sudo {
        acc.leave_group(first, "sudo");
    }
    // pi-gen makes `pi` with `adduser --disabled-login` since 2026-03,
    // whose shell is nologin; the rename keeps it, and the recipe's user
    // logs in.
    acc.allow_login(first);
    let line = accounts::record(&[&u.name, hash.unwrap_or("!")])?;
    out.boot_files
        .push(("userconf.txt".into(), line.into_bytes()));
    out.changes.push(Change {
        file: "boot:/userconf.txt".into(),
        before_sha256: None,
        after_sha256: None,
        why: format!(
            "first user `{}`, created by Raspberry Pi OS's userconf on first boot",
            u.name
        ),
        details: vec![],
    });
    if !u.ssh_authorized_keys.is_empty() {
        staged
            .keys
            .push((u.name.clone(), u.ssh_authorized_keys.join("\n") + "\n"));
    }
    Ok(1000)
}

/// A user added to the account files now, with a home from /etc/skel when
/// it has none and its SSH keys.
fn new_user(
    new: &NewUsers,
    acc: &mut Accounts,
    u: &UserSpec,
    hash: Option<&str>,
    groups: &[String],
    out: &mut Applied,
) -> Result<u32> {
    let root = new.root;
    let added = acc.add_user(&u.name, hash, groups, new.days)?;
    if root.list(&added.home)?.is_none() {
        out.ops.push(Op::Mkdir {
            path: added.home.clone(),
            mode: 0o700,
            uid: added.uid,
            gid: added.gid,
        });
        for (path, data) in new.skel_paths.iter().zip(&new.skel_data) {
            if let Some(data) = data {
                let name = path.rsplit('/').next().unwrap_or_default();
                out.ops.push(Op::Write {
                    path: format!("{}/{name}", added.home),
                    data: data.clone(),
                    mode: 0o644,
                    uid: added.uid,
                    gid: added.gid,
                });
            }
        }
    }
    if !u.ssh_authorized_keys.is_empty() {
        authorized_keys(root, &added, &u.ssh_authorized_keys, out)?;
    }
    Ok(added.uid)
}

/// `~/.ssh/authorized_keys` of a user just added, replacing any there.
fn authorized_keys(
    root: &Ext4,
    added: &accounts::Added,
    keys: &[String],
    out: &mut Applied,
) -> Result<()> {
    let ssh = format!("{}/.ssh", added.home);
    if root.list(&ssh)?.is_none() {
        out.ops.push(Op::Mkdir {
            path: ssh.clone(),
            mode: 0o700,
            uid: added.uid,
            gid: added.gid,
        });
    }
    let path = format!("{ssh}/authorized_keys");
    if root.owner(&path)?.is_some() {
        out.ops.push(Op::Remove { path: path.clone() });
    }
    let data = keys.join("\n") + "\n";
    out.ops.push(Op::Write {
        path: path.clone(),
        data: data.clone().into_bytes(),
        mode: 0o600,
        uid: added.uid,
        gid: added.gid,
    });
    out.changes.push(record(
        &path,
        None,
        data.as_bytes(),
        "[[system.users]] ssh_authorized_keys",
    ));
    Ok(())
}

/// The edited account files, each written only when it changed; `locked`
/// (what `lock_passwords` did) goes into the record of /etc/shadow.
fn write_accounts(
    root: &Ext4,
    out: &mut Applied,
    before: &Before,
    acc: &Accounts,
    locked: Vec<String>,
) -> Result<()> {
    let why = "[[system.users]]";
    let passwd = (&before.passwd, &acc.passwd);
    replace(
        root,
        out,
        "/etc/passwd",
        Some(passwd.0),
        passwd.1.as_bytes(),
        0o644,
        why,
    )?;
    let shadow_why = if locked.is_empty() {
        why
    } else {
        "no account anyone can guess; [[system.users]]"
    };
    let shadow = (&before.shadow, &acc.shadow);
    replace(
        root,
        out,
        "/etc/shadow",
        Some(shadow.0),
        shadow.1.as_bytes(),
        0o640,
        shadow_why,
    )?;
    if let Some(c) = out
        .changes
        .iter_mut()
        .find(|c| c.file == "root:/etc/shadow")
    {
        c.details.extend(locked);
    }
    let group = (&before.group, &acc.group);
    replace(
        root,
        out,
        "/etc/group",
        Some(group.0),
        group.1.as_bytes(),
        0o644,
        why,
    )?;
    if let (Some(before), Some(after)) = (&before.gshadow, &acc.gshadow) {
        replace(
            root,
            out,
            "/etc/gshadow",
            Some(before),
            after.as_bytes(),
            0o640,
            why,
        )?;
    }
    Ok(())
}

/// Samba's password material and the keys of userconf's user, left in
/// /var/lib/nasforge for the first boot.
fn stage(root: &Ext4, out: &mut Applied, staged: Staged) -> Result<()> {
    if !staged.smbpasswd.is_empty() || !staged.keys.is_empty() {
        out.ops
            .splice(0..0, root.missing_dirs(&["/var/lib/nasforge"])?);
    }
    if !staged.smbpasswd.is_empty() {
        out.ops.push(Op::root_file(
            SMBPASSWD,
            staged.smbpasswd.into_bytes(),
            0o600,
        ));
        out.changes.push(Change {
            file: format!("root:{SMBPASSWD}"),
            before_sha256: None,
            after_sha256: None,
            why: "Samba NT hashes of share users, imported and deleted by nasforge-setup".into(),
            details: vec![],
        });
    }
    if !staged.keys.is_empty() {
        out.ops.push(Op::Mkdir {
            path: STAGED_KEYS.into(),
            mode: 0o700,
            uid: 0,
            gid: 0,
        });
        for (name, keys) in staged.keys {
            out.ops.push(Op::root_file(
                format!("{STAGED_KEYS}/{name}"),
                keys.into_bytes(),
                0o600,
            ));
        }
    }
    Ok(())
}

/// Root's password locked unless the recipe gives one, and every password a
/// vendor is known to ship replaced by a lock, each said as a warning.
/// Returns what changed, for the manifest's record of /etc/shadow.
fn lock_passwords(
    acc: &mut Accounts,
    sys: &SystemSection,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>> {
    let mut said = Vec::new();
    for (user, _, why) in access::KNOWN_DEFAULTS {
        let Some(field) = access::shadow_field(&acc.shadow, user) else {
            continue;
        };
        if access::password_state(user, field) == access::Password::Set(Some(why)) {
            acc.shadow = access::set_shadow_field(&acc.shadow, user, "*")?;
            said.push(format!("{user}: {why} locked"));
            warnings.push(format!(
                "the base image ships {why}; the built image has `{user}`'s password locked{}",
                if *user == "root" {
                    " (give `[system] root_password_hash` to set one)"
                } else {
                    ""
                }
            ));
        }
    }
    if let Some(field) = access::shadow_field(&acc.shadow, "root") {
        let locked = access::password_state("root", field) == access::Password::Locked;
        match &sys.root_password_hash {
            Some(want) if field != want => {
                acc.shadow = access::set_shadow_field(&acc.shadow, "root", want)?;
                said.push("root: password from [system] root_password_hash".into());
            }
            None if !locked => {
                acc.shadow = access::set_shadow_field(&acc.shadow, "root", "*")?;
                said.push("root: password locked (no [system] root_password_hash)".into());
            }
            _ => {}
        }
    }
    Ok(said)
}
