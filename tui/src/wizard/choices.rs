//! What the choices on screen mean: one array over the chosen disks and the
//! shares on it, as the same `Storage` and `Share` types a recipe holds,
//! planned by the same planner `--unattended` uses. Pure.

use super::kept;
use nasforge_engine::machine::disks::{Disk, Inventory};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::planner::{self, ArrayPlan, Plan};
use nasforge_engine::spec::{
    self, Array, Count, DiskMatch, Filesystem, Level, Mode, Share, Storage,
};

/// The levels offered, most commonly wanted first.
pub const LEVELS: [Level; 6] = [
    Level::Raid1,
    Level::Raid5,
    Level::Raid6,
    Level::Raid10,
    Level::Raid0,
    Level::Single,
];

pub const FILESYSTEMS: [Filesystem; 3] = [Filesystem::Ext4, Filesystem::Xfs, Filesystem::Btrfs];

/// Why a disk cannot be chosen; None when it can.
pub fn ineligible(disk: &Disk) -> Option<String> {
    if !disk.in_use.is_empty() {
        let why: Vec<String> = disk.in_use.iter().map(ToString::to_string).collect();
        Some(format!("never used: {}", why.join(", ")))
    } else if disk.serial.is_none() {
        Some("it reports no serial number, so setup could not be sure to find it again".into())
    } else {
        None
    }
}

/// A few words for the table's "holds" column.
pub fn holds(disk: &Disk) -> String {
    if disk
        .in_use
        .contains(&nasforge_engine::machine::disks::InUse::Boot)
    {
        return "the system".into();
    }
    let contents = disk.all_contents();
    // What is inside partitions says more than the table holding them.
    let best = contents
        .iter()
        .find(|(_, s)| !matches!(s, Signature::PartitionTable { .. }))
        .or(contents.first());
    let Some((_, sig)) = best else {
        return if disk.partitions.is_empty() {
            "empty".into()
        } else {
            format!("{} partitions", disk.partitions.len())
        };
    };
    let text = match sig {
        Signature::Filesystem {
            fstype,
            label: Some(l),
            ..
        } => format!("{fstype} '{l}'"),
        Signature::Filesystem { fstype, .. } => fstype.clone(),
        Signature::MdMember { name: Some(n), .. } => format!("md of '{n}'"),
        Signature::MdMember { .. } => "md member".into(),
        Signature::PartitionTable { scheme } => format!("{scheme} table"),
        Signature::ZfsMember => "ZFS".into(),
        Signature::LvmMember => "LVM".into(),
        Signature::Luks => "LUKS".into(),
        Signature::Swap => "swap".into(),
        Signature::Probed { blkid_type, .. } => blkid_type.clone(),
        Signature::Unrecognised { .. } => "unknown data".into(),
    };
    match contents.len() {
        1 => text,
        n => format!("{text} +{}", n - 1),
    }
}

/// The level to suggest for these disks, and why, in the field notes'
/// terms: a mirror for two, parity for spinning disks, striped mirrors for
/// an even number of SSDs.
pub fn recommend(disks: &[&Disk]) -> (Level, &'static str) {
    let n = disks.len();
    let ssds = disks.iter().all(|d| !d.rotational);
    match n {
        0 | 1 => (
            Level::Single,
            "one disk: a filesystem straight on it, with no second copy",
        ),
        2 => (
            Level::Raid1,
            "two disks: a mirror, so either one can fail without losing data",
        ),
        _ if ssds && n.is_multiple_of(2) => (
            Level::Raid10,
            "an even number of SSDs: striped mirrors are fast and rebuild quickly, without raid5's extra writes",
        ),
        3..=5 => (
            Level::Raid5,
            "three to five disks: one disk's worth of parity gives the most space that survives a failed disk",
        ),
        _ => (
            Level::Raid6,
            "six or more disks: two disks of parity, because a second disk can fail during a long rebuild",
        ),
    }
}

/// The md name for an array mounted at `mount`: its last directory, in the
/// characters md allows ("/srv/data" is "data").
pub fn array_name(mount: &str) -> String {
    let last = mount
        .rsplit('/')
        .find(|c| !c.is_empty())
        .unwrap_or_default();
    kept::clean_name(last).unwrap_or_else(|| "data".into())
}

/// One array over exactly the chosen disks, named by their serials so the
/// unattended run finds the same disks; none when no disk is chosen (the
/// kept disks alone). Erasing is allowed when a chosen disk holds data:
/// the review screen does not hand the spec on before the user typed that
/// disk's name.
pub fn storage(chosen: &[&Disk], level: Level, filesystem: Filesystem, mount: &str) -> Storage {
    let serials: Vec<&str> = chosen.iter().filter_map(|d| d.serial.as_deref()).collect();
    let array = (!chosen.is_empty()).then(|| Array {
        vdevs: None,
        name: array_name(mount),
        level,
        disks: DiskMatch {
            serial: Some(spec::glob::any_of(&serials)),
            count: Count::Exactly(chosen.len()),
            ..DiskMatch::default()
        },
        filesystem,
        mount: mount.to_string(),
        wipe: chosen.iter().any(|d| !d.is_blank()),
    });
    Storage {
        mode: Mode::Unattended,
        arrays: array.into_iter().collect(),
        mailaddr: None,
        alert_program: None,
        spin_down: nasforge_engine::spec::SpinDown::Off,
        disks: Vec::new(),
        usb_quirks: Vec::new(),
    }
}

/// Checks the spec and plans it; the errors are sentences for the screen.
pub fn plan(
    storage: &Storage,
    shares: &[Share],
    inventory: &Inventory,
    chosen: &[&Disk],
) -> Result<Plan, Vec<String>> {
    // Serial numbers are how the spec names the chosen disks; some USB
    // bridges give every disk behind them the same one. A twin the system
    // uses is harmless: the planner never takes such a disk.
    let twins: Vec<&str> = inventory
        .disks
        .iter()
        .filter(|d| d.in_use.is_empty() && !chosen.iter().any(|c| c.name == d.name))
        .filter(|d| {
            chosen
                .iter()
                .any(|c| c.serial.is_some() && c.serial == d.serial)
        })
        .map(|d| d.name.as_str())
        .collect();
    if !twins.is_empty() {
        let names: Vec<&str> = chosen.iter().map(|d| d.name.as_str()).collect();
        return Err(vec![format!(
            "the chosen disks ({}) share serial numbers with {}, so setup could not tell them apart: choose those too, or neither",
            names.join(", "),
            twins.join(", ")
        )]);
    }
    // The messages say how to fix the value on screen; the recipe paths
    // they come with (storage.arrays[0].mount) would mean nothing here.
    let problems = spec::validate(storage, shares);
    if !problems.is_empty() {
        return Err(problems.into_iter().map(|p| p.message).collect());
    }
    planner::plan(storage, shares, inventory)
        .map_err(|refusals| refusals.iter().map(ToString::to_string).collect())
}

/// A level as the layout screen offers it: its plan for the chosen disks,
/// or why it does not fit them.
pub struct LevelOption {
    pub level: Level,
    pub outcome: Result<ArrayPlan, String>,
}

pub fn level_options(
    inventory: &Inventory,
    chosen: &[&Disk],
    filesystem: Filesystem,
    mount: &str,
) -> Vec<LevelOption> {
    let n = chosen.len();
    LEVELS
        .iter()
        .map(|&level| {
            let outcome = if n < level.min_disks() {
                Err(format!("needs at least {} disks", level.min_disks()))
            } else if level.max_disks().is_some_and(|max| n > max) {
                Err("takes exactly one disk".into())
            } else {
                plan(
                    &storage(chosen, level, filesystem, mount),
                    &[],
                    inventory,
                    chosen,
                )
                .map(|mut p| p.arrays.remove(0))
                .map_err(|e| e.join("; "))
            };
            LevelOption { level, outcome }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_names_come_from_the_mount_point() {
        assert_eq!(array_name("/srv/data"), "data");
        assert_eq!(array_name("/srv/media files/"), "mediafiles");
        assert_eq!(array_name("/"), "data");
        assert_eq!(array_name("/mnt/--x"), "x");
    }
}
