//! The planner: a storage spec and the discovered disks become a plan, or a
//! list of refusals that each name the disk and the reason. Pure: no I/O, so
//! the wizard can re-plan on every keystroke and tests can cover every level.

use crate::machine::disks::{Disk, Inventory, MdArray};
use crate::matching;
use crate::size::Size;
use crate::spec::{Array, Count, Level, Share, Storage, Transport};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub arrays: Vec<ArrayPlan>,
    pub shares: Vec<Share>,
    pub alert: Alert,
}

/// Where mdadm's monitor reports a failing disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alert {
    Mail(String),
    Program(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayPlan {
    pub spec: Array,
    pub members: Vec<Member>,
    /// Usable bytes before RAID metadata and filesystem overhead.
    pub capacity: Size,
    /// Bytes the larger members contribute that the level cannot use.
    pub lost_to_mixed_sizes: Size,
    pub tolerance: Tolerance,
    pub throughput: Throughput,
    pub warnings: Vec<String>,
    /// Matching disks that were left out, and why.
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub disk: Disk,
    /// It holds something that will be erased (the recipe allowed it).
    pub erase: bool,
}

/// How many members may fail without losing data: `guaranteed` whichever
/// fail, `best_case` if the right ones fail (raid10 mirrors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tolerance {
    pub guaranteed: usize,
    pub best_case: usize,
}

/// Sequential throughput estimate in MB/s and what limits it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub limits: Vec<Limit>,
    /// Index into `limits` of the slowest one.
    pub bottleneck: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub what: String,
    pub mb_s: u32,
}

impl Throughput {
    pub fn bottleneck(&self) -> &Limit {
        &self.limits[self.bottleneck]
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub array: String,
    /// The disk the refusal is about; None when it is about the array as a whole.
    pub disk: Option<String>,
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.disk {
            Some(disk) => write!(f, "array '{}': {disk}: {}", self.array, self.reason),
            None => write!(f, "array '{}': {}", self.array, self.reason),
        }
    }
}

impl ArrayPlan {
    pub fn data_disks(&self) -> usize {
        data_disks(self.spec.level, self.members.len())
    }

    /// All members the same size? (md raid0 needs a layout otherwise.)
    pub fn equal_members(&self) -> bool {
        self.members
            .windows(2)
            .all(|w| w[0].disk.size == w[1].disk.size)
    }
}

fn data_disks(level: Level, n: usize) -> usize {
    match level {
        Level::Raid0 => n,
        Level::Raid1 | Level::Single => 1,
        Level::Raid5 => n - 1,
        Level::Raid6 => n - 2,
        Level::Raid10 => n / 2,
    }
}

/// Capacity and the bytes lost to mixed sizes, from member sizes alone.
pub fn capacity(level: Level, sizes: &[u64]) -> (Size, Size) {
    let n = sizes.len() as u64;
    let smallest = sizes.iter().copied().min().unwrap_or(0);
    let total: u64 = sizes.iter().sum();
    let usable = match level {
        // md raid0 stripes unequal members in zones and uses every byte.
        Level::Raid0 => return (Size(total), Size(0)),
        Level::Raid1 | Level::Single => smallest,
        Level::Raid5 => smallest * (n - 1),
        Level::Raid6 => smallest * (n - 2),
        Level::Raid10 => smallest * n / 2,
    };
    (Size(usable), Size(total - smallest * n))
}

pub fn tolerance(level: Level, n: usize) -> Tolerance {
    let (guaranteed, best_case) = match level {
        Level::Raid0 | Level::Single => (0, 0),
        Level::Raid1 => (n - 1, n - 1),
        Level::Raid5 => (1, 1),
        Level::Raid6 => (2, 2),
        Level::Raid10 => (1, n / 2),
    };
    Tolerance {
        guaranteed,
        best_case,
    }
}

/// Sequential MB/s one disk sustains, by kind (field-note ballparks).
fn disk_mb_s(disk: &Disk) -> u32 {
    let media = match (disk.transport, disk.rotational) {
        (_, true) => 180,
        (Some(Transport::Nvme), false) => 1500,
        (Some(Transport::Mmc), false) => 40,
        (_, false) => 500,
    };
    match disk.usb_mbit {
        Some(mbit) => media.min(usb_mb_s(mbit)),
        None => media,
    }
}

fn usb_mb_s(mbit: u32) -> u32 {
    match mbit {
        0..=480 => 35,
        481..=5000 => 400,
        _ => 900,
    }
}

/// What a PCIe link carries in practice: Gen2 x1 ≈ 330 MB/s (CM4 seed),
/// Gen3 x1 ≈ 800 MB/s (Pi 5 + JMB585 seed); other rates scaled from those.
pub fn pcie_mb_s(mts: u32, width: u32) -> u32 {
    let per_lane = match mts {
        15_000.. => 1600,
        7_900.. => 800,
        4_900.. => 330,
        _ => 165,
    };
    per_lane * width
}

/// "PCIe Gen 2 (5.0 GT/s) x1": people know links by generation, the kernel
/// reports the transfer rate.
pub fn pcie_link(mts: u32, width: u32) -> String {
    let rate = format!("{:.1} GT/s", mts as f32 / 1000.0);
    let generation = match mts {
        2_500 => Some(1),
        5_000 => Some(2),
        8_000 => Some(3),
        16_000 => Some(4),
        32_000 => Some(5),
        _ => None,
    };
    match generation {
        Some(g) => format!("PCIe Gen {g} ({rate}) x{width}"),
        None => format!("PCIe {rate} x{width}"),
    }
}

/// What a network link carries: GbE ≈ 117 MB/s (seed measurements).
pub fn network_mb_s(mbit: u32) -> u32 {
    (mbit as u64 * 117 / 1000) as u32
}

fn throughput(level: Level, members: &[&Disk], inventory: &Inventory) -> Throughput {
    let slowest = members.iter().map(|d| disk_mb_s(d)).min().unwrap_or(0);
    let n = members.len();
    let disks = slowest * data_disks(level, n).max(1) as u32;
    let mut limits = vec![Limit {
        what: format!("the disks ({n} × ≈{slowest} MB/s, {level})"),
        mb_s: disks,
    }];
    let mut seen: Vec<&str> = Vec::new();
    for disk in members {
        let Some(c) = &disk.controller else { continue };
        let (Some(mts), Some(width)) = (c.link_mts, c.link_width) else {
            continue;
        };
        if seen.contains(&c.pci.as_str()) {
            continue;
        }
        seen.push(&c.pci);
        // Each member carries 1/n of the traffic, so a link shared by k
        // members caps the array at link × n / k.
        let behind = members
            .iter()
            .filter(|d| d.controller.as_ref().is_some_and(|o| o.pci == c.pci))
            .count();
        let mb_s = (pcie_mb_s(mts, width) as u64 * n as u64 / behind as u64) as u32;
        limits.push(Limit {
            what: format!("the {} link of the {}", pcie_link(mts, width), c.label()),
            mb_s,
        });
    }
    if let Some(net) = &inventory.network {
        limits.push(Limit {
            what: format!("the network ({} at {} Mbit/s)", net.interface, net.mbit),
            mb_s: network_mb_s(net.mbit),
        });
    }
    let bottleneck = (0..limits.len())
        .min_by_key(|&i| limits[i].mb_s)
        .unwrap_or(0);
    Throughput { limits, bottleneck }
}

enum Candidate<'a> {
    Usable { disk: &'a Disk, erase: bool },
    HoldsData(&'a Disk),
    InUse(&'a Disk),
}

/// Plans every array in order; a disk taken by one array is not offered to
/// the next. Refusals are collected for all arrays, not just the first.
pub fn plan(
    storage: &Storage,
    shares: &[Share],
    inventory: &Inventory,
) -> Result<Plan, Vec<Refusal>> {
    let mut taken: Vec<String> = Vec::new();
    let mut arrays = Vec::new();
    let mut refusals = Vec::new();
    for (index, spec) in storage.arrays.iter().enumerate() {
        match plan_array(index, spec, inventory, &taken) {
            Ok(array) => {
                taken.extend(array.members.iter().map(|m| m.disk.name.clone()));
                arrays.push(array);
            }
            Err(mut r) => refusals.append(&mut r),
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let alert = match (&storage.alert_program, &storage.mailaddr) {
        (Some(program), _) => Alert::Program(program.clone()),
        (None, Some(mail)) => Alert::Mail(mail.clone()),
        (None, None) => Alert::Mail("root".into()),
    };
    Ok(Plan {
        arrays,
        shares: shares.to_vec(),
        alert,
    })
}

fn plan_array(
    index: usize,
    spec: &Array,
    inventory: &Inventory,
    taken: &[String],
) -> Result<ArrayPlan, Vec<Refusal>> {
    let refuse = |disk: Option<&str>, reason: String| Refusal {
        array: spec.name.clone(),
        disk: disk.map(str::to_string),
        reason,
    };
    // The steps address the array as /dev/md/<name>: with another array
    // already there under that name, "create" would find it done and mkfs
    // would format it.
    if spec.level != Level::Single
        && let Some(existing) = inventory
            .arrays
            .iter()
            .find(|a| a.name.as_deref() == Some(spec.name.as_str()))
    {
        return Err(vec![refuse(
            None,
            name_taken(index, spec, existing, inventory),
        )]);
    }
    let mut mismatched = Vec::new();
    let mut candidates = Vec::new();
    for disk in &inventory.disks {
        if taken.contains(&disk.name) {
            continue;
        }
        if let Some(why) = matching::mismatch(&spec.disks, disk) {
            mismatched.push(format!("{} ({why})", disk.name));
            continue;
        }
        candidates.push(if !disk.in_use.is_empty() {
            Candidate::InUse(disk)
        } else if disk.is_blank() {
            Candidate::Usable { disk, erase: false }
        } else if spec.wipe {
            Candidate::Usable { disk, erase: true }
        } else {
            Candidate::HoldsData(disk)
        });
    }

    let mut skipped = Vec::new();
    let mut refusals = Vec::new();
    let hold_reason = |d: &Disk| {
        format!(
            "holds {} and the recipe does not allow erasing it; back it up and set wipe = true in storage.arrays[{index}], or take the disk out",
            d.describe_contents()
        )
    };
    let in_use_reason = |d: &Disk| {
        let why: Vec<String> = d.in_use.iter().map(ToString::to_string).collect();
        format!("never used: {}", why.join(", "))
    };
    for c in &candidates {
        match c {
            Candidate::InUse(d) => skipped.push(format!("{}: {}", d.name, in_use_reason(d))),
            Candidate::HoldsData(d) if spec.disks.count == Count::All => {
                refusals.push(refuse(Some(&d.name), hold_reason(d)))
            }
            _ => {}
        }
    }
    // Blank disks first: with a count, a disk with data is only taken when
    // there are not enough blank ones.
    let mut usable: Vec<(&Disk, bool)> = candidates
        .iter()
        .filter_map(|c| match c {
            Candidate::Usable { disk, erase } => Some((*disk, *erase)),
            _ => None,
        })
        .collect();
    usable.sort_by_key(|(_, erase)| *erase);

    let level = spec.level;
    let wanted = match spec.disks.count {
        Count::Exactly(n) => n,
        Count::All => usable.len(),
    };
    let rules = describe_rules(spec);
    if let Count::Exactly(n) = spec.disks.count
        && usable.len() < n
    {
        for c in &candidates {
            if let Candidate::HoldsData(d) = c {
                refusals.push(refuse(Some(&d.name), hold_reason(d)));
            }
        }
        refusals.push(refuse(
            None,
            shortfall(n, usable.len(), &rules, &candidates, &mismatched),
        ));
    } else if refusals.is_empty() && wanted < level.min_disks() {
        refusals.push(refuse(
            None,
            format!(
                "{level} needs at least {} disks but {} {}: {}",
                level.min_disks(),
                wanted,
                if wanted == 1 {
                    "is usable"
                } else {
                    "are usable"
                },
                shortfall(
                    level.min_disks(),
                    usable.len(),
                    &rules,
                    &candidates,
                    &mismatched
                )
            ),
        ));
    } else if refusals.is_empty()
        && let Some(max) = level.max_disks()
        && wanted > max
    {
        let names: Vec<&str> = usable.iter().map(|(d, _)| d.name.as_str()).collect();
        refusals.push(refuse(
            None,
            format!("{level} takes one disk but {} match ({}); set count = 1 or narrow the rules (model, serial, size)", wanted, names.join(", ")),
        ));
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }

    let mut chosen: Vec<(&Disk, bool)> = usable.into_iter().take(wanted).collect();
    // Members in discovery order, however they were picked.
    chosen.sort_by_key(|(d, _)| inventory.disks.iter().position(|o| o.name == d.name));
    for (d, _) in candidates.iter().filter_map(|c| match c {
        Candidate::Usable { disk, erase } => Some((*disk, *erase)),
        _ => None,
    }) {
        if !chosen.iter().any(|(c, _)| c.name == d.name) {
            skipped.push(format!(
                "{}: not needed (count = {wanted}; blank disks are taken first)",
                d.name
            ));
        }
    }
    let disks: Vec<&Disk> = chosen.iter().map(|(d, _)| *d).collect();
    let sizes: Vec<u64> = disks.iter().map(|d| d.size.0).collect();
    let (capacity, lost) = capacity(level, &sizes);
    let warnings = warnings(spec, &chosen, lost);
    Ok(ArrayPlan {
        spec: spec.clone(),
        members: chosen
            .iter()
            .map(|(d, erase)| Member {
                disk: (*d).clone(),
                erase: *erase,
            })
            .collect(),
        capacity,
        lost_to_mixed_sizes: lost,
        tolerance: tolerance(level, disks.len()),
        throughput: throughput(level, &disks, inventory),
        warnings,
        skipped,
    })
}

fn name_taken(index: usize, spec: &Array, existing: &MdArray, inventory: &Inventory) -> String {
    let device = spec.md_device();
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

fn describe_rules(spec: &Array) -> String {
    toml::to_string(&spec.disks)
        .map(|t| t.lines().collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

fn shortfall(
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
        }
    }
    if !mismatched.is_empty() {
        why.push(format!("not matching: {}", mismatched.join(", ")));
    }
    why.join("; ")
}

fn warnings(spec: &Array, chosen: &[(&Disk, bool)], lost: Size) -> Vec<String> {
    let mut out = Vec::new();
    let level = spec.level;
    if level == Level::Raid0 {
        out.push(
            "raid0 has no redundancy: one failed disk loses everything on the array".to_string(),
        );
    }
    let smallest = chosen.iter().map(|(d, _)| d.size).min();
    if let Some(smallest) = smallest
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

impl Plan {
    /// The array a path lies on: the one with the longest mount point at or
    /// above it.
    pub fn array_of(&self, path: &str) -> Option<&ArrayPlan> {
        self.arrays
            .iter()
            .filter(|a| {
                let m = a.spec.mount.as_str();
                path == m || path.starts_with(&format!("{m}/"))
            })
            .max_by_key(|a| a.spec.mount.len())
    }

    /// How much a Time Machine share lets each of its users fill: the
    /// recipe's limit, or half the array shared among the users (Samba
    /// applies the limit to each user's folder); none for a share that is
    /// not Time Machine or not on an array.
    pub fn timemachine_limit(&self, share: &Share) -> Option<Size> {
        let smb = share.smb.as_ref().filter(|s| s.timemachine)?;
        smb.timemachine_max_size.or_else(|| {
            let array = self.array_of(&share.path)?;
            let users = smb.users.len().max(1) as u64;
            Some(Size(array.capacity.bytes() / 2 / users))
        })
    }

    /// The plan in words, as `plan` prints it and the wizard shows it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for a in &self.arrays {
            let s = &a.spec;
            let device = if s.level == Level::Single {
                "a partition".to_string()
            } else {
                s.md_device()
            };
            out += &format!(
                "Array '{}': {} of {} disk(s) as {device}, {} mounted at {}\n",
                s.name,
                s.level,
                a.members.len(),
                s.filesystem,
                s.mount
            );
            for m in &a.members {
                let erase = if m.erase { "  [will be erased]" } else { "" };
                let controller = m
                    .disk
                    .controller
                    .as_ref()
                    .map(|c| format!(" via {}", c.label()))
                    .unwrap_or_default();
                out += &format!(
                    "  - {}: {}{controller}{erase}\n",
                    m.disk.name,
                    m.disk.summary()
                );
            }
            out += &format!(
                "  capacity: about {} (before filesystem overhead)",
                a.capacity
            );
            if a.lost_to_mixed_sizes.0 > 0 {
                out += &format!(
                    ", {} unused because members differ in size",
                    a.lost_to_mixed_sizes
                );
            }
            out += "\n";
            let t = a.tolerance;
            out += &match (t.guaranteed, t.best_case) {
                (0, _) => "  survives: no disk failure\n".to_string(),
                (g, b) if g == b => format!("  survives: {g} failed disk(s)\n"),
                (g, b) => format!(
                    "  survives: {g} failed disk(s), up to {b} if each is from a different mirror\n"
                ),
            };
            let b = a.throughput.bottleneck();
            let others: Vec<String> = a
                .throughput
                .limits
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != a.throughput.bottleneck)
                .map(|(_, l)| format!("{} ≈{} MB/s", l.what, l.mb_s))
                .collect();
            out += &format!("  expected bottleneck: {} at ≈{} MB/s", b.what, b.mb_s);
            if !others.is_empty() {
                out += &format!(" (also: {})", others.join("; "));
            }
            out += "\n";
            for w in &a.warnings {
                out += &format!("  warning: {w}\n");
            }
            for s in &a.skipped {
                out += &format!("  skipped {s}\n");
            }
        }
        for share in &self.shares {
            let mut how = Vec::new();
            if let Some(smb) = &share.smb {
                let tm = if smb.timemachine {
                    ", Time Machine"
                } else {
                    ""
                };
                if smb.guest {
                    how.push("SMB read-only for guests".into());
                }
                if !smb.users.is_empty() {
                    let ro = if smb.readonly { " read-only" } else { "" };
                    how.push(format!("SMB{ro} for {}{tm}", smb.users.join(", ")));
                }
            }
            if let Some(nfs) = &share.nfs {
                let ro = if nfs.readonly { " read-only" } else { "" };
                how.push(format!("NFS{ro} to {}", nfs.clients.0.join(" ")));
            }
            out += &format!(
                "Share '{}': {} ({})\n",
                share.name,
                share.path,
                how.join("; ")
            );
        }
        out
    }
}
