//! The recipe's `[storage]` section: the arrays to build, which disks each
//! takes, and where mdadm's monitor reports, with the checks serde cannot
//! express.

use super::paths::{check_absolute_dir, is_safe_path, is_under};
use super::{SpecProblem, glob, problem};
use crate::machine::filesystems::KeptFilesystem;
pub use crate::machine::hardware::Transport;
use crate::machine::usb_quirk::UsbQuirk;
use crate::size::Size;
use serde::{Deserialize, Serialize};
use std::fmt;

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
    /// Spin idle hard disks of the arrays down after this long; off unless
    /// set. SSDs are never spun down.
    #[serde(default, skip_serializing_if = "SpinDown::is_off")]
    pub spin_down: SpinDown,
    /// Disks that already hold files, shared as they are (`keep = true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<KeptDisk>,
    /// USB bridges kept off the `uas` driver (`usb-storage.quirks=VID:PID:u`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usb_quirks: Vec<UsbQuirk>,
    /// A second SSD the system is mirrored onto at first boot (a PC only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_mirror: Option<SystemMirror>,
    /// Serials of disks SMART reports failing that unattended setup may use
    /// all the same; any other failing disk is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_failing: Vec<String>,
}

/// `[storage.system_mirror]`: the disk that joins the one the system runs
/// from in an md RAID1, so the PC boots with either of them pulled.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SystemMirror {
    /// Which disk: the same rules as an array's `disks`, matching exactly one.
    #[serde(rename = "match")]
    pub disk: DiskMatch,
    /// Allow erasing it when it holds a partition table, a filesystem or a
    /// RAID/ZFS label.
    #[serde(default)]
    pub wipe: bool,
}

/// The md name of the mirrored system, `/dev/md/system`; no array may take it.
pub const SYSTEM_MIRROR_NAME: &str = "system";

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
    /// Which disks it is made of; read through [`Array::disks`]. Absent
    /// only for an array adopted as it is (`import`), whose disks say
    /// where it is.
    #[serde(default, rename = "disks", skip_serializing_if = "Option::is_none")]
    pub disk_match: Option<DiskMatch>,
    pub filesystem: Filesystem,
    pub mount: String,
    /// Adopt an md array or ZFS pool another machine made, as it is:
    /// nothing erased, partitioned or formatted; `level` and `filesystem`
    /// say what it must be, and setup refuses it if it is something else.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub import: bool,
    /// Which array to adopt, by md's array UUID (or a pool's numeric id) as
    /// setup's log lists it, when its on-disk name does not say (two old
    /// arrays called `data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Allow erasing member disks that hold a partition table, a filesystem
    /// or a RAID/ZFS label. Mounted, in-use and boot disks are never erased.
    #[serde(default)]
    pub wipe: bool,
    /// Split the active disks into this many groups of the same level,
    /// striped together: a ZFS pool's vdevs (two raidz2 vdevs of 7 disks
    /// from 14), or for md raid5 and raid6 that many legs (`<name>-0`,
    /// `<name>-1`, ...) under a raid0 (raid50, raid60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vdevs: Option<usize>,
    /// Hot spares: this many of the matched disks (the last ones in the
    /// order the planner lists the members) hold no data and take a failed
    /// member's place at once. Counted in `disks.count`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spares: usize,
    /// A pool's disks of parity (0, 1 or 2): the largest of its blank disks
    /// hold SnapRAID's parity instead of files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parity: Option<usize>,
    /// Kept disks (`[[storage.disks]]` names) that join a pool as data
    /// disks, their files untouched and served through the pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What an array without `disks` matches: nothing narrowed.
const ANY_DISK: DiskMatch = DiskMatch {
    transport: None,
    min_size: None,
    max_size: None,
    model: None,
    serial: None,
    wwn: None,
    controller: None,
    rotational: None,
    count: Count::All,
};

impl Array {
    /// The recipe's `disks` (an array adopted with `import` may have none:
    /// then every disk, its members found by their superblocks).
    pub fn disks(&self) -> &DiskMatch {
        self.disk_match.as_ref().unwrap_or(&ANY_DISK)
    }

    /// How many groups the disks are split into: a pool's vdevs, an md
    /// array's legs (1 for an md array without `vdevs`).
    pub fn vdev_count(&self) -> usize {
        self.vdevs.unwrap_or(1).max(1)
    }

    /// An md array made of legs: raid5 or raid6 arrays of their own,
    /// striped by a raid0 (raid50, raid60).
    pub fn is_nested(&self) -> bool {
        !self.is_zfs() && self.vdev_count() > 1
    }

    /// The md name of leg `i` of a nested array: `<name>-<i>`.
    pub fn leg_name(&self, i: usize) -> String {
        format!("{}-{i}", self.name)
    }

    /// The names md (or zpool) knows this array by: its own, and its legs'.
    pub fn md_names(&self) -> Vec<String> {
        let mut names = vec![self.name.clone()];
        if self.is_nested() {
            names.extend((0..self.vdev_count()).map(|i| self.leg_name(i)));
        }
        names
    }

    pub fn is_zfs(&self) -> bool {
        self.filesystem == Filesystem::Zfs
    }

    /// Where the md array appears, `/dev/md/<name>` (a `single` array has
    /// none: its filesystem goes on the disk's partition).
    pub fn md_device(&self) -> String {
        format!("/dev/md/{}", self.name)
    }
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
    /// ZFS levels (with `filesystem = "zfs"`): one, two or three disks of
    /// parity in each vdev, an n-way mirror, or disks striped with none.
    Raidz1,
    Raidz2,
    Raidz3,
    Mirror,
    Stripe,
    /// Disks of any size, each with its own filesystem, joined at the mount
    /// by mergerfs, with SnapRAID's parity on the largest (`parity`).
    Pool,
}

impl Level {
    /// The fewest members mdadm accepts (raid10 with the default near-2
    /// layout works on two disks).
    /// For ZFS levels, the fewest in each vdev: zpool takes a raidzN of N+1
    /// disks, but it would hold no more than a mirror, so one more is asked.
    pub fn min_disks(self) -> usize {
        match self {
            Level::Single | Level::Stripe => 1,
            Level::Raid0 | Level::Raid1 | Level::Raid10 | Level::Mirror | Level::Pool => 2,
            Level::Raid5 | Level::Raidz1 => 3,
            Level::Raid6 | Level::Raidz2 => 4,
            Level::Raidz3 => 5,
        }
    }

    pub fn max_disks(self) -> Option<usize> {
        (self == Level::Single).then_some(1)
    }

    /// Survives a failed member, so there is something to rebuild onto a
    /// hot spare.
    pub fn is_redundant(self) -> bool {
        !matches!(
            self,
            Level::Raid0 | Level::Single | Level::Stripe | Level::Pool
        )
    }

    /// What a raid0 of legs of this level is called (raid50, raid60); None
    /// for levels that cannot be legs.
    pub fn nested_name(self) -> Option<&'static str> {
        match self {
            Level::Raid5 => Some("raid50"),
            Level::Raid6 => Some("raid60"),
            _ => None,
        }
    }

    /// A ZFS level: built with zpool, not mdadm.
    pub fn is_zfs(self) -> bool {
        matches!(
            self,
            Level::Raidz1 | Level::Raidz2 | Level::Raidz3 | Level::Mirror | Level::Stripe
        )
    }

    /// The vdev type on zpool's command line; None for a stripe (disks
    /// listed bare) and for md levels.
    pub fn zpool_vdev(self) -> Option<&'static str> {
        match self {
            Level::Raidz1 => Some("raidz1"),
            Level::Raidz2 => Some("raidz2"),
            Level::Raidz3 => Some("raidz3"),
            Level::Mirror => Some("mirror"),
            _ => None,
        }
    }

    /// The value for `mdadm --level`; None for `single`.
    pub fn mdadm(self) -> Option<&'static str> {
        match self {
            Level::Raid0 => Some("0"),
            Level::Raid1 => Some("1"),
            Level::Raid5 => Some("5"),
            Level::Raid6 => Some("6"),
            Level::Raid10 => Some("10"),
            _ => None,
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
            Level::Raidz1 => "raidz1",
            Level::Raidz2 => "raidz2",
            Level::Raidz3 => "raidz3",
            Level::Mirror => "mirror",
            Level::Stripe => "stripe",
            Level::Pool => "pool",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    Ext4,
    Xfs,
    Btrfs,
    /// A ZFS pool: the level is a ZFS one and zpool/zfs build it.
    Zfs,
}

impl fmt::Display for Filesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Filesystem::Ext4 => "ext4",
            Filesystem::Xfs => "xfs",
            Filesystem::Btrfs => "btrfs",
            Filesystem::Zfs => "zfs",
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

/// How long a hard disk may sit idle before it is spun down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpinDown {
    #[default]
    Off,
    /// Seconds of idleness (hd-idle's `-i`).
    After(u32),
}

/// hd-idle's documentation: "manufacturers recommend a minimum idle time of
/// 3-5 minutes"; every spin-up wears the spindle motor, so shorter times
/// are refused rather than quietly shortening the disks' life.
const SPIN_DOWN_MIN_SECS: u32 = 5 * 60;

const SPIN_DOWN_FORMS: &str = "write a duration such as \"20min\" or \"1h\" (a whole number with s, min or h, at least 5min), or \"off\" (or 0) to never spin disks down";

impl SpinDown {
    pub fn is_off(&self) -> bool {
        *self == SpinDown::Off
    }

    /// `"20min"`, `"1h"`, `"900s"`, `"off"` or `"0"`.
    pub fn parse(text: &str) -> Result<SpinDown, String> {
        let t = text.trim();
        if t == "off" || t == "0" {
            return Ok(SpinDown::Off);
        }
        let refuse = |why: &str| {
            Err(format!(
                "`{}` is not a spin-down time{why}: {SPIN_DOWN_FORMS}",
                text.escape_debug()
            ))
        };
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(digits);
        let scale = match unit.trim() {
            "s" => 1,
            "min" => 60,
            "h" => 3600,
            _ => return refuse(""),
        };
        let Some(secs) = number
            .parse::<u32>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
        else {
            return refuse("");
        };
        match secs {
            0 => Ok(SpinDown::Off),
            s if s < SPIN_DOWN_MIN_SECS => refuse(" (too short: each spin-up wears the disk)"),
            s => Ok(SpinDown::After(s)),
        }
    }
}

impl fmt::Display for SpinDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SpinDown::Off => f.write_str("off"),
            SpinDown::After(s) if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            SpinDown::After(s) if s % 60 == 0 => write!(f, "{}min", s / 60),
            SpinDown::After(s) => write!(f, "{s}s"),
        }
    }
}

impl Serialize for SpinDown {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SpinDown {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = SpinDown;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a spin-down time such as \"20min\", or \"off\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SpinDown, E> {
                SpinDown::parse(v).map_err(E::custom)
            }
            // A bare number has no unit: only 0 is unambiguous.
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SpinDown, E> {
                match v {
                    0 => Ok(SpinDown::Off),
                    _ => Err(E::custom(format!("`{v}` has no unit: {SPIN_DOWN_FORMS}"))),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SpinDown, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<SpinDown, E> {
                match v {
                    false => Ok(SpinDown::Off),
                    true => Err(E::custom(format!(
                        "`true` does not say when: {SPIN_DOWN_FORMS}"
                    ))),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Directories that belong to the operating system: an array mounted over
/// them would hide the system.
const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys",
    "/tmp", "/usr", "/var",
];

/// The `[storage]` section's own problems, each array's included.
pub(super) fn check_storage(storage: &Storage, out: &mut Vec<SpecProblem>) {
    if storage.mode == Mode::Unattended && storage.arrays.is_empty() && storage.disks.is_empty() {
        out.push(problem(
            "storage.arrays",
            "unattended mode needs at least one [[storage.arrays]] (or a [[storage.disks]] kept as it is); add one, or set mode = \"wizard\"",
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
        check_array(&format!("storage.arrays[{i}]"), array, out);
        check_against_earlier(i, array, &storage.arrays[..i], out);
    }
    if let Some(mirror) = &storage.system_mirror {
        check_system_mirror(storage, mirror, out);
    }
}

fn check_system_mirror(storage: &Storage, mirror: &SystemMirror, out: &mut Vec<SpecProblem>) {
    let at = "storage.system_mirror.match";
    if storage.mode == Mode::Wizard {
        out.push(problem(
            "storage.system_mirror",
            "the wizard does not mirror the system: set mode = \"unattended\" to have first boot do it, or leave system_mirror out",
        ));
    }
    check_patterns(at, &mirror.disk, out);
    let m = &mirror.disk;
    let says_which = m.transport.is_some()
        || m.min_size.is_some()
        || m.max_size.is_some()
        || m.model.is_some()
        || m.serial.is_some()
        || m.wwn.is_some()
        || m.controller.is_some()
        || m.rotational.is_some();
    if !says_which {
        out.push(problem(
            at,
            "say which disk the system is mirrored onto: by `serial` or `model` (as `nasforge-setup status` lists them), or `rotational = false` when it is the only other SSD",
        ));
    }
    if !matches!(m.count, Count::All | Count::Exactly(1)) {
        out.push(problem(
            format!("{at}.count"),
            "the system is mirrored over two disks, the one it runs from and this one: leave count out",
        ));
    }
    for (i, array) in storage.arrays.iter().enumerate() {
        if array.md_names().iter().any(|n| n == SYSTEM_MIRROR_NAME) {
            out.push(problem(
                format!("storage.arrays[{i}].name"),
                format!("`{SYSTEM_MIRROR_NAME}` is the name of the system's own mirror (/dev/md/{SYSTEM_MIRROR_NAME}); call the array something else"),
            ));
        }
    }
}

/// The name and mount point of `storage.arrays[i]` against the arrays
/// before it.
fn check_against_earlier(i: usize, array: &Array, earlier: &[Array], out: &mut Vec<SpecProblem>) {
    if let Some(first) = earlier.iter().position(|a| a.name == array.name) {
        out.push(problem(
            format!("storage.arrays[{i}].name"),
            format!("the name `{}` is already used by storage.arrays[{first}]; every array needs its own name", array.name),
        ));
    } else if let Some((j, clash)) = earlier.iter().enumerate().find_map(|(j, other)| {
        let theirs = other.md_names();
        array
            .md_names()
            .into_iter()
            .find(|n| theirs.contains(n))
            .map(|n| (j, n))
    }) {
        // A leg's name (`data-0`) is an md array's name too: the two would
        // be one /dev/md/data-0.
        out.push(problem(
            format!("storage.arrays[{i}].name"),
            format!("`{clash}` would name an array or leg of both this array and storage.arrays[{j}] (the legs of an array with vdevs are <name>-0, <name>-1, ...); every array and leg needs its own name, so rename one of them"),
        ));
    }
    for (j, other) in earlier.iter().enumerate() {
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

/// 1 to 32 letters, digits, '-' or '_', not starting with '-': what md
/// accepts as an array name, and what steps and logs can show unquoted.
pub(super) fn is_valid_name(name: &str) -> bool {
    !(name.is_empty()
        || name.len() > 32
        || name.starts_with('-')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
}

/// A mount point's own problems: absolute and plain, and not over a
/// system directory.
pub(super) fn check_mount(at: &str, mount: &str, name: &str, out: &mut Vec<SpecProblem>) {
    check_absolute_dir(&format!("{at}.mount"), mount, out);
    if let Some(dir) = SYSTEM_DIRS
        .iter()
        .find(|d| mount == **d || is_under(mount, d))
    {
        out.push(problem(
            format!("{at}.mount"),
            format!("{mount} would cover the system directory {dir}; mount arrays and disks under /srv or /mnt, e.g. /srv/{name}"),
        ));
    } else if mount == "/" || mount == "/home" {
        out.push(problem(
            format!("{at}.mount"),
            format!("{mount} is a system directory; mount arrays and disks under /srv or /mnt, e.g. /srv/{name}"),
        ));
    }
}

fn check_array(at: &str, array: &Array, out: &mut Vec<SpecProblem>) {
    let name = &array.name;
    if !is_valid_name(name) {
        out.push(problem(
            format!("{at}.name"),
            format!("`{}` cannot be an md array name; use 1 to 32 letters, digits, '-' or '_', e.g. \"data\"", name.escape_debug()),
        ));
    }
    check_mount(at, &array.mount, name, out);
    if array.import {
        check_import(at, array, out);
        return;
    }
    if array.disk_match.is_none() {
        out.push(problem(
            at.to_string(),
            "has no `disks`: say which disks make the array, e.g. disks = { transport = \"sata\", count = 3 }; or, to adopt an md array another machine made as it is, import = true".to_string(),
        ));
    }
    if array.uuid.is_some() {
        out.push(problem(
            format!("{at}.uuid"),
            "uuid names an existing array to adopt, which only import = true does; remove it, or add import = true".to_string(),
        ));
    }
    if array.level != Level::Pool && check_kind(at, array, out) {
        check_groups(at, array, out);
    }
    if let (Some(min), Some(max)) = (array.disks().min_size, array.disks().max_size)
        && min > max
    {
        out.push(problem(
            format!("{at}.disks.min_size"),
            format!("min_size ({min}) is larger than max_size ({max}), so no disk can match; swap or widen them"),
        ));
    }
    check_patterns(&format!("{at}.disks"), array.disks(), out);
}

/// An array or pool adopted as it is: the keys that say how to build one
/// have nothing to say; level and filesystem must still agree.
fn check_import(at: &str, array: &Array, out: &mut Vec<SpecProblem>) {
    let building = [
        ("disks", array.disk_match.is_some()),
        ("wipe", array.wipe),
        ("vdevs", array.vdevs.is_some()),
        ("spares", array.spares > 0),
        ("parity", array.parity.is_some()),
        ("keep", !array.keep.is_empty()),
    ];
    for (key, _) in building.iter().filter(|(_, set)| *set) {
        out.push(problem(
            format!("{at}.{key}"),
            format!("an imported array is adopted as its disks hold it, so `{key}` has nothing to say; remove it (the members are found by their md superblocks; uuid = \"…\" picks one array when names clash)"),
        ));
    }
    if matches!(array.level, Level::Single | Level::Pool) {
        out.push(problem(
            format!("{at}.level"),
            format!("import adopts md arrays (raid0, raid1, raid5, raid6, raid10) and ZFS pools (raidz1, raidz2, raidz3, mirror, stripe), not level {}", array.level),
        ));
    } else {
        check_kind(at, array, out);
    }
    if array.is_zfs() {
        if let Some(id) = &array.uuid
            && (id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(problem(
                format!("{at}.uuid"),
                format!("`{}` is not a ZFS pool's id; copy the number from setup's log or `zpool import`, e.g. \"5871402329107765531\"", id.escape_debug()),
            ));
        }
    } else if let Some(uuid) = &array.uuid {
        let hex = uuid.chars().filter(char::is_ascii_hexdigit).count();
        if hex != 32
            || !uuid
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '-')
        {
            out.push(problem(
                format!("{at}.uuid"),
                format!("`{}` is not an md array UUID; copy it from setup's log or `mdadm --examine`, e.g. \"3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708\"", uuid.escape_debug()),
            ));
        }
    }
}

/// The pool names zpool(8) reserves, and the prefixes it refuses.
const ZPOOL_RESERVED: &[&str] = &[
    "mirror", "raidz", "draid", "spare", "log", "cache", "special", "dedup",
];

/// Level and filesystem agree (a ZFS level with zfs, an md level with
/// the others), and a pool's name is one zpool takes. False when the
/// kind is wrong: the disk counts are then not worth checking.
fn check_kind(at: &str, array: &Array, out: &mut Vec<SpecProblem>) -> bool {
    let level = array.level;
    match (level.is_zfs(), array.is_zfs()) {
        (true, false) => {
            out.push(problem(
                format!("{at}.filesystem"),
                format!("{level} is a ZFS level; set filesystem = \"zfs\" (or use raid5/raid6/raid1 with {})", array.filesystem),
            ));
            return false;
        }
        (false, true) => {
            let zfs = match level {
                Level::Raid1 => "mirror",
                Level::Raid0 | Level::Single => "stripe",
                Level::Raid6 => "raidz2",
                _ => "raidz1",
            };
            out.push(problem(
                format!("{at}.level"),
                format!("a ZFS pool takes level = \"raidz1\", \"raidz2\", \"raidz3\", \"mirror\" or \"stripe\", not {level}; here: level = \"{zfs}\""),
            ));
            return false;
        }
        (false, false) => return true,
        (true, true) => {}
    }
    let name = &array.name;
    let lower = name.to_ascii_lowercase();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic())
        || ZPOOL_RESERVED.iter().any(|r| lower.starts_with(r))
        || (lower.starts_with('c') && lower[1..].starts_with(|c: char| c.is_ascii_digit()))
    {
        out.push(problem(
            format!("{at}.name"),
            format!("`{}` cannot name a ZFS pool: it must begin with a letter, and zpool reserves mirror, raidz, draid, spare, log and names like c0; e.g. \"tank\"", name.escape_debug()),
        ));
    }
    true
}

/// Why an md level cannot be split into legs.
fn no_legs(level: Level) -> &'static str {
    match level {
        Level::Raid1 => {
            "two raid1 legs striped together are what raid10 is: write level = \"raid10\" (md's own striped mirrors) and remove vdevs"
        }
        Level::Raid10 | Level::Raid0 => {
            "this level stripes over all its disks already; remove vdevs, or use raid5 or raid6 legs (vdevs = 2 with level = \"raid6\" is raid60)"
        }
        _ => "a single disk has nothing to split; remove vdevs",
    }
}

/// The groups (vdevs, legs) and hot spares against the disk count: each
/// group gets the level's minimum, every group the same width, and a
/// spare only where a failed member can be rebuilt.
fn check_groups(at: &str, array: &Array, out: &mut Vec<SpecProblem>) {
    let level = array.level;
    let zfs = array.is_zfs();
    let group = if zfs { "vdev" } else { "leg" };
    match array.vdevs {
        Some(0) => {
            let fix = if zfs {
                "vdevs = 0 leaves the pool without disks; write 1 (the default) or more"
            } else {
                "vdevs = 0 leaves the array without legs; write 1 (the default), or 2 for two legs striped together"
            };
            out.push(problem(format!("{at}.vdevs"), fix.to_string()));
            return;
        }
        Some(v) if v > 1 && !zfs && level.nested_name().is_none() => {
            out.push(problem(
                format!("{at}.vdevs"),
                format!("{level} cannot be split into legs: {}", no_legs(level)),
            ));
            return;
        }
        _ => {}
    }
    let vdevs = array.vdev_count();
    if array.is_nested() && is_valid_name(&array.name) {
        let last = array.leg_name(vdevs - 1);
        if last.len() > 32 {
            out.push(problem(
                format!("{at}.name"),
                format!("`{}` leaves no room for the legs' names ({}): md names are at most 32 characters; shorten it to {} or fewer", array.name, last, 32 - (last.len() - array.name.len())),
            ));
        }
    }
    let spares = array.spares;
    if spares > 0 && !level.is_redundant() {
        let levels = if zfs {
            "mirror, raidz1, raidz2 or raidz3"
        } else {
            "raid1, raid5, raid6 or raid10"
        };
        out.push(problem(
            format!("{at}.spares"),
            format!("{level} keeps no second copy, so a failed member cannot be rebuilt onto a spare; remove spares, or choose {levels}"),
        ));
        return;
    }
    let Count::Exactly(n) = array.disks().count else {
        return;
    };
    let min = level.min_disks();
    if spares > 0 {
        let active = n.saturating_sub(spares);
        if active < min * vdevs {
            let each = match vdevs {
                1 => String::new(),
                v => format!(" in each of {v} {group}s ({} in all)", min * v),
            };
            out.push(problem(
                format!("{at}.spares"),
                format!("{level} needs at least {min} active disks{each}, but count = {n} with spares = {spares} leaves {active}; lower spares or raise count"),
            ));
        } else if active % vdevs != 0 {
            let r = active % vdevs;
            out.push(problem(
                format!("{at}.disks.count"),
                format!("{active} active disks (count = {n} minus spares = {spares}) do not split into {vdevs} {group}s of the same width; make count minus spares a multiple of {vdevs}: spares = {} or count = {}", spares + r, n - r),
            ));
        }
        return;
    }
    if !zfs && vdevs == 1 {
        if n < min {
            out.push(problem(
                format!("{at}.disks.count"),
                format!("{level} needs at least {min} disks but count = {n}; raise count or choose another level"),
            ));
        } else if let Some(max) = level.max_disks()
            && n > max
        {
            out.push(problem(
                format!("{at}.disks.count"),
                format!("{level} uses exactly one disk but count = {n}; set count = 1, or use raid1/raid5 for several disks"),
            ));
        }
    } else if n % vdevs != 0 {
        out.push(problem(
            format!("{at}.disks.count"),
            format!("{n} disks do not split into {vdevs} {group}s of the same width; use a multiple of {vdevs}"),
        ));
    } else if n / vdevs < min {
        out.push(problem(
            format!("{at}.disks.count"),
            format!("{level} needs at least {min} disks in each {group}, but count = {n} over {vdevs} {group}(s) gives {}; raise count or choose another level", n / vdevs),
        ));
    }
}

/// The glob patterns of a disk rule.
pub(super) fn check_patterns(at: &str, disks: &DiskMatch, out: &mut Vec<SpecProblem>) {
    for (key, pattern) in [
        ("model", &disks.model),
        ("serial", &disks.serial),
        ("wwn", &disks.wwn),
        ("controller", &disks.controller),
    ] {
        let Some(pattern) = pattern else { continue };
        // Patterns are only matched, never written into a file, but the
        // plan prints them on the console: no control characters.
        let why = if pattern.chars().any(char::is_control) {
            Err("control characters (line breaks, tabs, escapes) cannot appear in it")
        } else {
            glob::check_glob(pattern)
        };
        if let Err(why) = why {
            out.push(problem(
                format!("{at}.{key}"),
                format!("`{}` is not a valid pattern: {why}", pattern.escape_debug()),
            ));
        }
    }
}

/// A local user (`root`) or one address (`me@example.com`).
pub(super) fn is_mail_address(mail: &str) -> bool {
    !mail.is_empty()
        && mail.len() <= 254
        && !mail.starts_with(['-', '@', '.'])
        && mail.matches('@').count() <= 1
        && !mail.ends_with(['@', '.'])
        && mail
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%+-@".contains(c))
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeptDisk {
    /// What the disk is called in the plan, status and logs ("media"); the
    /// same rules as an array's name, and unique among arrays and disks.
    pub name: String,
    /// Which disk: the same rules as an array's `disks`, matching exactly one.
    #[serde(rename = "match")]
    pub disk: DiskMatch,
    /// The partition number holding the filesystem; unset when the whole
    /// disk is the filesystem or exactly one partition holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// The filesystem the disk is expected to hold. Optional: when set, the
    /// image builder checks that the board can mount it and stages what it
    /// needs, and setup refuses a disk that holds another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<KeptFilesystem>,
    pub mount: String,
    /// Must be `true`: the entry's whole point is that nothing on the disk
    /// is erased, and saying so is how a reader of the recipe knows.
    pub keep: bool,
}
