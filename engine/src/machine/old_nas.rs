//! An old NAS's md arrays and ZFS pools on the disks: what another machine
//! made, read from the superblocks and labels and looked into read-only, so
//! that a recipe's `import = true`, the wizard and `apply` can adopt one,
//! and setup's log can list them for a person to name.

use super::disks::{Host, Inventory};
use super::existing::{self, ExistingMd};
use super::existing_pool::{self, ExistingPool};
use super::md_contents;
use crate::command::Ask;

/// The devices (kernel names) that carry an md superblock by udev's or the
/// probe's account, each with its disk: what `mdadm --examine` is asked
/// about.
fn md_member_devices(inventory: &Inventory) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // The disk the system runs from is never adopted (its own mirror is
    // on it, on a PC).
    let not_boot = |d: &&super::disks::Disk| {
        !d.in_use
            .iter()
            .any(|u| matches!(u, super::disks::InUse::Boot))
    };
    for disk in inventory.disks.iter().filter(not_boot) {
        for (device, sig) in disk.all_contents() {
            if matches!(sig, super::signature::Signature::MdMember { .. })
                && !out.iter().any(|(d, _): &(String, String)| *d == device)
            {
                out.push((device, disk.name.clone()));
            }
        }
    }
    out
}

/// The arrays on `inventory`'s disks, asking mdadm about each member.
/// A device mdadm cannot read is left out: it was only ever offered as
/// holding data, and stays so. Each array md would run is looked into
/// read-only ([`md_contents::probe`]), so that the planner sees what it
/// holds.
fn existing_arrays(host: &Host, inventory: &Inventory, ask: &mut dyn Ask) -> Vec<ExistingMd> {
    let examined = md_member_devices(inventory)
        .into_iter()
        .filter_map(|(device, disk)| {
            let out = ask.query(&existing::examine_cmd(&device)).ok()?;
            let mut e = (out.status == 0)
                .then(|| existing::parse_examine(&out.stdout))
                .flatten()?;
            e.spare = ask
                .query(&existing::examine_long_cmd(&device))
                .is_ok_and(|long| existing::is_spare(&long.stdout));
            Some((device, disk, e))
        })
        .collect();
    let mut arrays = existing::group(examined);
    for md in arrays.iter_mut().filter(|md| md.unstartable().is_none()) {
        match md_contents::probe(md, host, ask) {
            Ok(holds) => md.holds = Some(holds),
            Err(why) => md.unreadable = Some(why),
        }
    }
    arrays
}

/// The pools `zpool import` lists on `inventory`'s disks, each member
/// traced to its disk; asked only when a disk carries a ZFS label and
/// zpool is installed. The listing reads the labels and imports nothing;
/// each pool zpool could import is then looked into read-only
/// ([`existing_pool::probe`]), so that the planner sees an operating
/// system's pool and datasets that would mount outside the recipe's mount.
fn existing_pools(host: &Host, inventory: &Inventory, ask: &mut dyn Ask) -> Vec<ExistingPool> {
    let labelled = inventory.disks.iter().any(|d| {
        d.all_contents()
            .iter()
            .any(|(_, s)| matches!(s, super::signature::Signature::ZfsMember))
    });
    if !labelled || super::zfs::tool(host, "zpool").is_none() {
        return Vec::new();
    }
    let Ok(out) = ask.query(&existing_pool::list_cmd()) else {
        return Vec::new();
    };
    // A name is a link under /dev/disk/by-id (a whole disk's shown without
    // its -part1), or under /dev when zpool found it there.
    let disk_of = |name: &str| {
        ["/dev/disk/by-id/", "/dev/"]
            .iter()
            .find_map(|dir| super::disks::kernel_name(host, &format!("{dir}{name}")))
            .and_then(|kernel| {
                inventory
                    .disks
                    .iter()
                    .find(|d| d.name == kernel || d.partitions.iter().any(|p| p.name == kernel))
                    .map(|d| d.name.clone())
            })
    };
    super::zfs_report::parse_zpool_import(&out.stdout)
        .iter()
        .map(|l| {
            let mut pool = ExistingPool::from_listing(l, &disk_of);
            if pool.unimportable().is_none() {
                match existing_pool::probe(&pool, ask) {
                    Ok(probed) => pool.probed = Some(probed),
                    Err(why) => pool.unreadable = Some(why),
                }
            }
            pool
        })
        .collect()
}

/// Fills `inventory` with the md arrays and ZFS pools another machine made:
/// read from the superblocks and labels, each looked into read-only (an
/// array assembled read-only and stopped, a pool imported read-only under
/// another name and exported), nothing written to their disks.
pub fn find(host: &Host, inventory: &mut Inventory, ask: &mut dyn Ask) {
    inventory.existing = existing_arrays(host, inventory, ask);
    inventory.existing_pools = existing_pools(host, inventory, ask);
}
