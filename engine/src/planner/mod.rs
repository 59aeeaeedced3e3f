//! The planner: a storage spec and the discovered disks become a plan, or a
//! list of refusals that each name the disk and the reason. Pure: no I/O, so
//! the wizard can re-plan on every keystroke and tests can cover every level.
//!
//! `members` picks each array's disks (or says why it cannot, in the words
//! of `refusals`), `estimates` works out what the array will hold and
//! sustain, and `describe` puts the plan in words.

mod describe;
mod estimates;
mod import;
mod import_pool;
mod kept;
mod members;
mod mirror;
mod pool;
mod refusals;

pub use estimates::{
    DOUBLE_PARITY_FROM, capacity, capacity_in, network_mb_s, pcie_link, pcie_mb_s, tolerance,
    tolerance_in,
};
pub use kept::KeptPlan;
pub use mirror::MirrorPlan;

use crate::machine::disks::{Disk, Inventory};
use crate::size::Size;
use crate::spec::{Array, Share, SpinDown, Storage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub arrays: Vec<ArrayPlan>,
    pub shares: Vec<Share>,
    pub alert: Alert,
    #[serde(default, skip_serializing_if = "SpinDown::is_off")]
    pub spin_down: SpinDown,
    /// Disks shared as they are (`keep = true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptPlan>,
    /// The system mirrored onto a second disk (`[storage.system_mirror]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_mirror: Option<MirrorPlan>,
}

/// The ashift for a pool of `disks`: 12 (4 KiB) at least, since a pool
/// made with 512-byte sectors cannot take a 4 KiB replacement disk later
/// without losing speed; more when a member writes larger sectors.
pub fn ashift(disks: &[&Disk]) -> u8 {
    let largest = disks.iter().map(|d| d.sector_size()).max().unwrap_or(0);
    (largest.max(1).ilog2() as u8).max(12)
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
    /// ZFS pools only: log2 of the sector size the pool writes in (12 for
    /// 4 KiB, more when a member's physical sectors are larger). Fixed at
    /// creation for every vdev, so it is chosen for the largest sector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ashift: Option<u8>,
    /// Pools only: the kept disks that join as data disks, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joined: Vec<KeptPlan>,
    /// An md array another machine made, adopted as it is (`import`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<Imported>,
}

/// What an adopted array is on the disks: what its steps assemble and
/// check before anything else is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imported {
    /// md's array UUID, as mdadm prints it.
    pub uuid: String,
    /// The name in its superblocks (`openmediavault:0`), kept there.
    pub name: Option<String>,
    /// Kernel names of the members md assembles (`sdb`, `sdc5`), at
    /// planning: the steps find them again by disk and partition.
    pub devices: Vec<String>,
    /// How many members it has when whole.
    pub raid_devices: usize,
    /// Each member disk (kernel name at planning) with the partition that
    /// holds its superblock; None for a whole-disk member.
    pub partitions: Vec<(String, Option<u32>)>,
    /// Members are missing: it is started degraded (`--run`).
    pub degraded: bool,
    /// Disks holding an older copy of a member, which md leaves out: no
    /// other entry takes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_behind: Vec<String>,
    /// A ZFS pool last used by another system and not exported there:
    /// imported with `-f`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// A pool's encrypted datasets, which stay locked (nasforge loads no
    /// keys), each with the folder it mounts at once its key is loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locked: Vec<Locked>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    pub dataset: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub disk: Disk,
    /// It holds something that will be erased (the recipe allowed it).
    pub erase: bool,
    /// A hot spare: it holds no data until md or ZFS rebuilds a failed
    /// member onto it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spare: bool,
    /// A pool's parity disk: it holds SnapRAID's parity, not files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parity: bool,
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
    /// The array's name, or the kept disk's when `kept`.
    pub array: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
    /// The disk the refusal is about; None when it is about the array as a whole.
    pub disk: Option<String>,
    pub reason: String,
    /// The recipe key to change (`storage.arrays[0].parity`), when one
    /// value is the cause: setup points at its line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.kept { "kept disk" } else { "array" };
        match &self.disk {
            Some(disk) => write!(f, "{what} '{}': {disk}: {}", self.array, self.reason),
            None => write!(f, "{what} '{}': {}", self.array, self.reason),
        }
    }
}

impl ArrayPlan {
    /// Disks' worth of data: the active members less their parity.
    pub fn data_disks(&self) -> usize {
        estimates::data_disks(
            self.spec.level,
            self.active().count(),
            self.spec.vdev_count(),
        )
    }

    /// The members that hold data: all but the hot spares.
    pub fn active(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.spare)
    }

    pub fn spares(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.spare)
    }

    /// The active members in their groups (a pool's vdevs, a nested md
    /// array's legs; one group otherwise), cut in order into equal widths.
    pub fn groups(&self) -> Vec<Vec<&Member>> {
        let active: Vec<&Member> = self.active().collect();
        let width = (active.len() / self.spec.vdev_count()).max(1);
        active.chunks(width).map(<[&Member]>::to_vec).collect()
    }

    /// All members the same size? (md raid0 needs a layout otherwise.)
    pub fn equal_members(&self) -> bool {
        self.members
            .windows(2)
            .all(|w| w[0].disk.size == w[1].disk.size)
    }
}

/// The failing disks the recipe accepts, by serial: kernel name → why.
fn accepted_failing(storage: &Storage, inventory: &Inventory) -> BTreeMap<String, String> {
    inventory
        .failing
        .iter()
        .filter(|(name, _)| {
            inventory.disks.iter().any(|d| {
                d.name == **name
                    && d.serial
                        .as_ref()
                        .is_some_and(|s| storage.allow_failing.contains(s))
            })
        })
        .map(|(n, w)| (n.clone(), w.clone()))
        .collect()
}

/// Plans every array in order; a disk taken by one array is not offered to
/// the next. Refusals are collected for all arrays, not just the first.
pub fn plan(
    storage: &Storage,
    shares: &[Share],
    inventory: &Inventory,
) -> Result<Plan, Vec<Refusal>> {
    let accepted = accepted_failing(storage, inventory);
    let mut trusted;
    let inventory = if accepted.is_empty() {
        inventory
    } else {
        trusted = inventory.clone();
        trusted
            .failing
            .retain(|name, _| !accepted.contains_key(name));
        &trusted
    };
    let mut taken: Vec<String> = Vec::new();
    let mut arrays = Vec::new();
    let mut refusals = Vec::new();
    // The mirror's disk first: `count = "all"` must not hand it to an array.
    let system_mirror = storage.system_mirror.as_ref().and_then(|spec| {
        match mirror::plan_mirror(spec, inventory, &taken) {
            Ok(m) => {
                taken.push(m.disk.name.clone());
                Some(m)
            }
            Err(r) => {
                refusals.push(r);
                None
            }
        }
    });
    // Kept disks first: an array's rules must never reach a disk someone
    // asked to keep.
    let mut kept = Vec::new();
    for (index, spec) in storage.disks.iter().enumerate() {
        match kept::plan_kept(index, spec, inventory, &taken) {
            Ok(k) => {
                taken.push(k.disk.name.clone());
                kept.push(k);
            }
            Err(r) => refusals.push(r),
        }
    }
    // Arrays adopted as they are next: their members are data, and no
    // other entry's rules may reach them.
    let mut imports: BTreeMap<usize, Result<ArrayPlan, Vec<Refusal>>> = BTreeMap::new();
    for (index, spec) in storage.arrays.iter().enumerate().filter(|(_, a)| a.import) {
        let planned = if spec.is_zfs() {
            import_pool::plan_pool_import(index, spec, inventory, &taken)
        } else {
            import::plan_import(index, spec, inventory, &taken)
        };
        if let Ok(array) = &planned {
            taken.extend(array.members.iter().map(|m| m.disk.name.clone()));
            taken.extend(array.imported.iter().flat_map(|i| i.left_behind.clone()));
        }
        imports.insert(index, planned);
    }
    for (index, spec) in storage.arrays.iter().enumerate() {
        let planned = if let Some(imported) = imports.remove(&index) {
            match imported {
                Ok(array) => {
                    arrays.push(array);
                    continue;
                }
                Err(r) => Err(r),
            }
        } else if spec.level == crate::spec::Level::Pool {
            pool::plan_pool(index, spec, inventory, &taken, &kept)
        } else {
            members::plan_array(index, spec, inventory, &taken)
        };
        match planned {
            Ok(mut array) => {
                taken.extend(array.members.iter().map(|m| m.disk.name.clone()));
                for m in &array.members {
                    if let Some(why) = accepted.get(&m.disk.name) {
                        array.warnings.push(format!(
                            "{} is failing by SMART's account ({why}); used as storage.allow_failing says",
                            m.disk.words()
                        ));
                    }
                }
                arrays.push(array);
            }
            Err(mut r) => refusals.append(&mut r),
        }
    }
    for (index, share) in shares.iter().enumerate() {
        if let Some((array, why)) = locked_share(&arrays, &share.path) {
            refusals.push(Refusal {
                array: array.to_string(),
                kept: false,
                disk: None,
                reason: format!("share '{}': {why}", share.name),
                at: Some(format!("shares[{index}].path")),
            });
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let alert = match (&storage.alert_program, &storage.mailaddr) {
        (Some(program), _) => Alert::Program(program.clone()),
        (None, Some(mail)) => Alert::Mail(mail.clone()),
        (None, None) => Alert::Program(crate::paths::MDADM_EVENT.into()),
    };
    Ok(Plan {
        arrays,
        shares: shares.to_vec(),
        alert,
        spin_down: storage.spin_down,
        kept,
        system_mirror,
    })
}

/// The pool holding `path` in one of its locked datasets, and why a share
/// there is refused: it would serve an empty folder, and files written to
/// it would go under the dataset, hidden once its key is loaded.
fn locked_share<'a>(arrays: &'a [ArrayPlan], path: &str) -> Option<(&'a str, String)> {
    arrays.iter().find_map(|a| {
        let locked = a
            .imported
            .iter()
            .flat_map(|i| &i.locked)
            .find(|l| path == l.path || crate::spec::is_under(path, &l.path))?;
        Some((
            a.spec.name.as_str(),
            format!(
                "{path} is in the encrypted dataset {}, which stays locked (nasforge loads no keys): the share would serve an empty folder, and files written there would be hidden once its key is loaded; share a folder outside {}",
                crate::machine::printable(&locked.dataset),
                locked.path
            ),
        ))
    })
}

impl Plan {
    /// Why a share at `path` may not be served on this plan: not on any of
    /// its arrays, pools or kept disks ([`Plan::homeless`]), or in a locked
    /// dataset of an adopted pool.
    pub fn unservable(&self, path: &str) -> Option<String> {
        self.homeless(path)
            .or_else(|| locked_share(&self.arrays, path).map(|(_, why)| why))
    }

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

    /// The kept disk a path lies on.
    pub fn kept_of(&self, path: &str) -> Option<&KeptPlan> {
        self.kept.iter().find(|k| {
            let m = k.spec.mount.as_str();
            path == m || path.starts_with(&format!("{m}/"))
        })
    }

    /// Why a share at `path` may not be served on this plan: it is on none
    /// of its arrays, pools or kept disks, so root would make a system
    /// directory the share's (`/` chowned to a share user, exported to the
    /// network). Asked of the plan setup made, never of the card's recipe
    /// alone: a NAS the wizard set up keeps `mode = "wizard"` and no
    /// arrays there.
    pub fn homeless(&self, path: &str) -> Option<String> {
        if self.array_of(path).is_some() || self.kept_of(path).is_some() {
            return None;
        }
        let mounts: Vec<&str> = self
            .arrays
            .iter()
            .map(|a| a.spec.mount.as_str())
            .chain(self.kept.iter().map(|k| k.spec.mount.as_str()))
            .collect();
        Some(format!(
            "{path} is on none of the arrays, pools or kept disks setup made ({}), so nasforge would hand a system directory to the share; put it under one of them",
            if mounts.is_empty() {
                "there are none".to_string()
            } else {
                mounts.join(", ")
            }
        ))
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
}
