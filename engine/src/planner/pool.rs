//! A pool's disks: the blank ones its rules match and the kept disks it
//! names, the largest blank ones holding SnapRAID's parity. Refused when
//! parity could not cover the largest data disk, or when the disks would
//! hold as much as an md array, which keeps every file current.

use super::estimates::throughput;
use super::members::{candidates, choose, refuse, usable, warnings};
use super::refusals::{self, Candidate};
use super::{ArrayPlan, KeptPlan, Member, Refusal, Tolerance};
use crate::machine::disks::{Disk, Inventory};
use crate::size::Size;
use crate::spec::{Array, Count, Level};

pub(super) fn plan_pool(
    index: usize,
    spec: &Array,
    inventory: &Inventory,
    taken: &[String],
    kept: &[KeptPlan],
) -> Result<ArrayPlan, Vec<Refusal>> {
    let at = format!("storage.arrays[{index}]");
    let parity = spec.parity.unwrap_or(0);
    // A kept disk that was refused is explained by its own refusal.
    let joined: Vec<KeptPlan> = kept
        .iter()
        .filter(|k| spec.keep.contains(&k.spec.name))
        .cloned()
        .collect();
    let (candidates, mismatched) = candidates(spec, inventory, taken);
    let mut skipped = Vec::new();
    let mut refused = Vec::new();
    for c in &candidates {
        match c {
            Candidate::InUse(d) => skipped.push(format!("{}: {}", d.name, refusals::in_use(d))),
            Candidate::HoldsData(d) => {
                refused.push(refuse(spec, Some(&d.name), holds_data(index, d)))
            }
            Candidate::Failing(d, why) => {
                refused.push(refuse(spec, Some(&d.name), refusals::failing(d, why)))
            }
            Candidate::Usable { .. } => {}
        }
    }
    let mut usable: Vec<(&Disk, bool)> = usable(&candidates).collect();
    usable.sort_by_key(|(_, erase)| *erase);
    let wanted = match spec.disks().count {
        Count::Exactly(n) => n,
        Count::All => usable.len(),
    };
    // Two disks at least, one of them for files: kept disks count, parity
    // takes blank ones.
    let needed =
        (parity + usize::from(spec.keep.is_empty())).max(2usize.saturating_sub(spec.keep.len()));
    if refused.is_empty() && (usable.len() < wanted || wanted < needed) {
        let rules = refusals::describe_rules(spec);
        refused.push(refuse(
            spec,
            None,
            refusals::shortfall(
                wanted.max(needed),
                usable.len(),
                &rules,
                &candidates,
                &mismatched,
            ),
        ));
    }
    if !refused.is_empty() {
        return Err(refused);
    }
    let mut chosen = choose(usable, wanted, &candidates, inventory, &mut skipped);
    // The slots (d1, d2, parity) follow size, then serial: USB disks
    // enumerate in whichever order their bridges answer, and the same
    // disks must get the same slots on every run.
    chosen
        .sort_by(|(a, _), (b, _)| (a.size, &a.serial, &a.name).cmp(&(b.size, &b.serial, &b.name)));
    // The largest disks hold parity: SnapRAID's parity grows as large as
    // the largest data disk's files.
    let mut by_size: Vec<usize> = (0..chosen.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(chosen[i].0.size));
    let parity_at: Vec<usize> = by_size.into_iter().take(parity).collect();
    let members: Vec<Member> = chosen
        .iter()
        .enumerate()
        .map(|(i, (d, erase))| Member {
            disk: (*d).clone(),
            erase: *erase,
            spare: false,
            parity: parity_at.contains(&i),
        })
        .collect();
    let data: Vec<Disk> = members
        .iter()
        .filter(|m| !m.parity)
        .map(|m| m.disk.clone())
        .chain(joined.iter().map(|k| k.disk.clone()))
        .collect();
    let data: Vec<&Disk> = data.iter().collect();
    let refuse_at = |key: &str, why: String| {
        let mut r = refuse(spec, None, why);
        r.at = Some(format!("{at}.{key}"));
        vec![r]
    };
    if let Some(why) = parity_too_small(&at, &members, &joined) {
        return Err(refuse_at("parity", why));
    }
    if let Some(why) = better_as_array(&at, parity, &chosen, &joined) {
        return Err(refuse_at("level", why));
    }
    let capacity = Size(data.iter().map(|d| d.size.0).sum());
    let largest_data = data.iter().map(|d| d.size).max().unwrap_or(Size(0));
    let lost = Size(
        members
            .iter()
            .filter(|m| m.parity)
            .map(|m| m.disk.size.0.saturating_sub(largest_data.0))
            .sum(),
    );
    let mut warnings: Vec<String> = warnings(spec, &chosen, Size(0))
        .into_iter()
        .filter(|w| !w.starts_with("members differ in size") && !w.contains("UAS link resets"))
        .collect();
    let usb: Vec<&str> = chosen
        .iter()
        .filter(|(d, _)| d.transport == Some(crate::spec::Transport::Usb))
        .map(|(d, _)| d.name.as_str())
        .collect();
    if !usb.is_empty() {
        warnings.push(format!(
            "{} on USB: a disk whose USB link resets (UAS trouble, too little power) stops serving its files until it is back, while the others' stay served; give the disks a powered hub",
            usb.join(", ")
        ));
    }
    if parity == 0 {
        warnings.push(format!(
            "parity = 0: a lost disk's files are lost with it (the other disks' files stay); parity = 1 keeps them restorable from the last sync, on a disk at least as large as the largest ({largest_data})"
        ));
    }
    Ok(ArrayPlan {
        spec: spec.clone(),
        members,
        capacity,
        lost_to_mixed_sizes: lost,
        tolerance: Tolerance {
            guaranteed: parity,
            best_case: parity,
        },
        throughput: throughput(Level::Pool, 1, &data, inventory),
        warnings,
        skipped,
        ashift: None,
        joined,
        imported: None,
    })
}

/// A pool never erases: a disk holding files joins it as a kept disk.
fn holds_data(index: usize, d: &Disk) -> String {
    format!(
        "holds {}; to serve its files in the pool, describe it in a [[storage.disks]] with keep = true and list its name in storage.arrays[{index}].keep, or take it out (a pool never erases a disk)",
        d.describe_contents()
    )
}

/// SnapRAID's parity must be as large as the largest data disk; parity is
/// the largest blank disks, so only a kept disk can be larger.
fn parity_too_small(at: &str, members: &[Member], joined: &[KeptPlan]) -> Option<String> {
    let smallest_parity = members
        .iter()
        .filter(|m| m.parity)
        .min_by_key(|m| m.disk.size)?;
    let blank_data = members
        .iter()
        .filter(|m| !m.parity)
        .map(|m| (&m.disk, None));
    let kept_data = joined.iter().map(|k| (&k.disk, Some(k.spec.name.as_str())));
    let (largest, kept) = blank_data.chain(kept_data).max_by_key(|(d, _)| d.size)?;
    if largest.size <= smallest_parity.disk.size {
        return None;
    }
    let p = &smallest_parity.disk;
    Some(match kept {
        Some(name) => format!(
            "the kept disk '{name}' ({}, {}) is larger than {} ({}), the largest blank disk, which would hold the parity: SnapRAID's parity must be as large as the largest data disk, and a kept disk keeps its files, so it cannot hold parity. Add a blank disk of at least {} for parity, or set {at}.parity = 0",
            largest.name, largest.size, p.name, p.size, largest.size
        ),
        None => format!(
            "parity on {} ({}) is smaller than the data disk {} ({}): SnapRAID's parity must be as large as the largest data disk; use a larger disk for parity or lower {at}.parity",
            p.name, p.size, largest.name, largest.size
        ),
    })
}

/// Blank disks of one size hold as much as an md array of the same
/// parity, which keeps every file current rather than as of the last sync
/// and reads with more than one disk: the pool is refused in its favour.
fn better_as_array(
    at: &str,
    parity: usize,
    chosen: &[(&Disk, bool)],
    joined: &[KeptPlan],
) -> Option<String> {
    if parity == 0 || !joined.is_empty() {
        return None;
    }
    let n = chosen.len();
    let smallest = chosen.iter().map(|(d, _)| d.size.0).min()?;
    let mut sizes: Vec<u64> = chosen.iter().map(|(d, _)| d.size.0).collect();
    sizes.sort_unstable();
    let pool: u64 = sizes[..n - parity].iter().sum();
    let level = match (parity, n) {
        (1, 2) | (2, 3) => "raid1",
        (1, _) => "raid5",
        _ => "raid6",
    };
    let array = if level == "raid1" {
        smallest
    } else {
        smallest * (n - parity) as u64
    };
    (array >= pool).then(|| {
        format!(
            "{level} over these {n} disks holds {}, as much as the pool ({}), survives {parity} lost disk(s) with every file current rather than as of the last sync, and reads with more than one disk; write level = \"{level}\" and remove parity in {at}. A pool is for disks of different sizes, or disks that keep their files",
            Size(array),
            Size(pool)
        )
    })
}
