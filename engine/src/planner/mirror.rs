//! `[storage.system_mirror]`: which disk the system is mirrored onto, and
//! the layout of the disk it runs from that the copy follows; or a refusal
//! that says why not.

use super::Refusal;
use crate::machine::disks::{Disk, InUse, Inventory, Partition};
use crate::machine::signature::Signature;
use crate::matching;
use crate::spec::{SYSTEM_MIRROR_NAME, SystemMirror};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MirrorPlan {
    pub spec: SystemMirror,
    /// The disk the system runs from now.
    pub system: Disk,
    /// Its EFI system partition and root partition, copied in place.
    pub esp: Partition,
    pub root: Partition,
    /// The root filesystem's UUID now: the marker that switches GRUB to the
    /// mirror is named after it (see `steps::mirror`).
    pub root_uuid: String,
    /// The disk the system is mirrored onto.
    pub disk: Disk,
    /// It holds something the recipe allowed erasing (`wipe = true`).
    pub erase: bool,
}

const AT: &str = "storage.system_mirror";

fn refuse(disk: Option<&str>, reason: String) -> Refusal {
    Refusal {
        array: SYSTEM_MIRROR_NAME.into(),
        kept: false,
        disk: disk.map(str::to_string),
        reason,
        at: Some(format!("{AT}.match")),
    }
}

/// Bytes after the last partition for GPT's backup table.
const BACKUP_GPT: u64 = 1 << 20;

pub(super) fn plan_mirror(
    spec: &SystemMirror,
    inventory: &Inventory,
    taken: &[String],
) -> Result<MirrorPlan, Refusal> {
    let system = system_disk(inventory)?;
    let (esp, root, root_uuid) = layout(system)?;
    let matched: Vec<&Disk> = inventory
        .disks
        .iter()
        .filter(|d| {
            d.name != system.name
                && !taken.contains(&d.name)
                && matching::mismatch(&spec.disk, d).is_none()
        })
        .collect();
    let disk = match matched.as_slice() {
        [one] => *one,
        [] => {
            return Err(refuse(
                None,
                format!(
                    "no disk but the system's own ({}) matches {AT}.match; `nasforge-setup status` lists the disks with their model and serial to match on",
                    system.name
                ),
            ));
        }
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|d| format!("{} ({})", d.name, d.summary()))
                .collect();
            return Err(refuse(
                None,
                format!(
                    "{AT}.match fits {} disks ({}); the system is mirrored onto one, so match it by its serial",
                    several.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    if let Some(why) = disk.in_use.first() {
        return Err(refuse(
            Some(&disk.name),
            format!("it is in use ({why}); the system is only mirrored onto a disk nothing uses"),
        ));
    }
    let erase = !disk.is_blank();
    if erase && !spec.wipe {
        return Err(refuse(
            Some(&disk.name),
            format!(
                "it holds {}; the mirror erases it, so check that nothing on it is needed and set {AT}.wipe = true",
                disk.describe_contents()
            ),
        ));
    }
    if disk.logical_block_size != system.logical_block_size {
        return Err(refuse(
            Some(&disk.name),
            format!(
                "its sectors are {} bytes and those of {} {}; the partitions are copied sector for sector, so mirror onto a disk with {}-byte sectors",
                disk.logical_block_size,
                system.name,
                system.logical_block_size,
                system.logical_block_size
            ),
        ));
    }
    let needed = root.start + root.size.bytes() + BACKUP_GPT;
    if disk.size.bytes() < needed {
        return Err(refuse(
            Some(&disk.name),
            format!(
                "it is {}, and the system's partitions on {} need {}: mirror onto a disk at least as large",
                disk.size,
                system.name,
                crate::size::Size(needed)
            ),
        ));
    }
    Ok(MirrorPlan {
        spec: spec.clone(),
        system: system.clone(),
        esp: esp.clone(),
        root: root.clone(),
        root_uuid,
        disk: disk.clone(),
        erase,
    })
}

/// The one disk holding the running root filesystem.
fn system_disk(inventory: &Inventory) -> Result<&Disk, Refusal> {
    let boot: Vec<&Disk> = inventory
        .disks
        .iter()
        .filter(|d| d.in_use.contains(&InUse::Boot))
        .collect();
    match boot.as_slice() {
        [one] => Ok(*one),
        [] => Err(refuse(
            None,
            "no disk holds the running root filesystem (is it on the network or in memory?), so there is no system to mirror".into(),
        )),
        several => Err(refuse(
            None,
            format!(
                "the root filesystem already spans {} ({}); the system is mirrored from one disk",
                several.len(),
                several
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// nasforge's PC layout on the system disk: partition 1 the EFI system
/// partition (FAT), 2 the ext4 root, nothing else. Anything else was not
/// laid out by nasforge and is not copied blind.
fn layout(system: &Disk) -> Result<(&Partition, &Partition, String), Refusal> {
    let fs = |p: &Partition, want: &str| {
        p.contents.iter().find_map(|s| match s {
            Signature::Filesystem { fstype, uuid, .. } if fstype == want => {
                Some(uuid.clone().unwrap_or_default())
            }
            _ => None,
        })
    };
    if let [esp, root] = system.partitions.as_slice()
        && (esp.number, root.number) == (1, 2)
        && fs(esp, "vfat").is_some()
        && let Some(uuid) = fs(root, "ext4").filter(|u| !u.is_empty())
    {
        return Ok((esp, root, uuid));
    }
    Err(refuse(
        Some(&system.name),
        format!(
            "the system disk holds {}, not the layout of nasforge's PC image (partition 1 the EFI system partition, 2 the ext4 root, nothing else), so it is not mirrored",
            system.describe_contents()
        ),
    ))
}
