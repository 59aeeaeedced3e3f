//! An md array another machine made, adopted as it is (`import = true`):
//! which of the arrays found on the disks the recipe means, whether it is
//! what the recipe says it is, and whether md can run it without being
//! forced. Nothing here plans a write to its members.

use super::estimates::{capacity, throughput, tolerance};
use super::members::refuse;
use super::{ArrayPlan, Imported, Member, Refusal, Tolerance};
use crate::machine::disks::{Disk, InUse, Inventory};
use crate::machine::existing::ExistingMd;
use crate::size::Size;
use crate::spec::{Array, Level};

/// The levels an array can be adopted at; each is written as md writes
/// it (`raid5`).
const ADOPTABLE: [Level; 5] = [
    Level::Raid0,
    Level::Raid1,
    Level::Raid5,
    Level::Raid6,
    Level::Raid10,
];

/// The hex digits of an md UUID, whatever separates them (mdadm prints
/// colons, libblkid dashes).
fn uuid_digits(uuid: &str) -> String {
    uuid.chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The arrays found, as setup's log and a refusal list them.
fn found(inventory: &Inventory) -> String {
    if inventory.existing.is_empty() {
        "no md superblock is on any disk".to_string()
    } else {
        let all: Vec<String> = inventory.existing.iter().map(|e| e.to_string()).collect();
        format!("the disks hold: {}", all.join("; "))
    }
}

/// Why a disk holding a member cannot be taken, if it cannot: used by the
/// system, or by something other than md (an assembly of the array itself
/// is stopped by the import step).
fn in_use(disk: &Disk) -> Option<&InUse> {
    disk.in_use
        .iter()
        .find(|u| !matches!(u, InUse::Held { by, .. } if by.starts_with("md")))
}

/// The one thing on the disks an import entry means, or its refusal:
/// `none` when nothing matches, or the matches listed when several do
/// (`what` names them, `id` is what `uuid = "…"` takes).
pub(super) fn the_one<'a, T: std::fmt::Display>(
    index: usize,
    spec: &Array,
    matching: &[&'a T],
    none: &str,
    (what, id): (&str, &str),
) -> Result<&'a T, Vec<Refusal>> {
    let at = |key: &str| Some(format!("storage.arrays[{index}].{key}"));
    match matching {
        [one] => Ok(one),
        [] => Err(vec![Refusal {
            at: at(if spec.uuid.is_some() { "uuid" } else { "name" }),
            ..refuse(spec, None, none.to_string())
        }]),
        _ => {
            let all: Vec<String> = matching.iter().map(|m| m.to_string()).collect();
            Err(vec![Refusal {
                at: at("name"),
                ..refuse(
                    spec,
                    None,
                    format!(
                        "{} {what} on the disks are called '{}': {}; say which with uuid = \"{id}\"",
                        matching.len(),
                        spec.name,
                        all.join("; ")
                    ),
                )
            }])
        }
    }
}

/// What a read-only look inside the array says against the recipe's
/// `filesystem`, when it says no.
fn looked_inside(existing: &ExistingMd, wanted: &str) -> Option<String> {
    const MADE: [&str; 3] = ["ext4", "xfs", "btrfs"];
    if let Some(why) = &existing.unreadable {
        return Some(format!(
            "it could not be looked into (assembled read-only, nothing written): {why}"
        ));
    }
    let found = existing.holds.as_deref()?;
    match found {
        _ if found == wanted => None,
        "" => Some(format!(
            "a read-only look found no filesystem libblkid knows on the array; nasforge adopts an array with {} directly on it",
            MADE.join(", ")
        )),
        _ if MADE.contains(&found) => Some(format!(
            "the array holds {} {found} filesystem, not {wanted}; if it is the one you mean, set filesystem = \"{found}\"",
            crate::machine::signature::a_or_an(found)
        )),
        _ => Some(format!(
            "the array holds {}, not a filesystem: nasforge adopts an array with {} directly on it, not LVM or encryption over it (as a Synology's SHR has)",
            crate::machine::printable(found),
            MADE.join(", ")
        )),
    }
}

pub(super) fn plan_import(
    index: usize,
    spec: &Array,
    inventory: &Inventory,
    taken: &[String],
) -> Result<ArrayPlan, Vec<Refusal>> {
    let at = |key: &str| Some(format!("storage.arrays[{index}].{key}"));
    let matching: Vec<&ExistingMd> = inventory
        .existing
        .iter()
        .filter(|e| match &spec.uuid {
            Some(u) => uuid_digits(u) == uuid_digits(&e.uuid),
            None => e.short_name() == Some(&spec.name) || e.name.as_deref() == Some(&spec.name),
        })
        .collect();
    let wanted = match &spec.uuid {
        Some(u) => format!("with UUID {u}"),
        None => format!("called '{}' (or '<host>:{}')", spec.name, spec.name),
    };
    let existing = the_one(
        index,
        spec,
        &matching,
        &format!(
            "no md array {wanted} is on the disks to import; {}. Name the one you mean with uuid = \"…\"",
            found(inventory)
        ),
        ("md arrays", "…"),
    )?;
    if let Some(role) = existing.system_array() {
        return Err(vec![refuse(
            spec,
            None,
            format!(
                "the array on the disks is {existing}: an operating system's {role} partition, which nasforge does not adopt. A Synology keeps the files on the arrays of partitions 5 and up, with LVM over them (`sudo mdadm --examine --scan` lists every array)"
            ),
        )]);
    }
    let mut refusals = Vec::new();
    let on_disk = ADOPTABLE
        .into_iter()
        .find(|level| level.to_string() == existing.level);
    if on_disk.is_none() {
        refusals.push(refuse(
            spec,
            None,
            format!(
                "the array on the disks is {existing}: nasforge adopts raid0, raid1, raid5, raid6 and raid10, not {}",
                existing.level
            ),
        ));
    } else if on_disk != Some(spec.level) {
        refusals.push(Refusal {
            at: at("level"),
            ..refuse(
                spec,
                None,
                format!(
                    "the array on the disks is {existing}, not {}; if it is the one you mean, set level = \"{}\"",
                    spec.level, existing.level
                ),
            )
        });
    }
    if let Some(why) = existing.unstartable() {
        refusals.push(refuse(spec, None, format!("cannot be imported: {why}")));
    }
    if let Some(why) = looked_inside(existing, &spec.filesystem.to_string()) {
        refusals.push(Refusal {
            at: at("filesystem"),
            ..refuse(spec, None, why)
        });
    }
    let mut members: Vec<(&Disk, Option<u32>)> = Vec::new();
    for m in existing.assembled() {
        let Some(disk) = inventory.disks.iter().find(|d| d.name == m.disk) else {
            refusals.push(refuse(
                spec,
                Some(&m.disk),
                "holds a member but is not among the disks found".into(),
            ));
            continue;
        };
        if taken.contains(&disk.name) {
            refusals.push(refuse(
                spec,
                Some(&disk.name),
                "holds a member of this array, but an earlier entry of the recipe takes the disk"
                    .into(),
            ));
        } else if let Some(why) = in_use(disk) {
            refusals.push(refuse(
                spec,
                Some(&disk.name),
                format!("holds a member, but {why}"),
            ));
        }
        let partition = disk
            .partitions
            .iter()
            .find(|p| p.name == m.device)
            .map(|p| p.number);
        if members.iter().any(|(d, _)| d.name == disk.name) {
            refusals.push(refuse(
                spec,
                Some(&disk.name),
                "holds two members of the array; an array whose copies share a disk is not adopted"
                    .into(),
            ));
        }
        members.push((disk, partition));
    }
    // Disks with an older copy of a member are the array's too: no other
    // entry takes them, and they are left as they are.
    let left_behind: Vec<String> = existing
        .stale()
        .map(|m| m.disk.clone())
        .filter(|d| !members.iter().any(|(m, _)| m.name == *d))
        .collect();
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let size_of = |device: &str| -> u64 {
        inventory
            .disks
            .iter()
            .find_map(|d| {
                (d.name == device).then_some(d.size.0).or_else(|| {
                    d.partitions
                        .iter()
                        .find(|p| p.name == device)
                        .map(|p| p.size.0)
                })
            })
            .unwrap_or(0)
    };
    let current: Vec<u64> = existing.current().map(|m| size_of(&m.device)).collect();
    let mut sizes = current.clone();
    sizes.resize(
        existing.raid_devices.max(current.len()),
        current.iter().copied().min().unwrap_or(0),
    );
    let (capacity, lost) = capacity(spec.level, &sizes);
    let mut warnings = Vec::new();
    let missing = existing.missing();
    if missing > 0 {
        warnings.push(format!(
            "{missing} of its {} members {} not here: it runs degraded, and survives {} more failed disk(s) until a member is added",
            existing.raid_devices,
            if missing == 1 { "is" } else { "are" },
            existing.survives() - missing
        ));
    }
    for stale in existing.stale() {
        warnings.push(format!(
            "{} holds an older copy of a member (md left it out when the array last ran); it is left as it is",
            stale.device
        ));
    }
    if let Some(host) = existing
        .name
        .as_deref()
        .and_then(|n| n.split_once(':'))
        .map(|(h, _)| h)
    {
        warnings.push(format!(
            "it keeps its name '{}' on the disks (made on '{}'), so the disks can go back to that machine; here it is /dev/md/{}",
            existing.name.as_deref().unwrap_or_default(),
            crate::machine::printable(host),
            spec.name
        ));
    }
    warnings.push(format!(
        "its files keep the owners and modes they had on the old machine; check them with ls -ln {} before sharing",
        spec.mount
    ));
    let disks: Vec<&Disk> = members.iter().map(|(d, _)| *d).collect();
    Ok(ArrayPlan {
        spec: spec.clone(),
        members: members
            .iter()
            .map(|(d, _)| Member {
                disk: (*d).clone(),
                erase: false,
                spare: false,
                parity: false,
            })
            .collect(),
        capacity,
        lost_to_mixed_sizes: Size(lost.0),
        tolerance: {
            let whole = tolerance(spec.level, existing.raid_devices);
            Tolerance {
                guaranteed: whole.guaranteed.saturating_sub(missing),
                best_case: whole.best_case.saturating_sub(missing),
            }
        },
        throughput: throughput(spec.level, 1, &disks, inventory),
        warnings,
        skipped: Vec::new(),
        ashift: None,
        joined: Vec::new(),
        imported: Some(Imported {
            uuid: existing.uuid.clone(),
            name: existing.name.clone(),
            devices: existing.assembled().map(|m| m.device.clone()).collect(),
            raid_devices: existing.raid_devices,
            partitions: members.iter().map(|(d, p)| (d.name.clone(), *p)).collect(),
            degraded: missing > 0,
            left_behind,
            force: false,
            locked: Vec::new(),
        }),
    })
}
