//! `[system]`: hostname, timezone, users with hashed passwords and SSH keys,
//! the SSH server, and the Samba password material for share users. All of
//! it is written into the image at build time; the plaintext password
//! exists only in the recipe on the workstation.

pub mod access;
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
    /// A crypt(3) hash for root; without one root's password is locked.
    pub root_password_hash: Option<String>,
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
    if let Some(h) = &sys.root_password_hash {
        if let Some(why) = secrets::crypt_hash_problem(h) {
            out.push((
                "system.root_password_hash".into(),
                format!("not a crypt(3) hash: {why}; make one with `mkpasswd -m yescrypt`"),
            ));
        } else if access::password_state("root", h) != access::Password::Set(None) {
            out.push((
                "system.root_password_hash".into(),
                "this is the hash of a password everyone knows; choose another".into(),
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
            out.push((at("name"), format!("`{}` is not a valid user name: lowercase letters, digits, `_` and `-`, starting with a letter, at most 32 characters", u.name)));
        }
        if u.name == "root" {
            out.push((
                at("name"),
                "root is not listed here: give root's password as `[system] root_password_hash` (root is locked without one), and add your own user with `sudo = true`".into(),
            ));
        }
        if seen.contains(&u.name) {
            out.push((at("name"), format!("user `{}` is listed twice", u.name)));
        }
        seen.push(u.name.clone());
        match (&u.password, &u.password_hash) {
            (Some(_), Some(_)) => out.push((
                at("password"),
                "give `password` or `password_hash`, not both".into(),
            )),
            (None, Some(h)) => {
                if let Some(why) = secrets::crypt_hash_problem(h) {
                    out.push((at("password_hash"), format!("not a crypt(3) hash: {why}; make one with `mkpasswd -m yescrypt`, or give `password` and let nasforge hash it")))
                } else if smb_users.contains(&u.name) {
                    out.push((
                        at("password_hash"),
                        format!("`{}` is a Samba share user, and Samba needs its own hash of the password: give `password` instead (nasforge stores only hashes)", u.name),
                    ))
                }
            }
            (Some(p), None) if p.is_empty() => out.push((
                at("password"),
                "an empty password; leave it out for key-only login".into(),
            )),
            (None, None) if u.ssh_authorized_keys.is_empty() => out.push((
                at("name"),
                format!(
                    "`{}` has no password and no SSH key, so nobody could log in as it",
                    u.name
                ),
            )),
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

/// What the base image's own first boot does with accounts, read from its
/// root filesystem (or, for `nasforge check`, guessed from its name).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vendor {
    /// Raspberry Pi OS's userconf-pi renames the uid-1000 user from
    /// userconf.txt, and waits for a person on tty8 without one.
    pub userconf: bool,
    /// cloud-init applies user-data from the boot partition on every boot.
    pub cloud_init: bool,
}

const USERCONF: &str = "/usr/lib/userconf-pi/userconf";
const CLOUD_CFG: &str = "/etc/cloud/cloud.cfg";
/// Read by cloud-init after cloud.cfg; user-data given on the boot
/// partition is merged over it but does not set these keys.
pub const CLOUD_DROP_IN: &str = "/etc/cloud/cloud.cfg.d/99-nasforge.cfg";
const CLOUD_SETTINGS: &str = "# Written by nasforge: the recipe set the hostname; a `hostname:` in\n# user-data on the boot partition does not change it on a later boot.\npreserve_hostname: true\nmanage_etc_hosts: false\n";

impl Vendor {
    pub fn detect(root: &Ext4) -> Result<Vendor> {
        Ok(Vendor {
            userconf: root.owner(USERCONF)?.is_some(),
            cloud_init: root.owner(CLOUD_CFG)?.is_some(),
        })
    }

    /// For `nasforge check`: an uncompressed image is read; a compressed
    /// one is judged at build time, where it is unpacked anyway.
    pub fn of_image(path: &std::path::Path) -> Result<Vendor> {
        let mut f =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        if crate::io::decompress::Format::sniff(&mut f)? != crate::io::decompress::Format::Raw {
            return Ok(Vendor::default());
        }
        let image = crate::image::Image::open(path)
            .with_context(|| format!("reading {}", path.display()))?;
        match image.ext4() {
            Some(root) => Vendor::detect(&root),
            None => Ok(Vendor::default()),
        }
    }

    /// From a download's name: Raspberry Pi's images are called
    /// `…-raspios-<suite>-<arch>[-lite].img.xz`.
    pub fn from_url(url: &str) -> Vendor {
        let name = url.rsplit('/').next().unwrap_or(url);
        Vendor {
            userconf: name.contains("raspios"),
            cloud_init: false,
        }
    }
}

/// Recipe problems that only exist on a base of this kind: (dotted path,
/// message), like `validate`.
pub fn problems_for(vendor: Vendor, sys: &SystemSection) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !vendor.userconf {
        return out;
    }
    let Some(first) = sys.users.first() else {
        out.push((
            "system".into(),
            "Raspberry Pi OS creates its first user from userconf.txt, and without one it waits at first boot for a person at the console (tty8): add a [[system.users]] entry".into(),
        ));
        return out;
    };
    let n = &first.name;
    let ok = (1..=32).contains(&n.len())
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && n != "root";
    if !ok {
        out.push((
            "system.users[0].name".into(),
            format!("Raspberry Pi OS's userconf refuses `{n}` for the first user and would wait at first boot for a person at the console: its rule is lowercase letters, digits and `-`, starting with a letter, 1 to 32 characters, not root"),
        ));
    }
    out
}

/// Wizard mode's storage is set up by someone who logs in and runs `sudo
/// nasforge-setup`: without a user who may use sudo, nobody could.
pub fn wizard_problems(
    storage: Option<&nasforge_engine::spec::Storage>,
    sys: &SystemSection,
) -> Vec<(String, String)> {
    let wizard = storage.is_some_and(|s| s.mode == nasforge_engine::spec::Mode::Wizard);
    if !wizard || sys.users.iter().any(|u| u.sudo) {
        return Vec::new();
    }
    vec![(
        "storage.mode".into(),
        "the wizard runs only after a login, as `sudo nasforge-setup`, and no [[system.users]] entry may use sudo: add your user with `sudo = true` (the default) and a `password` (console and SSH) or `ssh_authorized_keys` (SSH)".into(),
    )]
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
pub use nasforge_engine::shares::samba::STAGED_PASSWORDS as SMBPASSWD;
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

    let vendor = Vendor::detect(root)?;
    let has_sshd = out.needs_openssh || root.list("/etc/ssh")?.is_some();
    login_rules(root, sys, vendor, has_sshd, &mut out)?;

    let (Some(passwd), Some(shadow), Some(group)) = (passwd, shadow, group) else {
        if sys.users.is_empty() {
            return Ok(out);
        }
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
    let locked = lock_passwords(&mut acc, sys, &mut out.warnings)?;
    // Raspberry Pi OS renames its uid-1000 user from userconf.txt on first
    // boot; using that for the first user keeps its own wizard quiet.
    let pios_first_user = if vendor.userconf {
        acc.name_of_uid(1000)
    } else {
        None
    };
    let skel = root.list("/etc/skel")?.unwrap_or_default();
    let skel_files: Vec<String> = skel
        .iter()
        .filter(|e| e.kind == Kind::File)
        .map(|e| format!("/etc/skel/{}", e.name))
        .collect();
    let skel_data = root.read_many(&skel_files)?;
    out.ops.extend(root.missing_dirs(&["/home"])?);
    let status = root.read("/var/lib/dpkg/status")?.unwrap_or_default();
    let scheme = secrets::Scheme::for_dpkg_status(&String::from_utf8_lossy(&status));
    let mut smbpasswd = String::new();
    let mut staged_keys = Vec::new();
    let days = days_since_epoch();
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
        let uid = if let (0, Some(first)) = (i, &pios_first_user) {
            // The rename keeps the account's groups (pi-gen's, sudo among
            // them), so the recipe's are set on it now.
            acc.join_groups(first, &groups);
            if !u.sudo {
                acc.leave_group(first, "sudo");
            }
            let line = accounts::record(&[&u.name, hash.as_deref().unwrap_or("!")])?;
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
            smbpasswd.push_str(&nasforge_engine::shares::smbpasswd::line(
                &u.name,
                uid,
                &nasforge_engine::shares::smbpasswd::nt_hash(password),
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
        if locked.is_empty() {
            why
        } else {
            "no account anyone can guess; [[system.users]]"
        },
    )?;
    if let Some(c) = out
        .changes
        .iter_mut()
        .find(|c| c.file == "root:/etc/shadow")
    {
        c.details.extend(locked);
    }
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

/// Root's password locked unless the recipe gives one, and every password a
/// vendor is known to ship replaced by a lock, each said as a warning.
/// Returns what changed, for the manifest's record of /etc/shadow.
fn lock_passwords(
    acc: &mut accounts::Accounts,
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

/// sshd refuses root's password, users with `sudo` and only a key can use
/// it, and cloud-init leaves the recipe's settings alone.
fn login_rules(
    root: &Ext4,
    sys: &SystemSection,
    vendor: Vendor,
    has_sshd: bool,
    out: &mut Applied,
) -> Result<()> {
    let main = root.read("/etc/ssh/sshd_config")?;
    match main {
        _ if !has_sshd => {}
        Some(text) if !access::includes_drop_ins(&String::from_utf8_lossy(&text)) => {
            let after = format!(
                "{}\n{}",
                access::SSHD_SETTINGS,
                String::from_utf8_lossy(&text)
            );
            replace(
                root,
                out,
                "/etc/ssh/sshd_config",
                Some(&text),
                after.as_bytes(),
                0o644,
                "root logs in with a key or not at all (this sshd_config reads no drop-ins first)",
            )?;
        }
        _ => {
            out.ops
                .extend(root.missing_dirs(&["/etc/ssh/sshd_config.d"])?);
            let before = root.read(access::SSHD_DROP_IN)?;
            replace(
                root,
                out,
                access::SSHD_DROP_IN,
                before.as_deref(),
                access::SSHD_SETTINGS.as_bytes(),
                0o644,
                "root logs in with a key or not at all",
            )?;
        }
    }

    let key_only: Vec<&str> = sys
        .users
        .iter()
        .filter(|u| u.sudo && u.password.is_none() && u.password_hash.is_none())
        .map(|u| u.name.as_str())
        .collect();
    if let Some(text) = access::sudoers(&key_only) {
        if root.list("/etc/sudoers.d")?.is_none() {
            out.warnings.push(format!(
                "the image has no /etc/sudoers.d (is sudo installed?): {} cannot use sudo",
                key_only.join(", ")
            ));
        } else {
            let before = root.read(access::SUDOERS_DROP_IN)?;
            replace(
                root,
                out,
                access::SUDOERS_DROP_IN,
                before.as_deref(),
                text.as_bytes(),
                0o440,
                "users with `sudo = true` and only an SSH key: sudo without a password",
            )?;
        }
    }

    // cloud-init sets the hostname from user-data on every boot; the rest of
    // what the recipe set (users, keys, sshd's rule for root in a drop-in
    // read before cloud-init's own) it does not undo.
    if vendor.cloud_init && sys.hostname.is_some() {
        out.ops
            .extend(root.missing_dirs(&["/etc/cloud/cloud.cfg.d"])?);
        let before = root.read(CLOUD_DROP_IN)?;
        replace(
            root,
            out,
            CLOUD_DROP_IN,
            before.as_deref(),
            CLOUD_SETTINGS.as_bytes(),
            0o644,
            "cloud-init keeps the recipe's hostname",
        )?;
    }
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
