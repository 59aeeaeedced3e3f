//! The recipe's `[storage]` and `[[shares]]` sections: what the user asked for.
//!
//! These types are shared with the host builder, which parses the whole recipe
//! on the workstation so that a bad storage section fails there, with the file,
//! line and column, long before a board boots. Field names are snake_case as in
//! the recipe; enums are lowercase words; unknown keys are errors.

pub use crate::machine::hardware::Transport;
use crate::size::Size;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// `unattended` builds everything at first boot from this recipe; `wizard`
    /// waits for someone to log in and run it (`sudo nasforge-setup`).
    pub mode: Mode,
    #[serde(default)]
    pub arrays: Vec<Array>,
    /// Where mdadm's monitor mails array failures (`MAILADDR`); `root` when
    /// neither this nor `alert_program` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mailaddr: Option<String>,
    /// A program mdadm's monitor runs on array events (`PROGRAM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_program: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Unattended,
    Wizard,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Array {
    /// The md name: the array appears as `/dev/md/<name>`.
    pub name: String,
    pub level: Level,
    pub disks: DiskMatch,
    pub filesystem: Filesystem,
    pub mount: String,
    /// Allow erasing member disks that hold a partition table, a filesystem
    /// or a RAID/ZFS label. Mounted, in-use and boot disks are never erased.
    #[serde(default)]
    pub wipe: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Raid0,
    Raid1,
    Raid5,
    Raid6,
    Raid10,
    /// One disk with a filesystem on it; no md layer.
    Single,
}

impl Level {
    /// The fewest members mdadm accepts (raid10 with the default near-2
    /// layout works on two disks).
    pub fn min_disks(self) -> usize {
        match self {
            Level::Single => 1,
            Level::Raid0 | Level::Raid1 | Level::Raid10 => 2,
            Level::Raid5 => 3,
            Level::Raid6 => 4,
        }
    }

    pub fn max_disks(self) -> Option<usize> {
        (self == Level::Single).then_some(1)
    }

    /// The value for `mdadm --level`; None for `single`.
    pub fn mdadm(self) -> Option<&'static str> {
        match self {
            Level::Raid0 => Some("0"),
            Level::Raid1 => Some("1"),
            Level::Raid5 => Some("5"),
            Level::Raid6 => Some("6"),
            Level::Raid10 => Some("10"),
            Level::Single => None,
        }
    }

    /// Levels that stripe data in chunks: they get `--chunk` and the
    /// filesystem gets stride/stripe-width.
    pub fn is_striped(self) -> bool {
        matches!(
            self,
            Level::Raid0 | Level::Raid5 | Level::Raid6 | Level::Raid10
        )
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
            Level::Raid10 => "raid10",
            Level::Single => "single",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    Ext4,
    Xfs,
    Btrfs,
}

impl fmt::Display for Filesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Filesystem::Ext4 => "ext4",
            Filesystem::Xfs => "xfs",
            Filesystem::Btrfs => "btrfs",
        })
    }
}

/// Which disks an array takes, in the style of curtin/subiquity match rules:
/// every rule that is set must hold. `model`, `serial`, `wwn` and
/// `controller` are shell-style globs (`*`, `?`, `[...]`, `{a,b}`), compared
/// without regard to case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    /// The SATA controller's name ("JMicron JMB585") or PCI id ("197b:0585").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// How many disks to take: a number, or "all" (the default) for every
    /// matching disk.
    #[serde(default)]
    pub count: Count,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Count {
    #[default]
    All,
    Exactly(usize),
}

impl Serialize for Count {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Count::All => s.serialize_str("all"),
            Count::Exactly(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of disks or \"all\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Count, E> {
                match v {
                    "all" => Ok(Count::All),
                    _ => Err(E::custom(format!(
                        "invalid count `{v}`: write a number of disks (count = 3) or \"all\""
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Count, E> {
                usize::try_from(v)
                    .map(Count::Exactly)
                    .map_err(|_| E::custom("count cannot be negative"))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Count, E> {
                Ok(Count::Exactly(v as usize))
            }
        }
        d.deserialize_any(Visitor)
    }
}

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

/// The part of the recipe the board reads. Top-level sections owned by the
/// builder (`base`, `board`, `boot`, `system`, ...) are ignored here; inside
/// `storage` and `shares` every key must be known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct DeviceRecipe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<Share>,
}

/// Something wrong across fields, with the dotted path of the value to fix
/// (`storage.arrays[0].mount`) and a message that says how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecProblem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// A line and column (both from 1) in the recipe file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("cannot read the recipe {}: {source}; the image builder copies it to the boot partition, or pass --recipe PATH", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}:{}: {message}", path.display(), at.line, at.column)]
    Syntax {
        path: PathBuf,
        at: Location,
        message: String,
    },
    #[error("{}", render_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<(SpecProblem, Option<Location>)>,
    },
}

fn render_problems(path: &Path, problems: &[(SpecProblem, Option<Location>)]) -> String {
    problems
        .iter()
        .map(|(p, at)| match at {
            Some(at) => format!("{}:{}:{}: {p}", path.display(), at.line, at.column),
            None => format!("{}: {p}", path.display()),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl DeviceRecipe {
    /// Reads and checks the recipe: syntax and type errors, then the
    /// cross-field problems from [`validate`], all with file:line:col.
    pub fn load(path: &Path) -> Result<Self, RecipeError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecipeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// As [`DeviceRecipe::load`], for text already read; `path` only names it
    /// in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, RecipeError> {
        let recipe: DeviceRecipe = toml::from_str(text).map_err(|e| RecipeError::Syntax {
            path: path.to_path_buf(),
            at: e
                .span()
                .map(|s| location(text, s.start))
                .unwrap_or(Location { line: 1, column: 1 }),
            message: e.message().trim_end().to_string(),
        })?;
        let problems = recipe.problems();
        if problems.is_empty() {
            Ok(recipe)
        } else {
            let located = problems
                .into_iter()
                .map(|p| {
                    let at = locate(text, &p.path);
                    (p, at)
                })
                .collect();
            Err(RecipeError::Invalid {
                path: path.to_path_buf(),
                problems: located,
            })
        }
    }

    pub fn problems(&self) -> Vec<SpecProblem> {
        match &self.storage {
            Some(storage) => validate(storage, &self.shares),
            None if self.shares.is_empty() => Vec::new(),
            None => vec![problem(
                "shares",
                "shares need an array to live on; add a [storage] section with [[storage.arrays]]",
            )],
        }
    }
}

/// Line and column (from 1, column counted in characters) of a byte offset.
pub fn location(text: &str, offset: usize) -> Location {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line,
        column: before[line_start..].chars().count() + 1,
    }
}

/// Where a dotted path (`storage.arrays[1].mount`) is written in the recipe
/// text, so that problems found after parsing still point at a line.
pub fn locate(text: &str, dotted: &str) -> Option<Location> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut span = root.span();
    let root = toml::de::DeValue::Table(root.into_inner());
    let mut here = &root;
    for segment in dotted.split('.') {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        let Some(next) = here.get(key) else { break };
        if !next.span().is_empty() {
            span = next.span();
        }
        here = next.get_ref();
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let Some(next) = index.parse::<usize>().ok().and_then(|i| here.get(i)) else {
                return Some(location(text, span.start));
            };
            if !next.span().is_empty() {
                span = next.span();
            }
            here = next.get_ref();
        }
    }
    Some(location(text, span.start))
}

fn problem(path: impl Into<String>, message: impl Into<String>) -> SpecProblem {
    SpecProblem {
        path: path.into(),
        message: message.into(),
    }
}

/// Directories that belong to the operating system: an array mounted over
/// them would hide the system.
const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys",
    "/tmp", "/usr", "/var",
];

const RESERVED_SHARES: &[&str] = &["global", "homes", "printers", "print$", "ipc$"];

/// Cross-field checks serde cannot express. An empty list means the spec can
/// be planned (whether the disks exist is the planner's question).
pub fn validate(storage: &Storage, shares: &[Share]) -> Vec<SpecProblem> {
    let mut out = Vec::new();
    if storage.mode == Mode::Unattended && storage.arrays.is_empty() {
        out.push(problem(
            "storage.arrays",
            "unattended mode needs at least one [[storage.arrays]]; add one, or set mode = \"wizard\"",
        ));
    }
    // Both become one line of mdadm.conf: a line break would add lines of
    // its own, mdadm reads only the first word, and the address goes on to
    // sendmail's command line and the mail's To: header.
    if let Some(mail) = &storage.mailaddr
        && !is_mail_address(mail)
    {
        out.push(problem("storage.mailaddr", format!("`{}` is not a mail address; write one address of letters, digits and . _ % + - @ (without spaces or control characters), such as \"root\" or \"me@example.com\"", mail.escape_debug())));
    }
    if let Some(program) = &storage.alert_program
        && (program == "/" || !is_safe_path(program))
    {
        out.push(problem("storage.alert_program", format!("`{}` must be an absolute path to a program, made of letters, digits and . _ - / (without spaces or control characters), e.g. \"/usr/local/bin/nas-alert\"", program.escape_debug())));
    }
    for (i, array) in storage.arrays.iter().enumerate() {
        check_array(&format!("storage.arrays[{i}]"), array, &mut out);
        if let Some(first) = storage.arrays[..i]
            .iter()
            .position(|a| a.name == array.name)
        {
            out.push(problem(
                format!("storage.arrays[{i}].name"),
                format!("the name `{}` is already used by storage.arrays[{first}]; every array needs its own name", array.name),
            ));
        }
        for (j, other) in storage.arrays[..i].iter().enumerate() {
            if other.mount == array.mount {
                out.push(problem(
                    format!("storage.arrays[{i}].mount"),
                    format!("{} is already the mount point of storage.arrays[{j}]; give each array its own directory", array.mount),
                ));
            } else if is_under(&array.mount, &other.mount) || is_under(&other.mount, &array.mount) {
                out.push(problem(
                    format!("storage.arrays[{i}].mount"),
                    format!("{} and {} (storage.arrays[{j}]) are nested, so one hides the other if mounted out of order; use side-by-side directories such as /srv/a and /srv/b", array.mount, other.mount),
                ));
            }
        }
    }
    let arrays_known = storage.mode == Mode::Unattended || !storage.arrays.is_empty();
    for (i, share) in shares.iter().enumerate() {
        check_share(&format!("shares[{i}]"), share, &mut out);
        if arrays_known
            && share.path.starts_with('/')
            && !storage
                .arrays
                .iter()
                .any(|a| is_under(&share.path, &a.mount) || share.path == a.mount)
        {
            let mounts: Vec<&str> = storage.arrays.iter().map(|a| a.mount.as_str()).collect();
            out.push(problem(
                format!("shares[{i}].path"),
                format!(
                    "{} is not on any array, so it would fill the boot disk; put it under an array's mount ({})",
                    share.path,
                    if mounts.is_empty() { "none defined".to_string() } else { mounts.join(", ") }
                ),
            ));
        }
        if let Some(first) = shares[..i]
            .iter()
            .position(|s| s.name.eq_ignore_ascii_case(&share.name))
        {
            out.push(problem(
                format!("shares[{i}].name"),
                format!("the share name `{}` is already used by shares[{first}] (Samba ignores case); rename one", share.name),
            ));
        }
        if share.nfs.is_some()
            && let Some(first) = shares[..i]
                .iter()
                .position(|s| s.nfs.is_some() && s.path == share.path)
        {
            out.push(problem(
                format!("shares[{i}].path"),
                format!("{} is already exported over NFS by shares[{first}]; merge the two shares' clients", share.path),
            ));
        }
    }
    out
}

/// The Debian packages the board needs to carry out this storage and these
/// shares, for the image builder to stage. In wizard mode the filesystem
/// and the kinds of share are chosen on the board, so every one is
/// included.
pub fn required_packages(storage: Option<&Storage>, shares: &[Share]) -> Vec<&'static str> {
    let wizard = storage.is_some_and(|s| s.mode == Mode::Wizard);
    let uses = |fs: Filesystem| {
        wizard || storage.is_some_and(|s| s.arrays.iter().any(|a| a.filesystem == fs))
    };
    [
        // mdadm for the arrays; also for its monitor and `status`, whatever the levels.
        ("mdadm", storage.is_some()),
        ("e2fsprogs", uses(Filesystem::Ext4)),
        ("xfsprogs", uses(Filesystem::Xfs)),
        ("btrfs-progs", uses(Filesystem::Btrfs)),
        ("samba", wizard || shares.iter().any(|s| s.smb.is_some())),
        // `vfs objects = fruit streams_xattr` on every share: without the
        // modules (only recommended by samba) every share refuses to open.
        (
            "samba-vfs-modules",
            wizard || shares.iter().any(|s| s.smb.is_some()),
        ),
        (
            "nfs-kernel-server",
            wizard || shares.iter().any(|s| s.nfs.is_some()),
        ),
        // `<hostname>.local` and the Bonjour records Macs and Time Machine
        // look for; WS-Discovery for Windows' Network view.
        ("avahi-daemon", wizard || !shares.is_empty()),
        ("wsdd2", wizard || shares.iter().any(|s| s.smb.is_some())),
        ("smartmontools", storage.is_some()),
    ]
    .into_iter()
    .filter_map(|(package, needed)| needed.then_some(package))
    .collect()
}

fn check_array(at: &str, array: &Array, out: &mut Vec<SpecProblem>) {
    let name = &array.name;
    if name.is_empty()
        || name.len() > 32
        || name.starts_with('-')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        out.push(problem(
            format!("{at}.name"),
            format!("`{}` cannot be an md array name; use 1 to 32 letters, digits, '-' or '_', e.g. \"data\"", name.escape_debug()),
        ));
    }
    check_absolute_dir(&format!("{at}.mount"), &array.mount, out);
    if let Some(dir) = SYSTEM_DIRS
        .iter()
        .find(|d| array.mount == **d || is_under(&array.mount, d))
    {
        out.push(problem(
            format!("{at}.mount"),
            format!("{} would cover the system directory {dir}; mount arrays under /srv or /mnt, e.g. /srv/{name}", array.mount),
        ));
    } else if array.mount == "/" || array.mount == "/home" {
        out.push(problem(
            format!("{at}.mount"),
            format!(
                "{} is a system directory; mount arrays under /srv or /mnt, e.g. /srv/{name}",
                array.mount
            ),
        ));
    }
    let level = array.level;
    if let Count::Exactly(n) = array.disks.count {
        if n < level.min_disks() {
            out.push(problem(
                format!("{at}.disks.count"),
                format!("{level} needs at least {} disks but count = {n}; raise count or choose another level", level.min_disks()),
            ));
        } else if let Some(max) = level.max_disks()
            && n > max
        {
            out.push(problem(
                format!("{at}.disks.count"),
                format!("{level} uses exactly one disk but count = {n}; set count = 1, or use raid1/raid5 for several disks"),
            ));
        }
    }
    if let (Some(min), Some(max)) = (array.disks.min_size, array.disks.max_size)
        && min > max
    {
        out.push(problem(
            format!("{at}.disks.min_size"),
            format!("min_size ({min}) is larger than max_size ({max}), so no disk can match; swap or widen them"),
        ));
    }
    for (key, pattern) in [
        ("model", &array.disks.model),
        ("serial", &array.disks.serial),
        ("wwn", &array.disks.wwn),
        ("controller", &array.disks.controller),
    ] {
        let Some(pattern) = pattern else { continue };
        // Patterns are only matched, never written into a file, but the
        // plan prints them on the console: no control characters.
        let why = if pattern.chars().any(char::is_control) {
            Err("control characters (line breaks, tabs, escapes) cannot appear in it")
        } else {
            crate::matching::check_glob(pattern)
        };
        if let Err(why) = why {
            out.push(problem(
                format!("{at}.disks.{key}"),
                format!("`{}` is not a valid pattern: {why}", pattern.escape_debug()),
            ));
        }
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

fn check_absolute_dir(at: &str, path: &str, out: &mut Vec<SpecProblem>) {
    if !is_safe_path(path) {
        out.push(problem(
            at.to_string(),
            format!(
                "`{}` must be an absolute path made of letters, digits and . _ - /, without empty, `.` or `..` parts, e.g. \"/srv/data\"",
                path.escape_debug()
            ),
        ));
    }
}

/// Paths go unquoted into fstab, smb.conf (which expands `%`), exports
/// (where `,` and `(` start options) and command lines, each with its own
/// escapes; a set of characters none of them treats specially is the one
/// spelling they all read the same way.
fn is_safe_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    path.len() < 4096
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        && (rest.is_empty()
            || rest
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != ".."))
}

/// One entry of an exports(5) client list, strictly: `*`, an IPv4 or IPv6
/// address with an optional prefix length, or a host name whose labels may
/// hold the wildcards `*` and `?`. Anything else (a `-`, a space, a comma,
/// a parenthesis) could add options or clients to the export line.
fn is_nfs_client(client: &str) -> bool {
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

/// A local user (`root`) or one address (`me@example.com`).
fn is_mail_address(mail: &str) -> bool {
    !mail.is_empty()
        && mail.len() <= 254
        && !mail.starts_with(['-', '@', '.'])
        && mail.matches('@').count() <= 1
        && !mail.ends_with(['@', '.'])
        && mail
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%+-@".contains(c))
}

fn is_under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
        || (dir == "/" && path != "/")
}

fn is_unix_user_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && name.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(level: Level, filesystem: Filesystem) -> Array {
        Array {
            name: "a".into(),
            level,
            disks: DiskMatch::default(),
            filesystem,
            mount: "/srv/a".into(),
            wipe: false,
        }
    }

    fn storage(mode: Mode, arrays: Vec<Array>) -> Storage {
        Storage {
            mode,
            arrays,
            mailaddr: None,
            alert_program: None,
        }
    }

    fn share(smb: bool, nfs: bool) -> Share {
        Share {
            name: "s".into(),
            path: "/srv/a/s".into(),
            smb: smb.then(|| Smb {
                users: vec!["admin".into()],
                timemachine: false,
                timemachine_max_size: None,
                readonly: false,
                guest: false,
            }),
            nfs: nfs.then(|| Nfs {
                clients: Clients(vec!["192.168.1.0/24".into()]),
                readonly: false,
            }),
        }
    }

    #[test]
    fn required_packages_follow_the_plan() {
        assert!(
            required_packages(None, &[]).is_empty(),
            "no storage, no shares"
        );
        let raid = storage(Mode::Unattended, vec![array(Level::Raid5, Filesystem::Xfs)]);
        assert_eq!(
            required_packages(Some(&raid), &[share(true, false)]),
            [
                "mdadm",
                "xfsprogs",
                "samba",
                "samba-vfs-modules",
                "avahi-daemon",
                "wsdd2",
                "smartmontools"
            ]
        );
        let two = storage(
            Mode::Unattended,
            vec![
                array(Level::Single, Filesystem::Ext4),
                array(Level::Single, Filesystem::Btrfs),
            ],
        );
        assert_eq!(
            required_packages(Some(&two), &[share(false, true)]),
            [
                "mdadm",
                "e2fsprogs",
                "btrfs-progs",
                "nfs-kernel-server",
                "avahi-daemon",
                "smartmontools"
            ]
        );
        assert_eq!(
            required_packages(Some(&two), &[share(true, true), share(true, false)]),
            [
                "mdadm",
                "e2fsprogs",
                "btrfs-progs",
                "samba",
                "samba-vfs-modules",
                "nfs-kernel-server",
                "avahi-daemon",
                "wsdd2",
                "smartmontools"
            ]
        );
        // The wizard chooses on the board: everything it may choose.
        let wizard = storage(Mode::Wizard, vec![]);
        assert_eq!(
            required_packages(Some(&wizard), &[]),
            [
                "mdadm",
                "e2fsprogs",
                "xfsprogs",
                "btrfs-progs",
                "samba",
                "samba-vfs-modules",
                "nfs-kernel-server",
                "avahi-daemon",
                "wsdd2",
                "smartmontools"
            ]
        );
    }

    #[test]
    fn ordinary_clients_paths_and_addresses_pass() {
        for client in [
            "*",
            "nas",
            "nas.lan",
            "*.lan",
            "nas-?.home.arpa",
            "192.168.1.7",
            "192.168.1.0/24",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "fd00::/64",
            "2001:db8::1",
            "::1/128",
        ] {
            assert!(is_nfs_client(client), "{client}");
        }
        for client in [
            "",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "fd00::/129",
            "nas-",
            "a..b",
            "1.2.3",
        ] {
            assert!(!is_nfs_client(client), "{client}");
        }
        for path in [
            "/",
            "/srv/data",
            "/srv/media_2.x/fotos-2024",
            "/mnt/.hidden",
        ] {
            assert!(is_safe_path(path), "{path}");
        }
        for path in ["", "/srv/data/", "/srv/Música", "/srv/a:b", "/srv/~x"] {
            assert!(!is_safe_path(path), "{path}");
        }
        for mail in ["root", "me@example.com", "nas+alerts@mail.example.org"] {
            assert!(is_mail_address(mail), "{mail}");
        }
        for mail in ["a@b@c", "@example.com", "me@", "-f@x", "a b", "a;b"] {
            assert!(!is_mail_address(mail), "{mail}");
        }
    }

    #[test]
    fn alert_program_and_mailaddr_are_one_word_on_one_line() {
        let problems = |program: Option<&str>, mail: Option<&str>| {
            let mut s = storage(
                Mode::Unattended,
                vec![array(Level::Raid1, Filesystem::Ext4)],
            );
            s.alert_program = program.map(str::to_string);
            s.mailaddr = mail.map(str::to_string);
            validate(&s, &[])
                .into_iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
        };
        assert!(problems(Some("/usr/local/bin/nas-alert"), Some("me@example.com")).is_empty());
        for program in [
            "/usr/local/bin/nas-alert\nMAILADDR evil@example.com",
            "/bin/sh -c reboot",
            "/usr/bin/alert\t",
            "/usr/bin/al\x1bert",
        ] {
            let p = problems(Some(program), None);
            assert_eq!(p.len(), 1, "{program:?}: {p:?}");
            assert!(
                p[0].starts_with("storage.alert_program: `")
                    && p[0].contains("without spaces or control characters")
                    && !p[0].contains('\n'),
                "{p:?}"
            );
        }
        for mail in ["root\nPROGRAM /tmp/x", "a@b\x00", "a b", ""] {
            let p = problems(None, Some(mail));
            assert_eq!(p.len(), 1, "{mail:?}: {p:?}");
            assert!(p[0].starts_with("storage.mailaddr: "), "{p:?}");
        }
    }
}
