//! `[system]`: hostname, timezone, users with hashed passwords and SSH keys,
//! the SSH server, and the Samba password material for share users. All of
//! it is written into the image at build time; the plaintext password
//! exists only in the recipe on the workstation.

pub mod accounts;
pub mod secrets;

use crate::image::ext4::{Ext4, Kind, Op};
use crate::io::hash::sha256_hex;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};
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
    /// Member of `sudo` (default true).
    #[serde(default = "yes")]
    pub sudo: bool,
    /// Further groups, when the image has them.
    #[serde(default)]
    pub groups: Vec<String>,
}

fn yes() -> bool {
    true
}

/// Checks that need no image: (dotted path, message) pairs.
pub fn validate(sys: &SystemSection, smb_users: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = &sys.hostname {
        let ok = !h.is_empty()
            && h.len() <= 63
            && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !h.starts_with('-')
            && !h.ends_with('-');
        if !ok {
            out.push(("system.hostname".into(), format!("`{h}` is not a valid host name: use letters, digits and `-`, up to 63 characters")));
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
            out.push((
                "system.timezone".into(),
                format!("`{tz}` is not a time zone name such as Europe/Berlin or UTC"),
            ));
        }
    }
    let mut seen = Vec::new();
    for (i, u) in sys.users.iter().enumerate() {
        let at = |f: &str| format!("system.users[{i}].{f}");
        let name_ok = !u.name.is_empty()
            && u.name.len() <= 32
            && u.name
                .starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && u.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !name_ok {
            out.push((at("name"), format!("`{}` is not a valid user name: lowercase letters, digits, `_` and `-`, starting with a letter", u.name)));
        }
        if u.name == "root" {
            out.push((
                at("name"),
                "root cannot be configured here; add your own user with `sudo = true`".into(),
            ));
        }
        if seen.contains(&u.name) {
            out.push((at("name"), format!("user `{}` is listed twice", u.name)));
        }
        seen.push(u.name.clone());
        match (&u.password, &u.password_hash) {
            (Some(_), Some(_)) => out.push((at("password"), "give `password` or `password_hash`, not both".into())),
            (None, Some(h)) if !secrets::is_crypt_hash(h) => {
                out.push((at("password_hash"), "not a crypt(3) hash; make one with `mkpasswd -m yescrypt`, or give `password` and let nasforge hash it".into()))
            }
            (Some(p), None) if p.is_empty() => out.push((at("password"), "an empty password; leave it out for key-only login".into())),
            (None, Some(_)) if smb_users.contains(&u.name) => out.push((
                at("password_hash"),
                format!("`{}` is a Samba share user, and Samba needs its own hash of the password: give `password` instead (nasforge stores only hashes)", u.name),
            )),
            (None, None) if u.ssh_authorized_keys.is_empty() => {
                out.push((at("name"), format!("`{}` has no password and no SSH key, so nobody could log in as it", u.name)))
            }
            _ => {}
        }
        for (k, key) in u.ssh_authorized_keys.iter().enumerate() {
            let kind = key.split_whitespace().next().unwrap_or("");
            if !(kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-"))
                || key.contains('\n')
            {
                out.push((
                    format!("system.users[{i}].ssh_authorized_keys[{k}]"),
                    "not an SSH public key line (`ssh-ed25519 AAAA... comment`)".into(),
                ));
            }
        }
    }
    for u in smb_users {
        if !sys.users.iter().any(|x| &x.name == u) {
            out.push((
                "shares".into(),
                format!(
                    "share user `{u}` is not in [[system.users]]; add it there with a `password`"
                ),
            ));
        }
    }
    out
}

/// What `apply` produced: changes to the root filesystem, files for the
/// boot partition, and the manifest's records.
#[derive(Debug, Default)]
pub struct Applied {
    pub ops: Vec<Op>,
    pub boot_files: Vec<(String, Vec<u8>)>,
    pub changes: Vec<Change>,
    pub warnings: Vec<String>,
    /// The image has no SSH server: it must be installed at first boot.
    pub needs_openssh: bool,
}

/// Staged for first boot: Samba's passwords (imported by nasforge-setup,
/// then deleted) and SSH keys of users Raspberry Pi OS creates itself.
pub use nasforge_setup::samba::STAGED_PASSWORDS as SMBPASSWD;
pub const STAGED_KEYS: &str = "/var/lib/nasforge/authorized_keys";

fn days_since_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86400)
        .unwrap_or(0)
}

fn record(file: &str, before: Option<&[u8]>, after: &[u8], why: &str) -> Change {
    Change {
        file: format!("root:{file}"),
        before_sha256: before.map(sha256_hex),
        after_sha256: Some(sha256_hex(after)),
        why: why.into(),
        details: vec![],
    }
}

/// Works out every change `[system]` asks for. `smb_users` are the users
/// named in shares (they get Samba password material).
pub fn apply(root: &Ext4, sys: &SystemSection, smb_users: &[String]) -> Result<Applied> {
    let mut out = Applied::default();
    let paths: Vec<String> = [
        "/etc/passwd",
        "/etc/shadow",
        "/etc/group",
        "/etc/gshadow",
        "/etc/hostname",
        "/etc/hosts",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut files = root.read_many(&paths)?.into_iter();
    let mut next = || files.next().flatten();
    let (passwd, shadow, group, gshadow, hostname, hosts) =
        (next(), next(), next(), next(), next(), next());

    if let Some(name) = &sys.hostname {
        let new = format!("{name}\n");
        replace(
            root,
            &mut out,
            "/etc/hostname",
            hostname.as_deref(),
            new.as_bytes(),
            0o644,
            "[system] hostname",
        )?;
        let old_hosts = String::from_utf8_lossy(hosts.as_deref().unwrap_or_default()).into_owned();
        let mut lines: Vec<String> = old_hosts.lines().map(String::from).collect();
        match lines
            .iter_mut()
            .find(|l| l.split_whitespace().next() == Some("127.0.1.1"))
        {
            Some(l) => *l = format!("127.0.1.1\t{name}"),
            None => lines.push(format!("127.0.1.1\t{name}")),
        }
        let new_hosts = lines.join("\n") + "\n";
        if new_hosts != old_hosts {
            replace(
                root,
                &mut out,
                "/etc/hosts",
                hosts.as_deref(),
                new_hosts.as_bytes(),
                0o644,
                "[system] hostname",
            )?;
        }
    }

    if let Some(tz) = &sys.timezone {
        let zone = format!("/usr/share/zoneinfo/{tz}");
        if root.owner(&zone)?.is_none() {
            bail!("time zone `{tz}` is not in the image ({zone} is missing; is tzdata installed?)");
        }
        let current = root.readlink("/etc/localtime")?;
        if current.as_deref() != Some(zone.as_str()) {
            if current.is_some() || root.owner("/etc/localtime")?.is_some() {
                out.ops.push(Op::Remove {
                    path: "/etc/localtime".into(),
                });
            }
            out.ops.push(Op::Symlink {
                path: "/etc/localtime".into(),
                target: zone.clone(),
            });
            out.changes.push(Change {
                file: "root:/etc/localtime".into(),
                before_sha256: None,
                after_sha256: None,
                why: "[system] timezone".into(),
                details: vec![format!("-> {zone}")],
            });
        }
        let old = root.read("/etc/timezone")?;
        replace(
            root,
            &mut out,
            "/etc/timezone",
            old.as_deref(),
            format!("{tz}\n").as_bytes(),
            0o644,
            "[system] timezone",
        )?;
    }

    let wants_ssh = sys
        .ssh
        .unwrap_or_else(|| sys.users.iter().any(|u| !u.ssh_authorized_keys.is_empty()));
    if wants_ssh {
        enable_ssh(root, &mut out)?;
    }

    if sys.users.is_empty() {
        return Ok(out);
    }
    let (Some(passwd), Some(shadow), Some(group)) = (passwd, shadow, group) else {
        bail!("the image lacks /etc/passwd, /etc/shadow or /etc/group, so users cannot be added");
    };
    let mut acc = accounts::Accounts {
        passwd: String::from_utf8_lossy(&passwd).into_owned(),
        shadow: String::from_utf8_lossy(&shadow).into_owned(),
        group: String::from_utf8_lossy(&group).into_owned(),
        gshadow: gshadow
            .as_ref()
            .map(|g| String::from_utf8_lossy(g).into_owned()),
    };
    // Raspberry Pi OS renames its uid-1000 user from userconf.txt on first
    // boot; using that for the first user keeps its own wizard quiet.
    let pios_first_user = root.owner("/usr/lib/userconf-pi/userconf")?.is_some()
        && acc
            .passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some("1000"));
    let skel = root.list("/etc/skel")?.unwrap_or_default();
    let skel_files: Vec<String> = skel
        .iter()
        .filter(|e| e.kind == Kind::File)
        .map(|e| format!("/etc/skel/{}", e.name))
        .collect();
    let skel_data = root.read_many(&skel_files)?;
    out.ops.extend(root.missing_dirs(&["/home"])?);
    let mut smbpasswd = String::new();
    let mut staged_keys = Vec::new();
    let days = days_since_epoch();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (i, u) in sys.users.iter().enumerate() {
        let hash = match (&u.password, &u.password_hash) {
            (Some(p), _) => Some(secrets::crypt_password(p)?),
            (None, Some(h)) => Some(h.clone()),
            (None, None) => None,
        };
        let mut groups: Vec<String> = u.groups.clone();
        if u.sudo {
            groups.push("sudo".into());
        }
        for g in &groups {
            if !acc.has_group(g) {
                out.warnings.push(format!(
                    "user {}: the image has no group `{g}`; skipped",
                    u.name
                ));
            }
        }
        let uid = if i == 0 && pios_first_user {
            let line = format!("{}:{}\n", u.name, hash.as_deref().unwrap_or("!"));
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
                staged_keys.push((u.name.clone(), u.ssh_authorized_keys.join("\n") + "\n"));
            }
            1000
        } else {
            let added = acc.add_user(&u.name, hash.as_deref(), &groups, days)?;
            if root.list(&added.home)?.is_none() {
                out.ops.push(Op::Mkdir {
                    path: added.home.clone(),
                    mode: 0o700,
                    uid: added.uid,
                    gid: added.gid,
                });
                for (path, data) in skel_files.iter().zip(&skel_data) {
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
                let ssh = format!("{}/.ssh", added.home);
                if root.list(&ssh)?.is_none() {
                    out.ops.push(Op::Mkdir {
                        path: ssh.clone(),
                        mode: 0o700,
                        uid: added.uid,
                        gid: added.gid,
                    });
                }
                let keys = format!("{ssh}/authorized_keys");
                if root.owner(&keys)?.is_some() {
                    out.ops.push(Op::Remove { path: keys.clone() });
                }
                let data = u.ssh_authorized_keys.join("\n") + "\n";
                out.ops.push(Op::Write {
                    path: keys.clone(),
                    data: data.clone().into_bytes(),
                    mode: 0o600,
                    uid: added.uid,
                    gid: added.gid,
                });
                out.changes.push(record(
                    &keys,
                    None,
                    data.as_bytes(),
                    "[[system.users]] ssh_authorized_keys",
                ));
            }
            added.uid
        };
        if smb_users.contains(&u.name) {
            let password = u
                .password
                .as_deref()
                .context("validated: share users have a password")?;
            smbpasswd.push_str(&nasforge_setup::smbpasswd::line(
                &u.name,
                uid,
                &nasforge_setup::smbpasswd::nt_hash(password),
                now,
            ));
            smbpasswd.push('\n');
        }
    }
    let why = "[[system.users]]";
    replace(
        root,
        &mut out,
        "/etc/passwd",
        Some(&passwd),
        acc.passwd.as_bytes(),
        0o644,
        why,
    )?;
    replace(
        root,
        &mut out,
        "/etc/shadow",
        Some(&shadow),
        acc.shadow.as_bytes(),
        0o640,
        why,
    )?;
    replace(
        root,
        &mut out,
        "/etc/group",
        Some(&group),
        acc.group.as_bytes(),
        0o644,
        why,
    )?;
    if let (Some(before), Some(after)) = (&gshadow, &acc.gshadow) {
        replace(
            root,
            &mut out,
            "/etc/gshadow",
            Some(before),
            after.as_bytes(),
            0o640,
            why,
        )?;
    }
    if !smbpasswd.is_empty() || !staged_keys.is_empty() {
        out.ops
            .splice(0..0, root.missing_dirs(&["/var/lib/nasforge"])?);
    }
    if !smbpasswd.is_empty() {
        out.ops
            .push(Op::root_file(SMBPASSWD, smbpasswd.into_bytes(), 0o600));
        out.changes.push(Change {
            file: format!("root:{SMBPASSWD}"),
            before_sha256: None,
            after_sha256: None,
            why: "Samba NT hashes of share users, imported and deleted by nasforge-setup".into(),
            details: vec![],
        });
    }
    if !staged_keys.is_empty() {
        out.ops.push(Op::Mkdir {
            path: STAGED_KEYS.into(),
            mode: 0o700,
            uid: 0,
            gid: 0,
        });
        for (name, keys) in staged_keys {
            out.ops.push(Op::root_file(
                format!("{STAGED_KEYS}/{name}"),
                keys.into_bytes(),
                0o600,
            ));
        }
    }
    Ok(out)
}

/// Replaces a file, keeping its owner and mode where it exists (shadow is
/// root:shadow 0640 on Debian); `mode` is for a new file.
fn replace(
    root: &Ext4,
    out: &mut Applied,
    path: &str,
    before: Option<&[u8]>,
    after: &[u8],
    mode: u32,
    why: &str,
) -> Result<()> {
    if before == Some(after) {
        return Ok(());
    }
    let (mode, uid, gid) = match before {
        Some(_) => {
            out.ops.push(Op::Remove { path: path.into() });
            root.owner(path)?.unwrap_or((mode, 0, 0))
        }
        None => (mode, 0, 0),
    };
    out.ops.push(Op::Write {
        path: path.into(),
        data: after.to_vec(),
        mode,
        uid,
        gid,
    });
    out.changes.push(record(path, before, after, why));
    Ok(())
}

fn enable_ssh(root: &Ext4, out: &mut Applied) -> Result<()> {
    let unit = [
        "/lib/systemd/system/ssh.service",
        "/usr/lib/systemd/system/ssh.service",
    ];
    let mut found = None;
    for u in unit {
        if root.owner(u)?.is_some() {
            found = Some(u);
            break;
        }
    }
    let Some(unit) = found else {
        out.needs_openssh = true;
        return Ok(());
    };
    let wants = "/etc/systemd/system/multi-user.target.wants";
    out.ops.extend(root.missing_dirs(&[wants])?);
    let link = format!("{wants}/ssh.service");
    if root.readlink(&link)?.is_none() {
        out.ops.push(Op::Symlink {
            path: link.clone(),
            target: unit.into(),
        });
        out.changes.push(Change {
            file: format!("root:{link}"),
            before_sha256: None,
            after_sha256: None,
            why: "SSH server enabled".into(),
            details: vec![],
        });
    }
    Ok(())
}
