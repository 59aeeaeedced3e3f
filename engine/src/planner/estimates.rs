//! What an array of given members will be: its capacity, how many failed
//! disks it survives, and the sequential speed its slowest part allows.

use super::{Limit, Throughput, Tolerance};
use crate::machine::disks::{Disk, Inventory};
use crate::size::Size;
use crate::spec::{Level, Transport};

/// From this many disks in a group a second parity disk is worth its
/// space: a second disk can fail while the first is rebuilt, and the more
/// disks, the likelier. The wizard recommends raid6/raidz2 from here, and
/// the planner warns of a wider raid5/raidz1.
pub const DOUBLE_PARITY_FROM: usize = 6;

/// Disks' worth of data in `n` members split into `vdevs` equal groups
/// (always one for md).
pub(super) fn data_disks(level: Level, n: usize, vdevs: usize) -> usize {
    let width = n / vdevs.max(1);
    let per_vdev = match level {
        Level::Raid0 | Level::Stripe => width,
        Level::Raid1 | Level::Single | Level::Mirror => 1,
        Level::Raid5 | Level::Raidz1 => width.saturating_sub(1),
        Level::Raid6 | Level::Raidz2 => width.saturating_sub(2),
        Level::Raidz3 => width.saturating_sub(3),
        Level::Raid10 => width / 2,
        // Each file lies whole on one disk: reading or writing it moves
        // one disk.
        Level::Pool => 1,
    };
    per_vdev * vdevs.max(1)
}

/// Capacity and the bytes lost to mixed sizes, from member sizes alone
/// (one group: every md array, a ZFS pool of one vdev).
pub fn capacity(level: Level, sizes: &[u64]) -> (Size, Size) {
    capacity_in(level, sizes, 1)
}

/// As [`capacity`] for members taken in order into `vdevs` equal groups;
/// each group is limited by its smallest member. raidz's padding and
/// ZFS's slop space are not counted: the figure is the disks' worth, as
/// for md.
pub fn capacity_in(level: Level, sizes: &[u64], vdevs: usize) -> (Size, Size) {
    let vdevs = vdevs.max(1);
    let width = (sizes.len() / vdevs).max(1);
    let (mut usable, mut lost) = (0, 0);
    for group in sizes.chunks(width) {
        let n = group.len() as u64;
        let smallest = group.iter().copied().min().unwrap_or(0);
        let total: u64 = group.iter().sum();
        let data = data_disks(level, group.len(), 1) as u64;
        // md raid0 stripes unequal members in zones, and ZFS stripes every
        // byte of each disk: nothing is lost to mixed sizes.
        // A pool's callers pass its data disks alone: each holds its own.
        if matches!(level, Level::Raid0 | Level::Stripe | Level::Pool) {
            usable += total;
            continue;
        }
        // md's near-2 layout keeps two copies of each chunk over any number
        // of members: half of them all, not whole disks.
        usable += if level == Level::Raid10 {
            smallest * n / 2
        } else {
            smallest * data
        };
        lost += total - smallest * n;
    }
    (Size(usable), Size(lost))
}

pub fn tolerance(level: Level, n: usize) -> Tolerance {
    tolerance_in(level, n, 1)
}

/// Failed disks survived whichever fail (`guaranteed`) and when they fall
/// one per group (`best_case`).
pub fn tolerance_in(level: Level, n: usize, vdevs: usize) -> Tolerance {
    let vdevs = vdevs.max(1);
    let width = n / vdevs;
    let per_vdev = match level {
        // A pool's tolerance is its parity, which the level alone does not say.
        Level::Raid0 | Level::Single | Level::Stripe | Level::Pool => 0,
        Level::Raid1 | Level::Mirror => width.saturating_sub(1),
        Level::Raid5 | Level::Raidz1 => 1,
        Level::Raid6 | Level::Raidz2 => 2,
        Level::Raidz3 => 3,
        Level::Raid10 => {
            return Tolerance {
                guaranteed: 1,
                best_case: n / 2,
            };
        }
    };
    Tolerance {
        guaranteed: per_vdev,
        best_case: per_vdev * vdevs,
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

pub(super) fn throughput(
    level: Level,
    vdevs: usize,
    members: &[&Disk],
    inventory: &Inventory,
) -> Throughput {
    let slowest = members.iter().map(|d| disk_mb_s(d)).min().unwrap_or(0);
    let n = members.len();
    let disks = slowest * data_disks(level, n, vdevs).max(1) as u32;
    let what = if level == Level::Pool {
        format!("one disk (the slowest of the pool's, ≈{slowest} MB/s)")
    } else {
        format!("the disks ({n} × ≈{slowest} MB/s, {level})")
    };
    let mut limits = vec![Limit { what, mb_s: disks }];
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
