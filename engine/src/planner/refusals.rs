//! The words of a refusal: what is in the way and what to change.

use crate::machine::disks::{Disk, Inventory, MdArray};
use crate::machine::signature::Signature;
use crate::spec::Array;

/// A disk the array's rules match, by what may be done with it.
pub(super) enum Candidate<'a> {
    Usable {
        disk: &'a Disk,
        erase: bool,
    },
    HoldsData(&'a Disk),
    InUse(&'a Disk),
    /// Failing by SMART's account (`Inventory::failing`), with why.
    Failing(&'a Disk, &'a str),
}

/// Why a disk holding data is refused when the recipe does not allow
/// erasing it. A member of an md array with the name the recipe gives
/// `array` is most likely that very array (the same recipe on a card
/// flashed again, or an older nasforge's): keeping it comes first.
pub(super) fn holds_data(index: usize, d: &Disk, array: &str) -> String {
    let same_name = d.all_contents().into_iter().find_map(|(_, sig)| match sig {
        Signature::MdMember { name: Some(n), .. }
            if n.rsplit_once(':').map_or(n.as_str(), |(_, short)| short) == array =>
        {
            Some(n.clone())
        }
        _ => None,
    });
    let keep = match same_name {
        Some(n) => format!(
            "it is a member of the md array '{n}', which has this array's name: to keep that array as it is, with its files (this recipe's own, set up before, or an old NAS's), put import = true in storage.arrays[{index}] in place of its disks; to erase it, "
        ),
        None => String::new(),
    };
    format!(
        "holds {} and the recipe does not allow erasing it; {keep}back it up and set wipe = true in storage.arrays[{index}], or take the disk out",
        d.describe_contents()
    )
}

/// Why a disk SMART reports failing is refused, and how to use it anyway.
pub(super) fn failing(d: &Disk, why: &str) -> String {
    let allow = match &d.serial {
        Some(serial) => format!(
            "to build on it all the same, add its serial to [storage]: allow_failing = [\"{serial}\"]"
        ),
        None => "it has no serial for storage.allow_failing to name, so it cannot be used".into(),
    };
    // The refusal is shown after the disk's kernel name already.
    format!(
        "the {} with serial {} is failing by SMART's account: {why}. Nothing was written. Replace it, or, knowing its data may be lost, {allow}",
        d.model.as_deref().unwrap_or("disk of unknown model"),
        d.serial.as_deref().unwrap_or("unknown")
    )
}

/// Why a disk the system uses is left out.
pub(super) fn in_use(d: &Disk) -> String {
    let why: Vec<String> = d.in_use.iter().map(ToString::to_string).collect();
    format!("never used: {}", why.join(", "))
}

/// Why an array (or one of its legs, `name`) cannot be made: an md array
/// of that name is there already.
pub(super) fn name_taken(
    index: usize,
    name: &str,
    existing: &MdArray,
    inventory: &Inventory,
) -> String {
    let device = format!("/dev/md/{name}");
    let members: Vec<String> = existing
        .members
        .iter()
        .map(|m| {
            let disk = inventory
                .disks
                .iter()
                .find(|d| d.name == *m || d.partitions.iter().any(|p| p.name == *m));
            match disk {
                Some(d) if d.name != *m => format!("{m} on {} ({})", d.name, d.summary()),
                Some(d) => format!("{m} ({})", d.summary()),
                None => m.clone(),
            }
        })
        .collect();
    let members = if members.is_empty() {
        "no members listed".to_string()
    } else {
        members.join(", ")
    };
    format!(
        "{device} already exists ({}, from {members}): an array of other disks, probably an old NAS's, has the name this recipe gives its new array, and setting up would format it. Nothing was changed. To keep it, rename the new array (storage.arrays[{index}].name) or take its disks out; to erase it and build the new array, set wipe = true in storage.arrays[{index}] and stop it (`mdadm --stop {device}`) just before running `nasforge-setup --unattended` again",
        existing.device
    )
}

pub(super) fn describe_rules(spec: &Array) -> String {
    toml::to_string(spec.disks())
        .map(|t| t.lines().collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

pub(super) fn shortfall(
    needed: usize,
    usable: usize,
    rules: &str,
    candidates: &[Candidate],
    mismatched: &[String],
) -> String {
    let mut why = vec![format!(
        "needs {needed} disks matching {{ {rules} }}, but only {usable} can be used"
    )];
    for c in candidates {
        match c {
            Candidate::Usable { disk, .. } => why.push(format!("{} can be used", disk.name)),
            Candidate::HoldsData(d) => why.push(format!("{} holds data (wipe is false)", d.name)),
            Candidate::InUse(d) => why.push(format!("{} is in use by the system", d.name)),
            Candidate::Failing(d, _) => why.push(format!("{} is failing by SMART", d.name)),
        }
    }
    if !mismatched.is_empty() {
        why.push(format!("not matching: {}", mismatched.join(", ")));
    }
    why.join("; ")
}
