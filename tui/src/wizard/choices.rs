//! What the choices on screen mean: one array (an md array, or a ZFS
//! pool) over the chosen disks and the shares on it, as the same `Storage`
//! and `Share` types a recipe holds, planned by the same planner
//! `--unattended` uses. Pure.

use super::kept;
use nasforge_engine::machine::disks::{Disk, Inventory};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::planner::{self, ArrayPlan, DOUBLE_PARITY_FROM, Plan};
use nasforge_engine::spec::{
    self, Array, Count, DiskMatch, Filesystem, Level, Mode, Share, Storage,
};
use std::fmt;

/// The levels offered, most commonly wanted first.
pub const LEVELS: [Level; 6] = [
    Level::Raid1,
    Level::Raid5,
    Level::Raid6,
    Level::Raid10,
    Level::Raid0,
    Level::Single,
];

/// The ZFS levels, in the order of their md counterparts above.
pub const ZFS_LEVELS: [Level; 5] = [
    Level::Mirror,
    Level::Raidz1,
    Level::Raidz2,
    Level::Raidz3,
    Level::Stripe,
];

pub const FILESYSTEMS: [Filesystem; 3] = [Filesystem::Ext4, Filesystem::Xfs, Filesystem::Btrfs];

/// A pool's name until the user types another: zpool's own examples use
/// it, so it is the name people look for in `zpool status`.
pub const DEFAULT_POOL: &str = "tank";

/// The filesystems offered: zfs only where the board can run it. Choosing
/// zfs is what makes the array a ZFS pool, and the levels ZFS levels.
pub fn filesystems(zfs_available: bool) -> Vec<Filesystem> {
    let mut out = FILESYSTEMS.to_vec();
    if zfs_available {
        out.push(Filesystem::Zfs);
    }
    out
}

/// A level and the vdevs its disks are split into (one for every md
/// level): a row of the layout screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelChoice {
    pub level: Level,
    pub vdevs: usize,
    /// A pool's disks of parity; 0 for every other level.
    pub parity: usize,
}

impl LevelChoice {
    pub fn one(level: Level) -> LevelChoice {
        LevelChoice {
            level,
            vdevs: 1,
            parity: 0,
        }
    }

    /// A pool of disks (mergerfs and SnapRAID) with `parity` disks of parity.
    pub fn pool(parity: usize) -> LevelChoice {
        LevelChoice {
            level: Level::Pool,
            vdevs: 1,
            parity,
        }
    }

    /// Whether `active` disks (the chosen ones less the hot spares) make
    /// this: enough in each group, and every group of the same width
    /// (what the spec's check asks).
    pub fn fits(self, active: usize) -> bool {
        if self.level == Level::Pool {
            return active >= 2 && active > self.parity;
        }
        active.is_multiple_of(self.vdevs)
            && active / self.vdevs >= self.level.min_disks()
            && self.level.max_disks().is_none_or(|max| active <= max)
    }

    /// The most hot spares `n` disks leave this: none for a level that
    /// rebuilds nothing, else the disks past its minimum.
    pub fn max_spares(self, n: usize) -> usize {
        match self.level.is_redundant() {
            true => n.saturating_sub(self.level.min_disks() * self.vdevs),
            false => 0,
        }
    }

    /// The spares this takes of the `wanted`: as many as it leaves room
    /// for, so a level with fewer disks to spare is not refused for it.
    pub fn spares(self, n: usize, wanted: usize) -> usize {
        wanted.min(self.max_spares(n))
    }
}

impl fmt::Display for LevelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.vdevs {
            _ if self.level == Level::Pool => match self.parity {
                0 => f.write_str("pool, no parity"),
                p => write!(f, "pool, {p} parity"),
            },
            1 => write!(f, "{}", self.level),
            n => write!(f, "{n} × {}", self.level),
        }
    }
}

/// From this many disks the layout screen is a large layout's: md's raid5
/// and raid6 are offered as two legs too (raid50, raid60), two groups are
/// listed even where the disks do not split evenly (the row says which
/// number of spares would split them), and levels that cannot take this
/// many disks (single) are left out, so the list fits 80×24. Eight is the
/// fewest two raid6 legs take (2 × 4).
pub const LARGE_LAYOUT_FROM: usize = 8;

/// The rows of the layout screen for `n` disks of which up to `spares`
/// are hot spares: md's levels, or with zfs ZFS's, each followed by its
/// two-group form (ZFS's vdevs, md's legs in a large layout) where two
/// groups of its minimum width fit. More groups are left to recipes, and a
/// stripe over two groups would be the same stripe.
pub fn offered(filesystem: Filesystem, n: usize, spares: usize) -> Vec<LevelChoice> {
    let zfs = filesystem == Filesystem::Zfs;
    let large = n >= LARGE_LAYOUT_FROM;
    let levels: &[Level] = if zfs { &ZFS_LEVELS } else { &LEVELS };
    let mut out = Vec::new();
    for &level in levels {
        let one = LevelChoice::one(level);
        if !large || level.max_disks().is_none_or(|max| n <= max) {
            out.push(one);
        }
        let two = LevelChoice {
            level,
            vdevs: 2,
            parity: 0,
        };
        let splits = match zfs {
            true => level != Level::Stripe,
            false => large && level.nested_name().is_some(),
        };
        let active = n - two.spares(n, spares);
        if splits && (two.fits(active) || (large && active / 2 >= level.min_disks())) {
            out.push(two);
        }
    }
    out
}

/// The rows of the layout screen for the chosen disks: [`offered`]'s,
/// and where the disks differ in size and each gets a filesystem the pool
/// takes (ext4, xfs), a pool with one disk of parity and one without, so
/// the person sees beside raid5 what mixed sizes cost it.
pub fn offered_for(filesystem: Filesystem, chosen: &[&Disk], spares: usize) -> Vec<LevelChoice> {
    let mut out = offered(filesystem, chosen.len(), spares);
    let mixed = chosen.windows(2).any(|w| w[0].size != w[1].size);
    if mixed && matches!(filesystem, Filesystem::Ext4 | Filesystem::Xfs) {
        out.extend([LevelChoice::pool(1), LevelChoice::pool(0)]);
    }
    out
}

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

// The counts in these words are DOUBLE_PARITY_FROM's.
const ONE_PARITY: &str = "three to five disks: one disk's worth of parity gives the most space that survives a failed disk";
const TWO_PARITY: &str =
    "six or more disks: two disks of parity, because a second disk can fail during a long rebuild";
const MIRROR: &str = "two disks: a mirror, so either one can fail without losing data";

/// The level to suggest for these disks, and why, in the field notes'
/// terms: a mirror for two, parity for spinning disks, striped mirrors for
/// an even number of SSDs. For a ZFS pool the same counts give its
/// mirror, raidz1 and raidz2, SSDs or not: raidz writes whole stripes,
/// without the read-modify-write that steers md's SSDs to raid10.
pub fn recommend(disks: &[&Disk], filesystem: Filesystem) -> (LevelChoice, &'static str) {
    let n = disks.len();
    let ssds = disks.iter().all(|d| !d.rotational);
    let one_parity = n < DOUBLE_PARITY_FROM;
    let (level, why) = match (filesystem == Filesystem::Zfs, n) {
        (true, 0 | 1) => (
            Level::Stripe,
            "one disk: a pool on it alone, with no second copy",
        ),
        (true, 2) => (Level::Mirror, MIRROR),
        (true, _) if one_parity => (Level::Raidz1, ONE_PARITY),
        (true, _) => (Level::Raidz2, TWO_PARITY),
        (false, 0 | 1) => (
            Level::Single,
            "one disk: a filesystem straight on it, with no second copy",
        ),
        (false, 2) => (Level::Raid1, MIRROR),
        (false, _) if ssds && n.is_multiple_of(2) => (
            Level::Raid10,
            "an even number of SSDs: striped mirrors are fast and rebuild quickly, without raid5's extra writes",
        ),
        (false, _) if one_parity => (Level::Raid5, ONE_PARITY),
        (false, _) => (Level::Raid6, TWO_PARITY),
    };
    (LevelChoice::one(level), why)
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

/// The array's name: a pool's as typed, an md array's from its mount
/// point.
pub fn name(filesystem: Filesystem, mount: &str, pool: &str) -> String {
    match filesystem {
        Filesystem::Zfs => pool.trim().to_string(),
        _ => array_name(mount),
    }
}

/// One array over exactly the chosen disks, named by their serials so the
/// unattended run finds the same disks (the last `spares` of them, in
/// discovery order, its hot spares); none when no disk is chosen (the kept
/// disks alone). Erasing is allowed when a chosen disk holds data:
/// the review screen does not hand the spec on before the user typed that
/// disk's name. One vdev is left unsaid, as a recipe would leave it.
pub fn storage(
    chosen: &[&Disk],
    choice: LevelChoice,
    spares: usize,
    filesystem: Filesystem,
    mount: &str,
    name: &str,
) -> Storage {
    let serials: Vec<&str> = chosen.iter().filter_map(|d| d.serial.as_deref()).collect();
    let array = (!chosen.is_empty()).then(|| Array {
        vdevs: (choice.vdevs > 1).then_some(choice.vdevs),
        spares,
        name: name.to_string(),
        level: choice.level,
        disk_match: Some(DiskMatch {
            serial: Some(spec::glob::any_of(&serials)),
            count: Count::Exactly(chosen.len()),
            ..DiskMatch::default()
        }),
        filesystem,
        mount: mount.to_string(),
        wipe: chosen.iter().any(|d| !d.is_blank()),
        parity: (choice.level == Level::Pool).then_some(choice.parity),
        keep: Vec::new(),
        import: false,
        uuid: None,
    });
    Storage {
        mode: Mode::Unattended,
        arrays: array.into_iter().collect(),
        mailaddr: None,
        alert_program: None,
        spin_down: nasforge_engine::spec::SpinDown::Off,
        disks: Vec::new(),
        usb_quirks: Vec::new(),
        system_mirror: None,
        allow_failing: Vec::new(),
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
    pub choice: LevelChoice,
    pub outcome: Result<ArrayPlan, String>,
}

/// The layout screen's rows for `chosen`, of which up to `spares` are hot
/// spares, each planned or with why it does not fit.
pub fn level_options(
    inventory: &Inventory,
    chosen: &[&Disk],
    spares: usize,
    filesystem: Filesystem,
    mount: &str,
    name: &str,
) -> Vec<LevelOption> {
    let n = chosen.len();
    offered_for(filesystem, chosen, spares)
        .into_iter()
        .map(|choice| {
            let level = choice.level;
            let spares = choice.spares(n, spares);
            let active = n - spares;
            // Only the one-group rows can be short of disks: two groups
            // are offered where enough disks for them are chosen.
            let outcome = if active < level.min_disks() {
                Err(format!("needs at least {} disks", level.min_disks()))
            } else if level.max_disks().is_some_and(|max| active > max) {
                Err("takes exactly one disk".into())
            } else if !choice.fits(active) {
                Err(split_hint(choice, n, spares))
            } else {
                plan(
                    &storage(chosen, choice, spares, filesystem, mount, name),
                    &[],
                    inventory,
                    chosen,
                )
                .map(|mut p| p.arrays.remove(0))
                .map_err(|e| e.join("; "))
            };
            LevelOption { choice, outcome }
        })
        .collect()
}

/// Why `n` disks less `spares` do not split into `choice`'s groups, and
/// the number of hot spares that would split them: [`offered`] lists such
/// a row only where the groups get their minimum from the disks that
/// split evenly, so the disks left over can always be spares.
fn split_hint(choice: LevelChoice, n: usize, spares: usize) -> String {
    let active = n - spares;
    let group = match choice.level.is_zfs() {
        true => "vdevs",
        false => "legs",
    };
    format!(
        "{active} disks do not split into {} {group}; set Hot spares to {}",
        choice.vdevs,
        spares + active % choice.vdevs
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nasforge_engine::machine::disks::RotationalSource;
    use nasforge_engine::machine::zfs::{ZfsOnBoard, ZfsSupport};
    use nasforge_engine::planner::Tolerance;
    use nasforge_engine::size::Size;
    use nasforge_engine::spec::{DeviceRecipe, Transport};

    const TB: u64 = 1_000_000_000_000;

    fn disks(n: usize, rotational: bool) -> Vec<Disk> {
        (0..n)
            .map(|i| Disk {
                name: format!("sd{}", (b'a' + i as u8) as char),
                major: 8,
                minor: 16 * i as u32,
                size: Size(4 * TB),
                logical_block_size: 512,
                physical_block_size: Some(4096),
                model: Some("TEST DISK".into()),
                serial: Some(format!("SN{i}")),
                wwn: None,
                transport: Some(Transport::Sata),
                rotational,
                rotational_from: RotationalSource::Udev,
                removable: false,
                controller: None,
                usb_mbit: None,
                usb: None,
                by_id: None,
                links: Vec::new(),
                partitions: vec![],
                contents: vec![],
                in_use: vec![],
            })
            .collect()
    }

    fn labels(filesystem: Filesystem, n: usize) -> Vec<String> {
        offered(filesystem, n, 0)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn mixed_sizes_offer_the_pool_beside_raid5_with_what_each_holds() {
        let mut d = disks(3, true);
        for (disk, tb) in d.iter_mut().zip([1, 2, 3]) {
            disk.size = Size(tb * TB);
        }
        let chosen: Vec<&Disk> = d.iter().collect();
        let inventory = Inventory {
            disks: d.clone(),
            ..Inventory::default()
        };
        let rows = level_options(
            &inventory,
            &chosen,
            0,
            Filesystem::Ext4,
            "/srv/data",
            "data",
        );
        let held = |label: &str| {
            rows.iter()
                .find(|o| o.choice.to_string() == label)
                .unwrap_or_else(|| panic!("no row {label}"))
                .outcome
                .as_ref()
                .map(|p| p.capacity)
        };
        assert_eq!(held("raid5"), Ok(Size(2 * TB)));
        assert_eq!(held("pool, 1 parity"), Ok(Size(3 * TB)));
        assert_eq!(held("pool, no parity"), Ok(Size(6 * TB)));
        let pool = storage(
            &chosen,
            LevelChoice::pool(1),
            0,
            Filesystem::Ext4,
            "/srv/data",
            "data",
        );
        assert_eq!(
            (pool.arrays[0].level, pool.arrays[0].parity),
            (Level::Pool, Some(1))
        );
        // Disks of one size, or btrfs and zfs, get no pool row.
        let same = disks(3, true);
        let same: Vec<&Disk> = same.iter().collect();
        assert!(!offered_for(Filesystem::Ext4, &same, 0).contains(&LevelChoice::pool(1)));
        assert!(!offered_for(Filesystem::Btrfs, &chosen, 0).contains(&LevelChoice::pool(1)));
    }

    #[test]
    fn two_vdevs_are_offered_where_two_groups_of_the_minimum_fit() {
        assert_eq!(
            labels(Filesystem::Zfs, 3),
            ["mirror", "raidz1", "raidz2", "raidz3", "stripe"]
        );
        assert_eq!(
            labels(Filesystem::Zfs, 4),
            [
                "mirror",
                "2 × mirror",
                "raidz1",
                "raidz2",
                "raidz3",
                "stripe"
            ]
        );
        assert_eq!(
            labels(Filesystem::Zfs, 5),
            ["mirror", "raidz1", "raidz2", "raidz3", "stripe"],
            "five disks do not split in two"
        );
        assert_eq!(
            labels(Filesystem::Zfs, 6),
            [
                "mirror",
                "2 × mirror",
                "raidz1",
                "2 × raidz1",
                "raidz2",
                "raidz3",
                "stripe"
            ]
        );
        assert_eq!(
            labels(Filesystem::Zfs, 10),
            [
                "mirror",
                "2 × mirror",
                "raidz1",
                "2 × raidz1",
                "raidz2",
                "2 × raidz2",
                "raidz3",
                "2 × raidz3",
                "stripe"
            ]
        );
        for fs in FILESYSTEMS {
            assert_eq!(
                offered(fs, 6, 0),
                LEVELS.map(LevelChoice::one),
                "md's levels, one vdev each"
            );
        }
    }

    #[test]
    fn large_layouts_offer_two_legs_and_say_which_spares_split_them() {
        let labels = |fs: Filesystem, n: usize, spares: usize| -> Vec<String> {
            offered(fs, n, spares)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            labels(Filesystem::Ext4, 7, 1),
            LEVELS.map(|l| l.to_string()),
            "below eight disks md offers no legs"
        );
        assert_eq!(
            labels(Filesystem::Ext4, 15, 0),
            [
                "raid1",
                "raid5",
                "2 × raid5",
                "raid6",
                "2 × raid6",
                "raid10",
                "raid0"
            ],
            "two legs offered, single left out"
        );
        assert_eq!(
            labels(Filesystem::Zfs, 15, 0),
            [
                "mirror",
                "2 × mirror",
                "raidz1",
                "2 × raidz1",
                "raidz2",
                "2 × raidz2",
                "raidz3",
                "2 × raidz3",
                "stripe"
            ]
        );
        assert_eq!(
            labels(Filesystem::Zfs, 5, 1),
            [
                "mirror",
                "2 × mirror",
                "raidz1",
                "raidz2",
                "raidz3",
                "stripe"
            ],
            "a spare leaves four: two mirrors of two"
        );

        let raid6 = LevelChoice::one(Level::Raid6);
        let two = LevelChoice {
            level: Level::Raid6,
            vdevs: 2,
            parity: 0,
        };
        assert_eq!((raid6.max_spares(15), two.max_spares(15)), (11, 7));
        assert_eq!(LevelChoice::one(Level::Raid0).max_spares(15), 0);
        assert_eq!(two.spares(15, 9), 7, "as many as it leaves room for");

        let d = disks(15, true);
        let chosen: Vec<&Disk> = d.iter().collect();
        let inventory = Inventory {
            disks: d.clone(),
            ..Inventory::default()
        };
        let row = |spares: usize| {
            level_options(
                &inventory,
                &chosen,
                spares,
                Filesystem::Ext4,
                "/srv/data",
                "data",
            )
            .into_iter()
            .find(|o| o.choice == two)
            .unwrap()
            .outcome
        };
        assert_eq!(
            row(0).unwrap_err(),
            "15 disks do not split into 2 legs; set Hot spares to 1"
        );
        assert_eq!(
            row(2).unwrap_err(),
            "13 disks do not split into 2 legs; set Hot spares to 3"
        );
        let plan = row(1).unwrap();
        assert_eq!(
            plan.capacity,
            Size(40 * TB),
            "two legs of 7, five data disks each"
        );
        assert_eq!(plan.spares().count(), 1);
        assert_eq!(
            split_hint(two, 9, 0),
            "9 disks do not split into 2 legs; set Hot spares to 1",
            "the smallest two legs and the one disk over"
        );
    }

    #[test]
    fn pools_are_recommended_by_disk_count_beside_md() {
        let rec = |n: usize, rotational: bool, fs: Filesystem| {
            let d = disks(n, rotational);
            let chosen: Vec<&Disk> = d.iter().collect();
            recommend(&chosen, fs).0.to_string()
        };
        for (n, md, zfs) in [
            (1, "single", "stripe"),
            (2, "raid1", "mirror"),
            (3, "raid5", "raidz1"),
            (5, "raid5", "raidz1"),
            (6, "raid6", "raidz2"),
            (8, "raid6", "raidz2"),
            (15, "raid6", "raidz2"),
        ] {
            assert_eq!(rec(n, true, Filesystem::Ext4), md, "{n} disks");
            assert_eq!(rec(n, true, Filesystem::Zfs), zfs, "{n} disks");
        }
        assert_eq!(rec(4, false, Filesystem::Xfs), "raid10");
        assert_eq!(rec(4, false, Filesystem::Zfs), "raidz1");
    }

    #[test]
    fn a_pool_choice_becomes_a_zfs_array_the_spec_and_planner_take() {
        let d = disks(6, true);
        let chosen: Vec<&Disk> = d.iter().collect();
        let inventory = Inventory {
            disks: d.clone(),
            network: None,
            arrays: vec![],
            zfs: ZfsOnBoard::Available(ZfsSupport {
                version: Some("2.1.11-1+deb12u1".into()),
            }),
            failing: Default::default(),
            existing: Vec::new(),
            existing_pools: Vec::new(),
        };
        let choice = LevelChoice {
            level: Level::Raidz1,
            vdevs: 2,
            parity: 0,
        };
        let pool_spec = storage(
            &chosen,
            choice,
            0,
            Filesystem::Zfs,
            "/srv/data",
            DEFAULT_POOL,
        );
        let array = &pool_spec.arrays[0];
        assert_eq!(
            (
                array.name.as_str(),
                array.level,
                array.filesystem,
                array.vdevs,
                array.disks().count,
                array.mount.as_str()
            ),
            (
                "tank",
                Level::Raidz1,
                Filesystem::Zfs,
                Some(2),
                Count::Exactly(6),
                "/srv/data"
            )
        );
        let recipe = DeviceRecipe {
            storage: Some(pool_spec.clone()),
            shares: vec![],
            alerts: None,
        };
        assert_eq!(recipe.problems(), []);
        let plan = plan(&pool_spec, &[], &inventory, &chosen).unwrap();
        let pool = &plan.arrays[0];
        assert_eq!(
            pool.capacity,
            Size(16 * TB),
            "two vdevs of 3, one parity each"
        );
        assert_eq!(
            pool.tolerance,
            Tolerance {
                guaranteed: 1,
                best_case: 2
            }
        );
        let one = storage(
            &chosen,
            LevelChoice::one(Level::Raidz2),
            0,
            Filesystem::Zfs,
            "/srv/data",
            DEFAULT_POOL,
        );
        assert_eq!(one.arrays[0].vdevs, None, "one vdev, as a recipe leaves it");
    }

    #[test]
    fn an_md_choice_is_named_after_its_mount_point_and_has_no_vdevs() {
        let d = disks(4, true);
        let chosen: Vec<&Disk> = d.iter().collect();
        let name = name(Filesystem::Xfs, "/srv/media", DEFAULT_POOL);
        let md_spec = storage(
            &chosen,
            LevelChoice::one(Level::Raid6),
            0,
            Filesystem::Xfs,
            "/srv/media",
            &name,
        );
        let array = &md_spec.arrays[0];
        assert_eq!(
            (
                array.name.as_str(),
                array.level,
                array.filesystem,
                array.vdevs
            ),
            ("media", Level::Raid6, Filesystem::Xfs, None)
        );
        assert_eq!(super::name(Filesystem::Zfs, "/srv/media", " pool "), "pool");
    }

    #[test]
    fn array_names_come_from_the_mount_point() {
        assert_eq!(array_name("/srv/data"), "data");
        assert_eq!(array_name("/srv/media files/"), "mediafiles");
        assert_eq!(array_name("/"), "data");
        assert_eq!(array_name("/mnt/--x"), "x");
    }
}
