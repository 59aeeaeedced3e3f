//! Which disks an array takes: the ones its rules match that are free and
//! blank (or may be erased), as many as its count asks for, or refusals
//! that name each disk in the way.

use super::estimates::DOUBLE_PARITY_FROM;
use super::estimates::{capacity_in, throughput, tolerance_in};
use super::refusals::{self, Candidate};
use super::{ArrayPlan, Member, Refusal, ashift};
use crate::machine::disks::{Disk, Inventory};
use crate::machine::zfs::ZfsOnBoard;
use crate::matching;
use crate::size::Size;
use crate::spec::{Array, Count, Level, Transport};

pub(super) fn refuse(spec: &Array, disk: Option<&str>, reason: String) -> Refusal {
    Refusal {
        array: spec.name.clone(),
        kept: false,
        disk: disk.map(str::to_string),
        reason,
        at: None,
    }
}

pub(super) fn plan_array(
    index: usize,
    spec: &Array,
    inventory: &Inventory,
    taken: &[String],
) -> Result<ArrayPlan, Vec<Refusal>> {
    if spec.is_zfs()
        && let ZfsOnBoard::Unavailable(why) = &inventory.zfs
    {
        return Err(vec![refuse(
            spec,
            None,
            format!("a ZFS pool cannot be built on this board: {why}"),
        )]);
    }
    // The steps address the array as /dev/md/<name>: with another array
    // already there under that name, "create" would find it done and mkfs
    // would format it.
    if spec.level != Level::Single
        && !spec.is_zfs()
        && let Some((name, existing)) = spec.md_names().into_iter().find_map(|name| {
            let existing = inventory
                .arrays
                .iter()
                .find(|a| a.name.as_deref() == Some(name.as_str()))?;
            Some((name, existing))
        })
    {
        return Err(vec![refuse(
            spec,
            None,
            refusals::name_taken(index, &name, existing, inventory),
        )]);
    }
    let (candidates, mismatched) = candidates(spec, inventory, taken);
    let mut skipped = Vec::new();
    let mut refused = Vec::new();
    for c in &candidates {
        match c {
            Candidate::InUse(d) => skipped.push(format!("{}: {}", d.name, refusals::in_use(d))),
            Candidate::HoldsData(d) if spec.disks().count == Count::All => refused.push(refuse(
                spec,
                Some(&d.name),
                refusals::holds_data(index, d, &spec.name),
            )),
            // "All" is every matching disk: one left out would surprise.
            Candidate::Failing(d, why) if spec.disks().count == Count::All => {
                refused.push(refuse(spec, Some(&d.name), refusals::failing(d, why)))
            }
            Candidate::Failing(d, why) => {
                skipped.push(format!("{}: failing by SMART ({why})", d.name))
            }
            _ => {}
        }
    }
    // Blank disks first: with a count, a disk with data is only taken when
    // there are not enough blank ones.
    let mut usable: Vec<(&Disk, bool)> = usable(&candidates).collect();
    usable.sort_by_key(|(_, erase)| *erase);
    let wanted = match spec.disks().count {
        Count::Exactly(n) => n,
        Count::All => usable.len(),
    };
    check_count(
        index,
        spec,
        &usable,
        wanted,
        &candidates,
        &mismatched,
        &mut refused,
    );
    if !refused.is_empty() {
        return Err(refused);
    }
    let chosen = choose(usable, wanted, &candidates, inventory, &mut skipped);
    Ok(array_plan(spec, &chosen, inventory, skipped))
}

/// The disks not taken by an earlier array, sorted by what they hold, and
/// the ones the rules do not match, with the rule each fails.
pub(super) fn candidates<'a>(
    spec: &Array,
    inventory: &'a Inventory,
    taken: &[String],
) -> (Vec<Candidate<'a>>, Vec<String>) {
    let mut mismatched = Vec::new();
    let mut candidates = Vec::new();
    for disk in &inventory.disks {
        if taken.contains(&disk.name) {
            continue;
        }
        if let Some(why) = matching::mismatch(spec.disks(), disk) {
            mismatched.push(format!("{} ({why})", disk.name));
            continue;
        }
        candidates.push(if !disk.in_use.is_empty() {
            Candidate::InUse(disk)
        } else if let Some(why) = inventory.failing.get(&disk.name) {
            Candidate::Failing(disk, why)
        } else if disk.is_blank() {
            Candidate::Usable { disk, erase: false }
        } else if spec.wipe {
            Candidate::Usable { disk, erase: true }
        } else {
            Candidate::HoldsData(disk)
        });
    }
    (candidates, mismatched)
}

/// The candidates that may be taken, and whether each is to be erased.
pub(super) fn usable<'c, 'a>(
    candidates: &'c [Candidate<'a>],
) -> impl Iterator<Item = (&'a Disk, bool)> + 'c {
    candidates.iter().filter_map(|c| match c {
        Candidate::Usable { disk, erase } => Some((*disk, *erase)),
        _ => None,
    })
}

/// Refuses an array that cannot get as many disks as its count or level
/// needs, or gets more than `single` takes. Disks refused already explain
/// the shortfall, so the level is only checked when there are none.
fn check_count(
    index: usize,
    spec: &Array,
    usable: &[(&Disk, bool)],
    wanted: usize,
    candidates: &[Candidate],
    mismatched: &[String],
    refused: &mut Vec<Refusal>,
) {
    let level = spec.level;
    let min = level.min_disks();
    let needed = min * spec.vdev_count() + spec.spares;
    // Active disks past an even split into the groups.
    let r = wanted.saturating_sub(spec.spares) % spec.vdev_count();
    let rules = refusals::describe_rules(spec);
    if let Count::Exactly(n) = spec.disks().count
        && usable.len() < n
    {
        for c in candidates {
            match c {
                Candidate::HoldsData(d) => refused.push(refuse(
                    spec,
                    Some(&d.name),
                    refusals::holds_data(index, d, &spec.name),
                )),
                Candidate::Failing(d, why) => {
                    refused.push(refuse(spec, Some(&d.name), refusals::failing(d, why)))
                }
                _ => {}
            }
        }
        refused.push(refuse(
            spec,
            None,
            refusals::shortfall(n, usable.len(), &rules, candidates, mismatched),
        ));
    } else if refused.is_empty() && wanted < needed {
        let what = match (spec.vdev_count(), spec.spares) {
            (1, 0) => format!("{min} disks"),
            (1, s) => format!("{min} active disks and {s} spare(s)"),
            (v, s) => format!(
                "{min} active disks in each of {v} {}s and {s} spare(s)",
                group(spec)
            ),
        };
        refused.push(refuse(
            spec,
            None,
            format!(
                "{level} needs at least {what} but {} {}: {}",
                wanted,
                if wanted == 1 {
                    "is usable"
                } else {
                    "are usable"
                },
                refusals::shortfall(needed, usable.len(), &rules, candidates, mismatched)
            ),
        ));
    } else if refused.is_empty() && r != 0 {
        // Only with count = "all": a count is checked with the recipe.
        let vdevs = spec.vdev_count();
        let spares = match spec.spares {
            0 if !level.is_redundant() => String::new(),
            0 => format!(", or spares = {r} to keep them as hot spares"),
            s => format!(", or spares = {}", s + r),
        };
        refused.push(refuse(
            spec,
            None,
            format!(
                "{wanted} disks are usable, and {} active ones{} do not split into {vdevs} {}s of the same width: set count = {} to leave {r} out{spares}",
                wanted - spec.spares,
                match spec.spares {
                    0 => String::new(),
                    s => format!(" besides spares = {s}"),
                },
                group(spec),
                wanted - r,
            ),
        ));
    } else if refused.is_empty()
        && let Some(max) = level.max_disks()
        && wanted > max
    {
        let names: Vec<&str> = usable.iter().map(|(d, _)| d.name.as_str()).collect();
        refused.push(refuse(
            spec,
            None,
            format!("{level} takes one disk but {} match ({}); set count = 1 or narrow the rules (model, serial, size)", wanted, names.join(", ")),
        ));
    }
}

/// What an array's groups are called: a pool's vdevs, an md array's legs.
fn group(spec: &Array) -> &'static str {
    if spec.is_zfs() { "vdev" } else { "leg" }
}

/// The first `wanted` usable disks, as members in discovery order; the
/// usable ones left over are noted in `skipped`.
pub(super) fn choose<'a>(
    usable: Vec<(&'a Disk, bool)>,
    wanted: usize,
    candidates: &[Candidate<'a>],
    inventory: &Inventory,
    skipped: &mut Vec<String>,
) -> Vec<(&'a Disk, bool)> {
    let mut chosen: Vec<(&Disk, bool)> = usable.into_iter().take(wanted).collect();
    // Members in discovery order, however they were picked.
    chosen.sort_by_key(|(d, _)| inventory.disks.iter().position(|o| o.name == d.name));
    for (d, _) in self::usable(candidates) {
        if !chosen.iter().any(|(c, _)| c.name == d.name) {
            skipped.push(format!(
                "{}: not needed (count = {wanted}; blank disks are taken first)",
                d.name
            ));
        }
    }
    chosen
}

/// The plan of an array made of `chosen`.
fn array_plan(
    spec: &Array,
    chosen: &[(&Disk, bool)],
    inventory: &Inventory,
    skipped: Vec<String>,
) -> ArrayPlan {
    let level = spec.level;
    // The spares are the last members: which disks they are follows from
    // the order discovery lists them in, the same on every run.
    let active_count = chosen.len().saturating_sub(spec.spares);
    let (active, spares) = chosen.split_at(active_count);
    let disks: Vec<&Disk> = active.iter().map(|(d, _)| *d).collect();
    let sizes: Vec<u64> = disks.iter().map(|d| d.size.0).collect();
    let (capacity, lost) = capacity_in(level, &sizes, spec.vdev_count());
    let mut warnings = warnings(spec, chosen, lost);
    warnings.extend(group_warnings(spec, active, spares));
    let all: Vec<&Disk> = chosen.iter().map(|(d, _)| *d).collect();
    ArrayPlan {
        spec: spec.clone(),
        members: chosen
            .iter()
            .enumerate()
            .map(|(i, (d, erase))| Member {
                disk: (*d).clone(),
                erase: *erase,
                spare: i >= active_count,
                parity: false,
            })
            .collect(),
        capacity,
        lost_to_mixed_sizes: lost,
        tolerance: tolerance_in(level, disks.len(), spec.vdev_count()),
        throughput: throughput(level, spec.vdev_count(), &disks, inventory),
        warnings,
        skipped,
        ashift: spec.is_zfs().then(|| ashift(&all)),
        joined: Vec::new(),
        imported: None,
    }
}

/// What the groups' width and the spares' sizes mean: a wide group with
/// one disk of parity, a spare too small to take a member's place.
fn group_warnings(spec: &Array, active: &[(&Disk, bool)], spares: &[(&Disk, bool)]) -> Vec<String> {
    let mut out = Vec::new();
    let level = spec.level;
    let width = active.len() / spec.vdev_count();
    if matches!(level, Level::Raid5 | Level::Raidz1) && width >= DOUBLE_PARITY_FROM {
        let (two, each) = match (spec.is_zfs(), spec.vdev_count()) {
            (true, 1) => ("raidz2", ""),
            (true, _) => ("raidz2", " in each vdev"),
            (false, 1) => ("raid6", ""),
            (false, _) => ("raid6", " in each leg"),
        };
        out.push(format!(
            "{level} over {width} disks{each}: a second disk failing before the first is rebuilt loses everything; from {DOUBLE_PARITY_FROM} disks {two} (two disks of parity) survives that"
        ));
    }
    let smallest = active.iter().map(|(d, _)| d.size).min();
    for (d, _) in spares {
        if let Some(smallest) = smallest
            && d.size < smallest
        {
            out.push(format!(
                "{} ({}) is smaller than the smallest member ({smallest}): no failed member can be rebuilt onto it, so it is no spare; use a disk at least as large",
                d.name, d.size
            ));
        }
    }
    out
}

pub(super) fn warnings(spec: &Array, chosen: &[(&Disk, bool)], lost: Size) -> Vec<String> {
    let mut out = Vec::new();
    let level = spec.level;
    if level == Level::Raid0 {
        out.push(
            "raid0 has no redundancy: one failed disk loses everything on the array".to_string(),
        );
    }
    if level == Level::Stripe && chosen.len() > 1 {
        out.push(
            "a stripe has no redundancy: one failed disk loses everything in the pool".to_string(),
        );
    }
    let smallest = chosen.iter().map(|(d, _)| d.size).min();
    // A ZFS stripe uses every byte of each disk: nothing to warn about.
    if let Some(smallest) = smallest
        && level != Level::Stripe
        && chosen.iter().any(|(d, _)| d.size != smallest)
    {
        if level == Level::Raid0 {
            out.push("members differ in size: md stripes the extra space over fewer disks, so the end of the array is slower".to_string());
        } else {
            out.push(format!(
                "members differ in size: each counts as the smallest ({smallest}), so {lost} of the larger disks is unused"
            ));
        }
    }
    for (d, erase) in chosen {
        if *erase {
            out.push(format!(
                "{} holds {} and will be erased (wipe = true)",
                d.name,
                d.describe_contents()
            ));
        }
    }
    let usb: Vec<&str> = chosen
        .iter()
        .filter(|(d, _)| d.transport == Some(Transport::Usb))
        .map(|(d, _)| d.name.as_str())
        .collect();
    if !usb.is_empty() && level != Level::Single {
        out.push(format!(
            "{} {} attached over USB: UAS link resets drop USB disks out of arrays (raspberrypi/linux #3070, #3905, #5959); prefer SATA or NVMe members",
            usb.join(", "),
            if usb.len() == 1 { "is" } else { "are" }
        ));
    }
    if chosen.iter().any(|(d, _)| d.rotational) && chosen.iter().any(|(d, _)| !d.rotational) {
        out.push(
            "the array mixes SSDs and spinning disks: it runs at the spinning disks' speed"
                .to_string(),
        );
    }
    let mut noted: Vec<&str> = Vec::new();
    for (d, _) in chosen {
        if let Some(c) = &d.controller
            && let Some(note) = &c.note
            && !noted.contains(&c.pci.as_str())
        {
            noted.push(&c.pci);
            out.push(format!("{}: {note}", c.label()));
        }
    }
    out
}
