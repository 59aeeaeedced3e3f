//! What the arrays set up look like now, next to what setup made them of:
//! each member working, rebuilding, failed or missing (named by model and
//! serial from the setup journal, since a missing disk has no kernel name),
//! and for each array the attached disks that could join it, or why not.
//! The manage view and `replace`/`grow` start from here.

use crate::machine::disks::{Disk, Inventory};
use crate::machine::md::{MdMember, MdState, SyncProgress};
use crate::machine::zfs_report::PoolReport;
use crate::planner::{ArrayPlan, Plan};
use crate::size::Size;
use crate::spec::{Filesystem, Level};
use crate::steps::filesystem_device;
use crate::storage::partition;
use serde::Serialize;
use std::fmt;

/// Every array of the setup journal's plan, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Survey {
    pub arrays: Vec<ArraySurvey>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArraySurvey {
    /// The md name: `/dev/md/<name>`; a leg's is `<array>-<i>`.
    pub name: String,
    /// For a leg of a nested array (raid50, raid60), the recipe's array
    /// it is a leg of; the filesystem and mount are that array's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leg_of: Option<String>,
    pub level: Level,
    pub filesystem: Filesystem,
    pub mount: String,
    /// Where the members are: `/dev/md/<name>`, or a `single` disk's
    /// partition (where its filesystem is).
    pub device: String,
    /// md's kernel name (`md127`) when the array is assembled; None when it
    /// is not (or for `single`). For a ZFS pool, zpool's state of it
    /// (ONLINE, DEGRADED) when it is imported.
    pub kernel: Option<String>,
    /// Members the array is made for, and of those how many work.
    pub expected: usize,
    pub working: usize,
    /// Fewer members work than the array is made for.
    pub degraded: bool,
    /// A rebuild, reshape, resync or check under way.
    pub sync: Option<SyncProgress>,
    /// The members setup (or the last replace or grow) recorded, then any
    /// other device md lists.
    pub members: Vec<MemberReport>,
    /// The partition size a new member needs: the smallest member's
    /// partition (every member is partitioned from 1 MiB to its last
    /// whole MiB). Of an adopted array, the smallest member disk's size.
    pub member_size: Size,
    /// How the members are laid out; a new one joins the same way.
    pub layout: Layout,
    /// Attached disks that are not members of any array, with whether they
    /// can join this one.
    pub candidates: Vec<Candidate>,
}

/// Where an array's members are on their disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// nasforge's own: partition 1 of each disk, from 1 MiB to the last
    /// whole MiB.
    Partition,
    /// An adopted array of whole disks (as OpenMediaVault makes them): a
    /// new disk joins whole, and must be as large as the smallest member
    /// disk, since md gives it the members' data offset and size.
    WholeDisks,
    /// An adopted array on partitions another system made (a Synology's
    /// `sdX5`): nasforge does not copy that layout onto a new disk.
    ForeignPartitions,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberReport {
    pub model: Option<String>,
    pub serial: Option<String>,
    pub size: Size,
    /// The kernel name now (`sdb`); None when the disk is not attached.
    pub disk: Option<String>,
    /// The kernel name when it was recorded, for a missing disk's message.
    pub was: String,
    /// The member partition as mdadm is given it (a by-id `-part1` path
    /// when udev made one); None when the disk is missing. For a ZFS pool,
    /// the disk as zpool names it: its path, or its GUID once it is gone.
    pub partition: Option<String>,
    pub state: MemberState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberState {
    Working,
    /// md is rebuilding onto it (or will: a spare in a degraded array).
    Rebuilding,
    /// A spare in an array that lacks nothing.
    Spare,
    /// md marked it faulty; it is still attached and still listed.
    Failed,
    /// The disk is not attached.
    Missing,
    /// The disk is attached but its partition is not in the array (md
    /// kicked it out, or the array is not assembled).
    NotInArray,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Kernel name, `sdd`.
    pub disk: String,
    /// The path steps use (by-id when udev made a unique one).
    pub path: String,
    /// "WDC WD40EFRX (WD-…), 4 TB sata HDD"
    pub summary: String,
    pub size: Size,
    pub fit: Fit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "fit", rename_all = "snake_case")]
pub enum Fit {
    /// Blank and large enough.
    Fits,
    /// Its partition would be `short_by` smaller than the members'.
    TooSmall { short_by: Size },
    /// Large enough, but holds `what`: usable only when named with
    /// `--erase`.
    HoldsData { what: String },
    /// The running system uses it (`why`): never used.
    InUse { why: String },
    /// A disk the recipe keeps as it is (`[[storage.disks]]` `name`):
    /// never used, mounted or not, whatever `--erase` says.
    Kept { name: String },
}

impl ArraySurvey {
    pub fn failed(&self) -> impl Iterator<Item = &MemberReport> {
        self.members
            .iter()
            .filter(|m| m.state == MemberState::Failed)
    }

    /// Members that need a new disk: failed first, then missing or out of
    /// the array.
    pub fn to_replace(&self) -> Vec<&MemberReport> {
        let mut out: Vec<&MemberReport> = self.failed().collect();
        out.extend(
            self.members
                .iter()
                .filter(|m| matches!(m.state, MemberState::Missing | MemberState::NotInArray)),
        );
        out
    }

    pub fn fitting(&self) -> impl Iterator<Item = &Candidate> {
        self.candidates.iter().filter(|c| c.fit == Fit::Fits)
    }

    /// The recipe's array: this one, or the one it is a leg of.
    pub fn array_name(&self) -> &str {
        self.leg_of.as_deref().unwrap_or(&self.name)
    }

    /// Why nasforge cannot grow this array by adding disks; None when it
    /// can.
    pub fn cannot_grow(&self) -> Option<String> {
        match &self.leg_of {
            Some(array) => Some(nested_cannot_grow(array)),
            None => cannot_grow(self.level).map(str::to_string),
        }
    }
}

impl MemberReport {
    /// "WDC WD40EFRX (WD-WCC7K1234567)"
    pub fn label(&self) -> String {
        let model = self.model.as_deref().unwrap_or("unknown model");
        match &self.serial {
            Some(serial) => format!("{model} ({serial})"),
            None => model.to_string(),
        }
    }
}

/// The partition `write_single` would make on a disk of `size`: from 1 MiB
/// to the last whole MiB before the backup GPT (one header block and 16 KiB
/// of entries).
pub fn partition_bytes(size: Size, block_size: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let block_size = block_size.max(512);
    let backup = block_size + (16 << 10);
    (size.0.saturating_sub(backup) / MIB * MIB).saturating_sub(MIB)
}

/// The survey of `plan` against the disks found and md's view of each
/// array (`md` gives it by md device path).
pub fn survey_of(
    plan: &Plan,
    inventory: &Inventory,
    md: &dyn Fn(&str) -> Option<MdState>,
    zpool: &dyn Fn(&str) -> Option<PoolReport>,
) -> Survey {
    let members: Vec<&Disk> = plan
        .arrays
        .iter()
        .flat_map(|a| a.members.iter().map(|m| &m.disk))
        .collect();
    let free: Vec<Free> = inventory
        .disks
        .iter()
        .filter(|d| {
            !members
                .iter()
                .any(|m| m.identity().same_disk(&d.identity()))
        })
        .map(|disk| Free {
            disk,
            kept: plan
                .kept
                .iter()
                .find(|k| k.disk.identity().same_disk(&disk.identity()))
                .map(|k| k.spec.name.clone()),
        })
        .collect();
    Survey {
        // A pool of disks has no md array to survey: its status says what
        // is missing.
        arrays: plan
            .arrays
            .iter()
            .filter(|a| a.spec.level != Level::Pool)
            .flat_map(|a| {
                if a.spec.is_zfs() {
                    let report = zpool(&a.spec.name);
                    let size = member_size(a);
                    vec![super::zpool::survey(
                        a,
                        report.as_ref(),
                        size,
                        inventory,
                        free.iter()
                            .map(|f| candidate(f, size, Layout::Partition))
                            .collect(),
                    )]
                } else {
                    array_surveys(a, inventory, &free, md)
                }
            })
            .collect(),
    }
}

/// A disk no array has, and the name the recipe keeps it under, if it
/// does.
struct Free<'a> {
    disk: &'a Disk,
    kept: Option<String>,
}

/// What is surveyed of one md array (or single disk): its name and md
/// device, and the members recorded in it.
struct Unit<'a> {
    name: String,
    leg_of: Option<String>,
    device: String,
    state: Option<MdState>,
    members: Vec<&'a Disk>,
}

/// An array's surveys: its own, or for a nested array one per leg, where
/// md does its rebuilds and a replacement disk joins.
fn array_surveys(
    array: &ArrayPlan,
    inventory: &Inventory,
    free: &[Free],
    md: &dyn Fn(&str) -> Option<MdState>,
) -> Vec<ArraySurvey> {
    let spec = &array.spec;
    let member_size = member_size(array);
    let units = if spec.is_nested() {
        legs(array, inventory, md)
    } else {
        vec![Unit {
            name: spec.name.clone(),
            leg_of: None,
            device: filesystem_device(array),
            state: (spec.level != Level::Single)
                .then(|| md(&spec.md_device()))
                .flatten(),
            members: array.members.iter().map(|m| &m.disk).collect(),
        }]
    };
    units
        .into_iter()
        .map(|unit| unit_survey(array, unit, member_size, inventory, free))
        .collect()
}

/// Every member's partition is as large as the smallest one's, legs and
/// spares alike: a replacement fits wherever it joins. Of a ZFS pool's
/// new disk this asks what `zpool replace` does: at least the smallest
/// member's size. Of an adopted array of whole disks, the smallest disk.
fn member_size(array: &ArrayPlan) -> Size {
    let whole = layout(array) == Layout::WholeDisks;
    Size(
        array
            .members
            .iter()
            .map(|m| {
                if whole {
                    m.disk.size.0
                } else {
                    partition_bytes(m.disk.size, m.disk.logical_block_size)
                }
            })
            .min()
            .unwrap_or(0),
    )
}

/// nasforge's partitions, or what the adopted array's superblocks were
/// found on.
fn layout(array: &ArrayPlan) -> Layout {
    match &array.imported {
        None => Layout::Partition,
        Some(_) if array.spec.is_zfs() => Layout::Partition,
        Some(i) if i.partitions.iter().all(|(_, p)| p.is_none()) => Layout::WholeDisks,
        Some(_) => Layout::ForeignPartitions,
    }
}

/// The device holding `disk`'s superblock: partition 1 (nasforge's), or
/// the whole disk or the partition the adopted array recorded for it.
fn member_device(array: &ArrayPlan, planned: &Disk, found: &Disk) -> String {
    let number = match &array.imported {
        Some(i) => i
            .partitions
            .iter()
            .find(|(disk, _)| *disk == planned.name)
            .map_or(Some(1), |(_, p)| *p),
        None => Some(1),
    };
    match number {
        Some(n) => partition::partition_path(&found.stable_path(), n),
        None => found.stable_path(),
    }
}

/// A nested array's legs, each with the members md lists in it now: a
/// spare starts on the last leg, and mdadm's monitor may since have moved
/// it to another (spare-group). A disk no leg lists stays where setup put
/// it.
fn legs<'a>(
    array: &'a ArrayPlan,
    inventory: &Inventory,
    md: &dyn Fn(&str) -> Option<MdState>,
) -> Vec<Unit<'a>> {
    let spec = &array.spec;
    let n = spec.vdev_count();
    let mut units: Vec<Unit> = (0..n)
        .map(|i| {
            let device = format!("/dev/md/{}", spec.leg_name(i));
            Unit {
                name: spec.leg_name(i),
                leg_of: Some(spec.name.clone()),
                state: md(&device),
                device,
                members: Vec::new(),
            }
        })
        .collect();
    let planned: Vec<(usize, &Disk)> = array
        .groups()
        .iter()
        .enumerate()
        .flat_map(|(i, g)| g.iter().map(move |m| (i, &m.disk)))
        .chain(array.spares().map(|m| (n - 1, &m.disk)))
        .collect();
    for (planned_leg, disk) in planned {
        let found = inventory
            .disks
            .iter()
            .find(|d| d.identity().same_disk(&disk.identity()));
        let now = found.and_then(|d| {
            units.iter().position(|u| {
                u.state
                    .as_ref()
                    .is_some_and(|s| d.partitions.iter().any(|p| s.member(&p.name).is_some()))
            })
        });
        units[now.unwrap_or(planned_leg)].members.push(disk);
    }
    units
}

fn unit_survey(
    array: &ArrayPlan,
    unit: Unit,
    member_size: Size,
    inventory: &Inventory,
    free: &[Free],
) -> ArraySurvey {
    let spec = &array.spec;
    let laid_out = layout(array);
    let state = unit.state;
    let mut members: Vec<MemberReport> = unit
        .members
        .iter()
        .map(|d| member_report(array, d, inventory, state.as_ref()))
        .collect();
    if let Some(state) = &state {
        let extra: Vec<MemberReport> = unrecorded(&members, state, inventory).collect();
        members.extend(extra);
    }
    let (expected, working) = match &state {
        Some(s) => (s.raid_disks, s.raid_disks.saturating_sub(s.degraded)),
        None => {
            let working = members
                .iter()
                .filter(|m| m.state == MemberState::Working)
                .count();
            (unit.members.len(), working)
        }
    };
    ArraySurvey {
        name: unit.name,
        leg_of: unit.leg_of,
        level: spec.level,
        filesystem: spec.filesystem,
        mount: spec.mount.clone(),
        device: unit.device,
        kernel: state.as_ref().map(|s| s.kernel.clone()),
        expected,
        working,
        degraded: working < expected,
        sync: state.as_ref().and_then(|s| s.sync.clone()),
        members,
        member_size,
        layout: laid_out,
        candidates: free
            .iter()
            .map(|f| candidate(f, member_size, laid_out))
            .collect(),
    }
}

fn member_report(
    array: &ArrayPlan,
    planned: &Disk,
    inventory: &Inventory,
    md: Option<&MdState>,
) -> MemberReport {
    let found = inventory
        .disks
        .iter()
        .find(|d| d.identity().same_disk(&planned.identity()));
    let mut report = MemberReport {
        model: planned.model.clone(),
        serial: planned.serial.clone(),
        size: planned.size,
        disk: found.map(|d| d.name.clone()),
        was: planned.name.clone(),
        partition: found.map(|d| member_device(array, planned, d)),
        state: MemberState::Missing,
    };
    let Some(disk) = found else {
        return report;
    };
    report.state = match (array.spec.level, md) {
        (Level::Single, _) => MemberState::Working,
        (_, None) => MemberState::NotInArray,
        (_, Some(md)) => md
            .member(&disk.name)
            .or_else(|| disk.partitions.iter().find_map(|p| md.member(&p.name)))
            .map_or(MemberState::NotInArray, |m| member_state(m, md)),
    };
    report
}

fn member_state(member: &MdMember, md: &MdState) -> MemberState {
    if member.is_faulty() {
        MemberState::Failed
    } else if member.in_sync() {
        MemberState::Working
    } else if member.unassigned {
        MemberState::Spare
    } else if md.degraded > 0 || md.sync.is_some() {
        MemberState::Rebuilding
    } else {
        MemberState::Spare
    }
}

/// Devices md lists that no recorded member accounts for (added by hand).
fn unrecorded<'a>(
    known: &'a [MemberReport],
    md: &'a MdState,
    inventory: &'a Inventory,
) -> impl Iterator<Item = MemberReport> + 'a {
    md.members.iter().filter_map(move |m| {
        let disk = inventory
            .disks
            .iter()
            .find(|d| d.name == m.device || d.partitions.iter().any(|p| p.name == m.device));
        let name = disk.map_or(m.device.clone(), |d| d.name.clone());
        if known
            .iter()
            .any(|k| k.disk.as_deref() == Some(name.as_str()))
        {
            return None;
        }
        Some(MemberReport {
            model: disk.and_then(|d| d.model.clone()),
            serial: disk.and_then(|d| d.serial.clone()),
            size: disk.map_or(Size(0), |d| d.size),
            disk: Some(name.clone()),
            was: name,
            partition: Some(format!("/dev/{}", m.device)),
            state: member_state(m, md),
        })
    })
}

fn candidate(free: &Free, needed: Size, layout: Layout) -> Candidate {
    let disk = free.disk;
    let have = match layout {
        Layout::WholeDisks => disk.size.0,
        Layout::Partition | Layout::ForeignPartitions => {
            partition_bytes(disk.size, disk.logical_block_size)
        }
    };
    let fit = if let Some(name) = &free.kept {
        Fit::Kept { name: name.clone() }
    } else if !disk.in_use.is_empty() {
        Fit::InUse {
            why: disk
                .in_use
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }
    } else if have < needed.0 {
        Fit::TooSmall {
            short_by: Size(needed.0 - have),
        }
    } else if !disk.is_blank() {
        Fit::HoldsData {
            what: disk.describe_contents(),
        }
    } else {
        Fit::Fits
    };
    Candidate {
        disk: disk.name.clone(),
        path: disk.stable_path(),
        summary: disk.summary(),
        size: disk.size,
        fit,
    }
}

impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fit::Fits => f.write_str("blank, fits"),
            Fit::TooSmall { short_by } => write!(f, "too small by {short_by}"),
            Fit::HoldsData { what } => {
                write!(f, "holds {what}: usable only with --erase")
            }
            Fit::InUse { why } => write!(f, "in use: {why}"),
            Fit::Kept { name } => write!(f, "kept as '{name}' by the recipe: never used"),
        }
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberState::Working => "working",
            MemberState::Rebuilding => "rebuilding",
            MemberState::Spare => "spare",
            MemberState::Failed => "FAILED (still attached)",
            MemberState::Missing => "MISSING",
            MemberState::NotInArray => "attached but NOT IN THE ARRAY",
        })
    }
}

impl fmt::Display for ArraySurvey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zfs = self.level.is_zfs();
        let at = match &self.kernel {
            _ if zfs => "ZFS pool".to_string(),
            Some(k) => format!("{} = {k}", self.device),
            None => self.device.clone(),
        };
        let state = if zfs && self.kernel.is_none() {
            "NOT IMPORTED".to_string()
        } else if self.level != Level::Single && self.kernel.is_none() {
            "NOT ASSEMBLED".to_string()
        } else if self.degraded {
            format!(
                "DEGRADED, {} of {} disks working",
                self.working, self.expected
            )
        } else {
            "healthy".to_string()
        };
        let level = match &self.leg_of {
            Some(array) => format!("{} leg of '{array}'", self.level),
            None => self.level.to_string(),
        };
        writeln!(
            f,
            "Array '{}' ({level}, {at}, {} at {}): {state}",
            self.name, self.filesystem, self.mount
        )?;
        if let Some(sync) = &self.sync {
            writeln!(f, "  {sync}")?;
        }
        for m in &self.members {
            let now = match (&m.disk, m.state) {
                (_, MemberState::Missing) => format!("was {}", m.was),
                (Some(d), _) => d.clone(),
                (None, _) => m.was.clone(),
            };
            writeln!(f, "  {:<8} {}, {}: {}", now, m.label(), m.size, m.state)?;
        }
        if !self.candidates.is_empty() {
            writeln!(
                f,
                "  Other disks (a new member needs {} or more):",
                self.member_size
            )?;
        }
        for c in &self.candidates {
            let erase = match c.fit {
                Fit::HoldsData { .. } => format!(" {}", c.disk),
                _ => String::new(),
            };
            writeln!(f, "    {:<8} {}: {}{erase}", c.disk, c.summary, c.fit)?;
        }
        Ok(())
    }
}

impl fmt::Display for Survey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.arrays.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// Why md cannot grow an array of `level` by adding members the way
/// nasforge does it; None when it can.
pub fn cannot_grow(level: Level) -> Option<&'static str> {
    match level {
        Level::Single => Some(
            "a single disk has no md array to add disks to; set up a new array with the new disks instead",
        ),
        Level::Raid0 => Some(
            "md grows raid0 only by converting it to raid4 and back, with no redundancy while it runs; nasforge does not do that. Back up the data, then set the array up again with more disks",
        ),
        Level::Raid10 => Some(
            "whether md can reshape a raid10 depends on its layout and the kernel, and nasforge does not attempt it. Back up the data, then set the array up again with more disks",
        ),
        Level::Pool => Some(
            "a pool takes more disks when they are added to its recipe entry and it is set up again; nasforge does not add a disk to a running pool",
        ),
        Level::Raid1
        | Level::Raid5
        | Level::Raid6
        | Level::Raidz1
        | Level::Raidz2
        | Level::Raidz3
        | Level::Mirror
        | Level::Stripe => None,
    }
}

/// Why nasforge does not grow the nested array `array` (raid50, raid60),
/// through the array or one of its legs.
pub fn nested_cannot_grow(array: &str) -> String {
    format!(
        "'{array}' is made of legs striped by a raid0 (its legs are {array}-0, {array}-1, ...): growing it means reshaping every leg by the same number of disks and then growing the raid0 over them, and one leg grown alone leaves them unequal. nasforge does not do that; back up the data and set '{array}' up again with more disks. A disk added with `nasforge-setup replace` after a failure joins a leg as a hot spare"
    )
}
