//! A ZFS pool another machine made, adopted as it is (`import = true` with
//! `filesystem = "zfs"`): which of the pools `zpool import` lists the
//! recipe means, whether its layout is the recipe's level, and whether
//! zpool can import it without being told to discard anything. Nothing
//! here plans a write to its disks.

use super::estimates::{capacity_in, throughput, tolerance_in};
use super::import::the_one;
use super::members::refuse;
use super::{ArrayPlan, Imported, Locked, Member, Refusal, Tolerance};
use crate::machine::disks::{Disk, Inventory};
use crate::machine::existing_pool::{ExistingPool, Probed};
use crate::machine::printable;
use crate::machine::zfs::ZfsOnBoard;
use crate::size::Size;
use crate::spec::{Array, is_under};

/// The pools found, as setup's log and a refusal list them.
fn found(inventory: &Inventory) -> String {
    if inventory.existing_pools.is_empty() {
        "zpool import lists no pool on the disks".to_string()
    } else {
        let all: Vec<String> = inventory
            .existing_pools
            .iter()
            .map(|p| p.to_string())
            .collect();
        format!("zpool import lists: {}", all.join("; "))
    }
}

pub(super) fn plan_pool_import(
    index: usize,
    spec: &Array,
    inventory: &Inventory,
    taken: &[String],
) -> Result<ArrayPlan, Vec<Refusal>> {
    let at = |key: &str| Some(format!("storage.arrays[{index}].{key}"));
    if let ZfsOnBoard::Unavailable(why) = &inventory.zfs {
        return Err(vec![refuse(
            spec,
            None,
            format!("a ZFS pool cannot be imported on this board: {why}"),
        )]);
    }
    let matching: Vec<&ExistingPool> = inventory
        .existing_pools
        .iter()
        .filter(|p| match &spec.uuid {
            Some(id) => *id == p.id,
            None => p.name == spec.name,
        })
        .collect();
    let wanted = match &spec.uuid {
        Some(id) => format!("with id {id}"),
        None => format!("called '{}'", spec.name),
    };
    let pool = the_one(
        index,
        spec,
        &matching,
        &format!(
            "no ZFS pool {wanted} is on the disks to import; {}",
            found(inventory)
        ),
        ("pools", "<id>"),
    )?;
    let mut refusals = Vec::new();
    if pool.name != spec.name {
        refusals.push(Refusal {
            at: at("name"),
            ..refuse(
                spec,
                None,
                format!(
                    "the pool with id {} is called '{}': a pool keeps its name when it is imported (renaming it writes every label), so set name = \"{}\"",
                    pool.id,
                    crate::machine::printable(&pool.name),
                    crate::machine::printable(&pool.name)
                ),
            )
        });
    }
    if pool.layout != spec.level.to_string() {
        refusals.push(Refusal {
            at: at("level"),
            ..refuse(
                spec,
                None,
                if pool.layout == "mixed" || pool.layout.starts_with("draid") {
                    format!("the pool on the disks is {pool}: its vdevs are not all of one kind nasforge knows (raidz1, raidz2, raidz3, mirror, stripe), so it is not adopted")
                } else {
                    format!(
                        "the pool on the disks is {pool}, not {}; if it is the one you mean, set level = \"{}\"",
                        spec.level, pool.layout
                    )
                },
            )
        });
    }
    if let Some(why) = pool.unimportable() {
        refusals.push(refuse(
            spec,
            None,
            format!(
                "cannot be imported: {why} (nasforge never imports with -F or -X, which discard the pool's latest writes)"
            ),
        ));
    }
    if let Some(why) = &pool.unreadable {
        refusals.push(refuse(
            spec,
            None,
            format!("its datasets could not be looked at (a read-only import): {why}"),
        ));
    }
    if let Some(probed) = &pool.probed {
        refusals.extend(
            looked_inside(pool, probed, &spec.mount)
                .into_iter()
                .map(|why| refuse(spec, None, why)),
        );
    }
    let mut members: Vec<&Disk> = Vec::new();
    for name in pool.disks() {
        let Some(disk) = inventory.disks.iter().find(|d| d.name == name) else {
            continue;
        };
        if taken.contains(&disk.name) {
            refusals.push(refuse(
                spec,
                Some(&disk.name),
                "holds a disk of this pool, but an earlier entry of the recipe takes the disk"
                    .into(),
            ));
        } else if let Some(why) = disk.in_use.first() {
            refusals.push(refuse(
                spec,
                Some(&disk.name),
                format!("holds a disk of this pool, but {why}"),
            ));
        }
        if !members.iter().any(|m| m.name == disk.name) {
            members.push(disk);
        }
    }
    if members.is_empty() && refusals.is_empty() {
        refusals.push(refuse(
            spec,
            None,
            format!("none of the disks of {pool} could be found among this machine's disks"),
        ));
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let missing = pool.members.iter().filter(|m| m.state != "ONLINE").count();
    let sizes: Vec<u64> = members.iter().map(|d| d.size.0).collect();
    let (capacity, lost) = capacity_in(spec.level, &sizes, pool.vdevs);
    let mut warnings = Vec::new();
    if pool.state != "ONLINE" {
        warnings.push(format!(
            "zpool lists it {}: {}",
            pool.state,
            pool.status
                .as_deref()
                .unwrap_or("some of its disks are not here")
        ));
    }
    if pool.needs_force() {
        warnings.push(
            "it was last used by another system and not exported there, so it is imported with -f: do not put its disks back into that machine while this one uses them"
                .to_string(),
        );
    }
    if !pool.other.is_empty() {
        warnings.push(format!(
            "its {} come along as they are",
            pool.other.join(" and ")
        ));
    }
    for d in pool.probed.iter().flat_map(|p| &p.datasets) {
        if d.name != pool.name && d.encryption != "off" {
            warnings.push(format!(
                "dataset {} is encrypted ({}) and stays locked: zfs load-key {} then zfs mount {} opens it; nasforge shares nothing inside it",
                printable(&d.name),
                d.encryption,
                printable(&d.name),
                printable(&d.name)
            ));
        }
    }
    warnings.push(format!(
        "it keeps its name '{}'; its top dataset is mounted at {} (its mountpoint property is set there if it says otherwise), and its datasets below it",
        crate::machine::printable(&pool.name),
        spec.mount
    ));
    warnings.push(format!(
        "its files keep the owners and modes they had on the old machine; check them with ls -ln {} before sharing",
        spec.mount
    ));
    let whole = tolerance_in(spec.level, pool.members.len(), pool.vdevs);
    Ok(ArrayPlan {
        spec: spec.clone(),
        members: members
            .iter()
            .map(|d| Member {
                disk: (*d).clone(),
                erase: false,
                spare: false,
                parity: false,
            })
            .collect(),
        capacity,
        lost_to_mixed_sizes: Size(lost.0),
        tolerance: Tolerance {
            guaranteed: whole.guaranteed.saturating_sub(missing),
            best_case: whole.best_case.saturating_sub(missing),
        },
        throughput: throughput(spec.level, pool.vdevs, &members, inventory),
        warnings,
        skipped: Vec::new(),
        ashift: None,
        joined: Vec::new(),
        imported: Some(Imported {
            uuid: pool.id.clone(),
            name: Some(pool.name.clone()),
            devices: pool.members.iter().map(|m| m.name.clone()).collect(),
            raid_devices: pool.members.len(),
            partitions: members.iter().map(|d| (d.name.clone(), None)).collect(),
            degraded: missing > 0,
            left_behind: Vec::new(),
            force: pool.needs_force(),
            locked: pool
                .probed
                .as_ref()
                .map(|p| locked(pool, p, &spec.mount))
                .unwrap_or_default(),
        }),
    })
}

/// The pool's encrypted datasets below its top, each with the folder it
/// mounts at once the top is at `mount`: its own mountpoint, or its
/// parent's folder and its own name (`zfs get -r` lists parents first).
fn locked(pool: &ExistingPool, probed: &Probed, mount: &str) -> Vec<Locked> {
    let mut folders: Vec<(&str, String)> = Vec::new();
    let mut out = Vec::new();
    for d in &probed.datasets {
        let folder = if d.name == pool.name {
            mount.to_string()
        } else if d.own_mountpoint {
            d.mountpoint.clone()
        } else {
            let (parent, leaf) = d.name.rsplit_once('/').unwrap_or((&pool.name, &d.name));
            let above = folders
                .iter()
                .find(|(name, _)| *name == parent)
                .map_or(mount.to_string(), |(_, f)| f.clone());
            format!("{above}/{leaf}")
        };
        if d.name != pool.name && d.encryption != "off" {
            out.push(Locked {
                dataset: d.name.clone(),
                path: folder.clone(),
            });
        }
        folders.push((&d.name, folder));
    }
    out
}

/// Why what a read-only look inside found keeps the pool from being
/// adopted: an operating system's pool, a dataset `zfs mount -a` would
/// mount outside `mount` (over this board's own folders: OpenZFS mounts
/// over a folder that is not empty), a top dataset no key was loaded for.
fn looked_inside(pool: &ExistingPool, probed: &Probed, mount: &str) -> Vec<String> {
    let name = printable(&pool.name);
    let system = probed
        .bootfs
        .as_ref()
        .map(|b| format!("its bootfs is {}", printable(b)))
        .or_else(|| {
            probed
                .datasets
                .iter()
                .find(|d| d.mountpoint == "/")
                .map(|d| format!("{} mounts at /", printable(&d.name)))
        });
    if let Some(system) = system {
        return vec![format!(
            "it is an operating system's pool ({system}): nasforge adopts pools of data only, and mounting a system's datasets would put them over this board's own /, /home or /var"
        )];
    }
    // A pool last used by another system is imported here only with -f,
    // so the way to mend it here says so.
    let import = if pool.needs_force() {
        format!("zpool import -N -f {name}")
    } else {
        format!("zpool import -N {name}")
    };
    let mut why = Vec::new();
    for d in &probed.datasets {
        if d.name != pool.name
            && d.own_mountpoint
            && d.canmount == "on"
            && !matches!(d.mountpoint.as_str(), "none" | "legacy")
            && d.mountpoint != mount
            && !is_under(&d.mountpoint, mount)
        {
            let dataset = printable(&d.name);
            why.push(format!(
                "its dataset {dataset} has a mountpoint of its own, {}, outside {mount}, where zfs mount -a would mount it; on the old machine, or here after {import}, run zfs inherit mountpoint {dataset} (or zfs set canmount=noauto {dataset}), then zpool export {name} and run setup again",
                printable(&d.mountpoint)
            ));
        }
    }
    if let Some(top) = probed.datasets.iter().find(|d| d.name == pool.name)
        && top.encryption != "off"
    {
        why.push(format!(
            "its top dataset is encrypted ({}): nasforge loads no keys, so nothing of it could be mounted or shared",
            top.encryption
        ));
    }
    why
}
