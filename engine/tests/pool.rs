//! A pool of mismatched disks (`level = "pool"`): which disks hold parity,
//! what the plan says it holds and costs, what it refuses, and the steps:
//! a kept disk is never written, each blank disk gets its own filesystem.

use nasforge_engine::machine::disks::Disk;
use nasforge_engine::planner::{self, Plan, Refusal};
use nasforge_engine::size::Size;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{self, Action, Context};
use nasforge_testkit::disks::{self, inventory};
use std::path::Path;

const GB: u64 = 1_000_000_000;

const RECIPE: &str = disks::POOL_RECIPE;

fn usb_disk(name: &str, size: u64, model: &str) -> Disk {
    disks::usb(name, size, model)
}

fn photos(name: &str, size: u64) -> Disk {
    disks::photos(name, size, "Elements")
}

fn plan(recipe: &str, disks: Vec<Disk>) -> Result<Plan, Vec<Refusal>> {
    let recipe = DeviceRecipe::parse(recipe, Path::new("recipe.toml")).unwrap();
    planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &inventory(disks),
    )
}

fn seed_disks() -> Vec<Disk> {
    vec![
        usb_disk("sda", 1000 * GB, "Blank"),
        usb_disk("sdb", 3000 * GB, "Blank"),
        usb_disk("sdc", 2000 * GB, "Blank"),
        photos("sdd", 2000 * GB),
    ]
}

fn refusal(result: Result<Plan, Vec<Refusal>>) -> String {
    let refusals = result.expect_err("the plan should be refused");
    refusals
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_largest_blank_disk_holds_parity_and_the_pool_holds_the_sum_of_the_others() {
    let plan = plan(RECIPE, seed_disks()).unwrap();
    let pool = &plan.arrays[0];
    let parity: Vec<&str> = pool
        .members
        .iter()
        .filter(|m| m.parity)
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(parity, ["sdb"]);
    assert_eq!(pool.capacity, Size(5000 * GB));
    assert_eq!(pool.joined[0].spec.name, "photos");
    let text = plan.describe();
    for line in [
        "Pool 'pool': 3 data disk(s) joined by mergerfs at /srv/pool, 1 parity disk (SnapRAID), each disk its own ext4 filesystem under /mnt/pool",
        "  parity: sdb:",
        "  data: sda:",
        "  data, kept as it is: sdd (",
        "  capacity: about 5 TB (the data disks' sum",
        "  survives: 1 lost disk(s): their files are restored from parity as of the last sync",
        "  speed: one disk's",
        "Kept disk 'photos'",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // raid5 over the same three blank disks would hold 2 TB.
    assert!(!text.contains("unused because members differ"), "{text}");
}

/// USB disks enumerate in whichever order their bridges answer: the same
/// disks under other device names, listed in another order, get the same
/// slots, the smallest data disk first.
#[test]
fn the_same_disks_get_the_same_slots_whatever_order_they_enumerate_in() {
    let slots = |disks: Vec<Disk>| -> Vec<(bool, Option<String>)> {
        plan(RECIPE, disks).unwrap().arrays[0]
            .members
            .iter()
            .map(|m| (m.parity, m.disk.serial.clone()))
            .collect()
    };
    let first = slots(seed_disks());
    let mut other = seed_disks();
    other.reverse();
    for (d, name) in other.iter_mut().zip(["sde", "sdf", "sdg", "sdh"]) {
        d.name = name.into();
    }
    assert_eq!(slots(other), first);
    let serial = |s: &str| Some(s.to_string());
    assert_eq!(
        first,
        [
            (false, serial("SN-sda")),
            (false, serial("SN-sdc")),
            (true, serial("SN-sdb"))
        ]
    );
}

#[test]
fn no_step_writes_to_the_kept_disk_and_each_blank_disk_gets_its_own_filesystem() {
    let plan = plan(RECIPE, seed_disks()).unwrap();
    let ctx = Context {
        hostname: "pinas".into(),
        system_uuid: None,
        fs_uuids: vec!["0b6d3c9e-2222-4222-8333-444455556666".into()],
    };
    let steps = steps::generate(&plan, &ctx);
    let argvs: Vec<String> = steps
        .iter()
        .flat_map(|s| &s.actions)
        .filter_map(|a| match a {
            Action::Run(cmd) => Some(cmd.argv.join(" ")),
            Action::WriteGpt { device, .. } => Some(format!("gpt {device}")),
            _ => None,
        })
        .collect();
    assert!(
        !argvs
            .iter()
            .any(|a| a.contains("usb-TEST_sdd") || a.contains("gpt /dev/sdd")),
        "{argvs:#?}"
    );
    let mkfs: Vec<&String> = argvs.iter().filter(|a| a.starts_with("mkfs")).collect();
    assert_eq!(mkfs.len(), 3, "{mkfs:#?}");
    assert!(
        mkfs.iter()
            .any(|a| a.starts_with("mkfs.ext4 -F -m 0 -T largefile4 -U ")
                && a.ends_with("-L pool-parity /dev/disk/by-id/usb-TEST_sdb-part1")),
        "{mkfs:#?}"
    );
    assert!(!argvs.iter().any(|a| a.starts_with("mdadm")), "{argvs:#?}");
    let files: Vec<(&String, &String)> = steps
        .iter()
        .flat_map(|s| &s.actions)
        .filter_map(|a| match a {
            Action::WriteFile { path, contents, .. } => Some((path, contents)),
            Action::ManagedBlock { path, contents } => Some((path, contents)),
            _ => None,
        })
        .collect();
    let file = |p: &str| files.iter().find(|(path, _)| *path == p).unwrap().1.clone();
    let conf = file("/etc/snapraid.conf");
    for line in [
        "parity /mnt/pool/parity1/snapraid.parity\n",
        "content /var/lib/snapraid/snapraid.content\n",
        "content /mnt/pool/d1/snapraid.content\n",
        "data d1 /mnt/pool/d1/\n",
        "data d2 /mnt/pool/d2/\n",
        "data photos /srv/photos/\n",
    ] {
        assert!(conf.contains(line), "missing {line:?} in:\n{conf}");
    }
    assert!(!conf.contains("/srv/photos/snapraid.content"), "{conf}");
    let fstab = file("/etc/fstab");
    assert_eq!(fstab.lines().count(), 4, "{fstab}");
    assert!(
        fstab.contains("  /mnt/pool/parity1  ext4  defaults,nofail  0  2"),
        "{fstab}"
    );
    assert!(
        fstab.contains("UUID=0b6d3c9e-1111-4222-8333-444455556666  /srv/photos  "),
        "{fstab}"
    );
    let unit = file("/etc/systemd/system/nasforge-pool-pool.service");
    assert!(
        unit.contains("Wants=mnt-pool-d1.mount mnt-pool-d2.mount srv-photos.mount\n"),
        "{unit}"
    );
    // The kept disk is mounted before the pool that joins it.
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    let pos = |id: &str| ids.iter().position(|i| *i == id).unwrap();
    assert!(pos("mount:photos") < pos("mount:pool"), "{ids:?}");
}

#[test]
fn a_kept_disk_larger_than_every_blank_disk_cannot_hold_parity() {
    let mut disks = seed_disks();
    disks[3] = photos("sdd", 4000 * GB);
    let refused = plan(RECIPE, disks.clone()).unwrap_err();
    assert_eq!(
        refused[0].at.as_deref(),
        Some("storage.arrays[0].parity"),
        "setup points at its line"
    );
    let e = refusal(plan(RECIPE, disks));
    assert!(
        e.contains("array 'pool': the kept disk 'photos' (sdd, 4 TB) is larger than sdb (3 TB), the largest blank disk, which would hold the parity")
            && e.contains("Add a blank disk of at least 4 TB for parity, or set storage.arrays[0].parity = 0"),
        "{e}"
    );
    // Without parity nothing needs to be that large.
    let plan = plan(&RECIPE.replace("parity = 1", "parity = 0"), seed_disks()).unwrap();
    assert!(plan.arrays[0].members.iter().all(|m| !m.parity));
    assert!(
        plan.describe()
            .contains("warning: parity = 0: a lost disk's files are lost with it"),
        "{}",
        plan.describe()
    );
}

#[test]
fn disks_of_one_size_are_refused_in_favour_of_the_array_that_holds_as_much() {
    let recipe = RECIPE[..RECIPE.find("keep = [").unwrap()].to_string();
    let same = || {
        vec![
            usb_disk("sda", 2000 * GB, "Blank"),
            usb_disk("sdb", 2000 * GB, "Blank"),
            usb_disk("sdc", 2000 * GB, "Blank"),
        ]
    };
    let e = refusal(plan(&recipe, same()));
    assert!(
        e.contains("raid5 over these 3 disks holds 4 TB, as much as the pool (4 TB)")
            && e.contains("write level = \"raid5\" and remove parity in storage.arrays[0]"),
        "{e}"
    );
    let e = refusal(plan(&recipe, same()[..2].to_vec()));
    assert!(
        e.contains("raid1 over these 2 disks holds 2 TB, as much as the pool (2 TB)"),
        "{e}"
    );
    // Mismatched sizes, or a kept disk, are what a pool is for.
    let mut mixed = same();
    mixed[0].size = Size(1000 * GB);
    assert!(plan(&recipe, mixed).is_ok());
    let mut with_kept = same();
    with_kept.push(photos("sdd", 1000 * GB));
    assert!(plan(RECIPE, with_kept).is_ok());
    let two_sizes = vec![
        usb_disk("sda", 1000 * GB, "Blank"),
        usb_disk("sdb", 3000 * GB, "Blank"),
    ];
    let e = refusal(plan(&recipe, two_sizes));
    assert!(
        e.contains("raid1 over these 2 disks holds 1 TB, as much as the pool (1 TB)"),
        "{e}"
    );
}

#[test]
fn a_disk_holding_files_is_never_erased_but_pointed_to_keep() {
    let recipe = RECIPE.replace("model = \"Blank*\"", "model = \"*\"");
    let mut disks = seed_disks();
    disks[0] = photos("sda", 1000 * GB);
    disks[0].model = Some("Blank old".into());
    let e = refusal(plan(&recipe, disks));
    assert!(
        e.contains("array 'pool': sda: holds")
            && e.contains("describe it in a [[storage.disks]] with keep = true and list its name in storage.arrays[0].keep"),
        "{e}"
    );
}

#[test]
fn too_few_blank_disks_for_the_parity_is_refused_with_every_disk_named() {
    let recipe = RECIPE[..RECIPE.find("keep = [").unwrap()].replace("parity = 1", "parity = 2");
    let e = refusal(plan(&recipe, seed_disks()[..2].to_vec()));
    assert!(
        e.contains("array 'pool': needs 3 disks matching { transport = \"usb\", model = \"Blank*\", count = \"all\" }, but only 2 can be used; sda can be used; sdb can be used"),
        "{e}"
    );
}
