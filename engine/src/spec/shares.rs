//! The recipe's `[[shares]]` sections: a directory on an array and who
//! reaches it over SMB or NFS, with the checks serde cannot express.

use super::paths::{check_absolute_dir, is_under};
use super::{Mode, SpecProblem, Storage, problem};
use crate::size::Size;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Share {
    /// The Samba share name.
    pub name: String,
    /// A directory on one of the arrays; created when missing.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smb: Option<Smb>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<Nfs>,
    /// ZFS only: the most the share's dataset may hold (`zfs set quota`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Size>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Smb {
    /// Unix users (created by the image builder) allowed on the share; the
    /// first one owns the directory. Empty only on a guest share.
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub timemachine: bool,
    /// Time Machine's limit for each user's backups (all of that user's
    /// Macs); without it, half the array shared among the users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timemachine_max_size: Option<Size>,
    #[serde(default)]
    pub readonly: bool,
    /// Anyone on the network may read without a password; only the users
    /// (if any) may write.
    #[serde(default)]
    pub guest: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Nfs {
    pub clients: Clients,
    #[serde(default)]
    pub readonly: bool,
}

/// NFS clients as exports(5) names them: "192.168.1.0/24", "host.lan", or
/// several, as a list or separated by spaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Clients(pub Vec<String>);

impl<'de> Deserialize<'de> for Clients {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Clients;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a client such as \"192.168.1.0/24\" or a list of them")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Clients, E> {
                Ok(Clients(v.split_whitespace().map(str::to_string).collect()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Clients, A::Error> {
                let mut all = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    all.push(item);
                }
                Ok(Clients(all))
            }
        }
        d.deserialize_any(Visitor)
    }
}

const RESERVED_SHARES: &[&str] = &["global", "homes", "printers", "print$", "ipc$"];

/// Every share's own problems, and how the shares sit on the arrays and
/// among each other.
pub(super) fn check_shares(storage: &Storage, shares: &[Share], out: &mut Vec<SpecProblem>) {
    let arrays_known = storage.mode == Mode::Unattended || !storage.arrays.is_empty();
    // A kept disk's mount holds shares as an array's does.
    let mounts: Vec<&str> = storage
        .arrays
        .iter()
        .map(|a| a.mount.as_str())
        .chain(storage.disks.iter().map(|k| k.mount.as_str()))
        .collect();
    for (i, share) in shares.iter().enumerate() {
        check_share(&format!("shares[{i}]"), share, out);
        if arrays_known
            && share.path.starts_with('/')
            && !mounts
                .iter()
                .any(|m| is_under(&share.path, m) || share.path == *m)
        {
            out.push(problem(
                format!("shares[{i}].path"),
                format!(
                    "{} is not on any array or kept disk, so it would fill the boot disk; put it under one's mount ({})",
                    share.path,
                    if mounts.is_empty() { "none defined".to_string() } else { mounts.join(", ") }
                ),
            ));
        }
        if share.quota.is_some()
            && !storage
                .arrays
                .iter()
                .filter(|a| a.is_zfs())
                .any(|a| is_under(&share.path, &a.mount) || share.path == a.mount)
        {
            out.push(problem(
                format!("shares[{i}].quota"),
                format!("a quota is a ZFS dataset's; {} is not on a ZFS pool (filesystem = \"zfs\"): remove quota, or put the share on a pool", share.path),
            ));
        }
        check_against_earlier(i, share, &shares[..i], out);
    }
}

/// The name and NFS export of `shares[i]` against the shares before it.
fn check_against_earlier(i: usize, share: &Share, earlier: &[Share], out: &mut Vec<SpecProblem>) {
    if let Some(first) = earlier
        .iter()
        .position(|s| s.name.eq_ignore_ascii_case(&share.name))
    {
        out.push(problem(
            format!("shares[{i}].name"),
            format!("the share name `{}` is already used by shares[{first}] (Samba ignores case); rename one", share.name),
        ));
    }
    if share.nfs.is_some()
        && let Some(first) = earlier
            .iter()
            .position(|s| s.nfs.is_some() && s.path == share.path)
    {
        out.push(problem(
            format!("shares[{i}].path"),
            format!(
                "{} is already exported over NFS by shares[{first}]; merge the two shares' clients",
                share.path
            ),
        ));
    }
}

fn check_share(at: &str, share: &Share, out: &mut Vec<SpecProblem>) {
    let name = &share.name;
    let bad = |c: char| c.is_control() || "[]\\/:;|=,+*?<>\"%".contains(c);
    if name.is_empty() || name.chars().count() > 80 || name.chars().any(bad) || name.trim() != name
    {
        out.push(problem(
            format!("{at}.name"),
            format!("`{}` cannot be a Samba share name; use up to 80 characters without control characters, leading or trailing spaces or []\\/:;|=,+*?<>\"%, e.g. \"data\"", name.escape_debug()),
        ));
    } else if RESERVED_SHARES.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        out.push(problem(
            format!("{at}.name"),
            format!("`{name}` is reserved by Samba; pick another name"),
        ));
    }
    check_absolute_dir(&format!("{at}.path"), &share.path, out);
    if share.smb.is_none() && share.nfs.is_none() {
        out.push(problem(
            at.to_string(),
            "the share has neither smb nor nfs, so nobody can reach it; add smb = { users = [...] } or nfs = { clients = \"...\" }",
        ));
    }
    if let Some(smb) = &share.smb {
        if smb.users.is_empty() && !smb.guest {
            out.push(problem(
                format!("{at}.smb.users"),
                "no user may open this share; list at least one user, e.g. users = [\"admin\"], or make it a read-only share for everyone with guest = true",
            ));
        }
        for (j, user) in smb.users.iter().enumerate() {
            if !is_unix_user_name(user) {
                out.push(problem(
                    format!("{at}.smb.users[{j}]"),
                    format!("`{}` is not a valid user name; use lowercase letters, digits, '-' and '_', starting with a letter or '_', at most 32 characters", user.escape_debug()),
                ));
            }
        }
        if smb.timemachine && smb.readonly {
            out.push(problem(format!("{at}.smb.timemachine"), "a Time Machine share must be writable; remove readonly = true or timemachine = true"));
        }
        if smb.timemachine && smb.guest {
            out.push(problem(format!("{at}.smb.guest"), "a Time Machine share keeps each user's backups apart, so it cannot be open to guests; remove guest = true or timemachine = true"));
        }
        if smb.timemachine_max_size.is_some() && !smb.timemachine {
            out.push(problem(format!("{at}.smb.timemachine_max_size"), "only a Time Machine share has a size limit; add timemachine = true or remove timemachine_max_size"));
        }
        if smb
            .timemachine_max_size
            .is_some_and(|s| s.bytes() < 1 << 30)
        {
            out.push(problem(format!("{at}.smb.timemachine_max_size"), "Time Machine needs room for at least one full backup; give 1GiB or more, e.g. timemachine_max_size = \"500GiB\""));
        }
        // Bonjour carries the share's name in a TXT string of at most 255
        // bytes (`dk0=adVN=NAME,adVF=0x82`).
        if smb.timemachine && name.len() > 200 {
            out.push(problem(
                format!("{at}.name"),
                "a Time Machine share's name must fit Bonjour's record: at most 200 bytes",
            ));
        }
    }
    if let Some(nfs) = &share.nfs {
        if nfs.clients.0.is_empty() {
            out.push(problem(
                format!("{at}.nfs.clients"),
                "no NFS client is allowed; name one, e.g. clients = \"192.168.1.0/24\"",
            ));
        }
        for (j, client) in nfs.clients.0.iter().enumerate() {
            if !is_nfs_client(client) {
                out.push(problem(
                    format!("{at}.nfs.clients[{j}]"),
                    format!("`{}` is not an NFS client; write a host name (letters, digits and '-', wildcards * and ? allowed, e.g. *.lan), an address or network such as 192.168.1.0/24 or fd00::/64, or * for everyone; export options are set by nasforge", client.escape_debug()),
                ));
            }
        }
    }
}

/// One entry of an exports(5) client list, strictly: `*`, an IPv4 or IPv6
/// address with an optional prefix length, or a host name whose labels may
/// hold the wildcards `*` and `?`. Anything else (a `-`, a space, a comma,
/// a parenthesis) could add options or clients to the export line.
pub(super) fn is_nfs_client(client: &str) -> bool {
    if client == "*" {
        return true;
    }
    let (address, prefix) = match client.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (client, None),
    };
    if let Ok(ip) = address.parse::<std::net::IpAddr>() {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        return prefix.is_none_or(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u8>().is_ok_and(|n| n <= max)
        });
    }
    let labels: Vec<&str> = client.split('.').collect();
    prefix.is_none()
        && client.len() <= 253
        && labels.iter().all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-*?".contains(c))
        })
        // A name of numbers only is a mistyped address (10.0.0.256), not a host.
        && !labels
            .last()
            .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
}

fn is_unix_user_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && name.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}
