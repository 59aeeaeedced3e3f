//! `[system]`: hostname, timezone, users with hashed passwords and SSH keys,
//! the SSH server, and the Samba password material for share users. All of
//! it is written into the image at build time; the plaintext password
//! exists only in the recipe on the workstation.

pub mod access;
pub mod accounts;
pub mod cloud_init;
pub mod secrets;
pub mod section;
pub mod updates;
mod users;

pub use section::{SystemSection, UserSpec};

use crate::image::ext4::{Ext4, Op};
use crate::io::hash::sha256_hex;
use crate::manifest::Change;
use anyhow::{Context, Result, bail};

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

impl Vendor {
    pub fn detect(root: &Ext4) -> Result<Vendor> {
        Ok(Vendor {
            userconf: root.owner(USERCONF)?.is_some(),
            cloud_init: root.owner(cloud_init::CLOUD_CFG)?.is_some(),
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
    /// `[system] updates` is on: unattended-upgrades is installed at first
    /// boot.
    pub needs_unattended_upgrades: bool,
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

/// The manifest's record of a file the build adds.
pub fn record_new(file: &str, after: &[u8], why: &str) -> Change {
    record(file, None, after, why)
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
        set_hostname(root, &mut out, name, hostname.as_deref(), hosts.as_deref())?;
    }
    if let Some(tz) = &sys.timezone {
        set_timezone(root, &mut out, tz)?;
    }
    if sys.wants_ssh() {
        enable_ssh(root, &mut out)?;
    }
    if sys.updates == updates::Updates::Security {
        updates::apply(
            root,
            sys.updates_reboot(),
            sys.updates_mirror.as_deref(),
            &mut out,
        )?;
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
    let before = users::Before {
        passwd,
        shadow,
        group,
        gshadow,
    };
    users::apply(root, sys, smb_users, vendor, before, &mut out)?;
    Ok(out)
}

/// /etc/hostname, and the 127.0.1.1 line of /etc/hosts that names it.
fn set_hostname(
    root: &Ext4,
    out: &mut Applied,
    name: &str,
    hostname: Option<&[u8]>,
    hosts: Option<&[u8]>,
) -> Result<()> {
    let new = format!("{name}\n");
    let why = "[system] hostname";
    replace(
        root,
        out,
        "/etc/hostname",
        hostname,
        new.as_bytes(),
        0o644,
        why,
    )?;
    let old_hosts = String::from_utf8_lossy(hosts.unwrap_or_default()).into_owned();
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
            out,
            "/etc/hosts",
            hosts,
            new_hosts.as_bytes(),
            0o644,
            why,
        )?;
    }
    Ok(())
}

/// /etc/localtime pointing at the zone, which the image must have, and
/// /etc/timezone naming it.
fn set_timezone(root: &Ext4, out: &mut Applied, tz: &str) -> Result<()> {
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
        out,
        "/etc/timezone",
        old.as_deref(),
        format!("{tz}\n").as_bytes(),
        0o644,
        "[system] timezone",
    )
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

/// sshd refuses root's password, users with `sudo` and only a key can use
/// it, and cloud-init leaves the recipe's settings alone.
fn login_rules(
    root: &Ext4,
    sys: &SystemSection,
    vendor: Vendor,
    has_sshd: bool,
    out: &mut Applied,
) -> Result<()> {
    if has_sshd {
        sshd_rule(root, out)?;
    }
    let key_only: Vec<&str> = sys
        .users
        .iter()
        .filter(|u| u.sudo && u.password.is_none() && u.password_hash.is_none())
        .map(|u| u.name.as_str())
        .collect();
    if let Some(text) = access::sudoers(&key_only) {
        sudo_rule(root, out, &key_only, &text)?;
    }
    // Imager's user-data would set its own hostname and users: cloud-init
    // runs it without the modules that change what the recipe set.
    if vendor.cloud_init && (sys.hostname.is_some() || !sys.users.is_empty()) {
        let cloud_cfg = root.read(cloud_init::CLOUD_CFG)?.unwrap_or_default();
        let (text, warnings) =
            cloud_init::drop_in(&String::from_utf8_lossy(&cloud_cfg), sys.timezone.is_some());
        out.warnings.extend(warnings);
        out.ops
            .extend(root.missing_dirs(&["/etc/cloud/cloud.cfg.d"])?);
        let before = root.read(cloud_init::DROP_IN)?;
        replace(
            root,
            out,
            cloud_init::DROP_IN,
            before.as_deref(),
            text.as_bytes(),
            0o644,
            "cloud-init leaves the recipe's hostname and users alone (Raspberry Pi Imager's user-data)",
        )?;
    }
    Ok(())
}

/// Root logs in with a key or not at all: in a drop-in, or at the top of
/// an sshd_config that reads none.
fn sshd_rule(root: &Ext4, out: &mut Applied) -> Result<()> {
    match root.read("/etc/ssh/sshd_config")? {
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
            )
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
            )
        }
    }
}

/// sudo without a password for `key_only` users, who have none to type.
fn sudo_rule(root: &Ext4, out: &mut Applied, key_only: &[&str], text: &str) -> Result<()> {
    if root.list("/etc/sudoers.d")?.is_none() {
        out.warnings.push(format!(
            "the image has no /etc/sudoers.d (is sudo installed?): {} cannot use sudo",
            key_only.join(", ")
        ));
        return Ok(());
    }
    let before = root.read(access::SUDOERS_DROP_IN)?;
    replace(
        root,
        out,
        access::SUDOERS_DROP_IN,
        before.as_deref(),
        text.as_bytes(),
        0o440,
        "users with `sudo = true` and only an SSH key: sudo without a password",
    )
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
