//! Planner tables: every level over disk counts and mixed sizes, with the
//! expected capacities worked out by hand; then the refusal rules.

use nasforge_testkit::board as common;
use nasforge_testkit::disks::inventory;

use nasforge_engine::machine::disks::{
    Controller, Disk, InUse, Inventory, MdArray, NetworkLink, RotationalSource,
};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::planner::{self, Refusal, Tolerance};
use nasforge_engine::size::Size;
use nasforge_engine::spec::{Array, Count, DiskMatch, Filesystem, Level, Mode, Storage, Transport};

const TB: u64 = 1_000_000_000_000;

fn disk(name: &str, size: u64, transport: Transport, rotational: bool) -> Disk {
    Disk {
        name: name.into(),
        major: 8,
        minor: 0,
        size: Size(size),
        logical_block_size: 512,
        physical_block_size: None,
        model: Some("TEST DISK".into()),
        serial: Some(format!("SN-{name}")),
        wwn: None,
        transport: Some(transport),
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
    }
}

fn sata_tb(sizes_tb: &[u64]) -> Vec<Disk> {
    sizes_tb
        .iter()
        .enumerate()
        .map(|(i, tb)| {
            disk(
                &format!("sd{}", (b'a' + i as u8) as char),
                tb * TB,
                Transport::Sata,
                true,
            )
        })
        .collect()
}

fn array(name: &str, level: Level, rules: DiskMatch) -> Array {
    Array {
        vdevs: None,
        spares: 0,
        parity: None,
        keep: Vec::new(),
        name: name.into(),
        level,
        disk_match: Some(rules),
        filesystem: Filesystem::Ext4,
        mount: format!("/srv/{name}"),
        wipe: false,
        import: false,
        uuid: None,
    }
}

fn storage(arrays: Vec<Array>) -> Storage {
    Storage {
        mode: Mode::Unattended,
        arrays,
        mailaddr: None,
        alert_program: None,
        spin_down: nasforge_engine::spec::SpinDown::Off,
        disks: Vec::new(),
        usb_quirks: Vec::new(),
        system_mirror: None,
        allow_failing: Vec::new(),
    }
}

fn all_sata() -> DiskMatch {
    DiskMatch {
        transport: Some(Transport::Sata),
        ..DiskMatch::default()
    }
}

#[test]
fn every_level_over_counts_and_mixed_sizes() {
    // (level, member sizes in TB, capacity TB, lost to mixed sizes TB, survives (guaranteed, best case))
    type Row = (Level, &'static [u64], u64, u64, (usize, usize));
    let table: &[Row] = &[
        (Level::Raid0, &[4, 4], 8, 0, (0, 0)),
        (Level::Raid0, &[4, 4, 4, 4], 16, 0, (0, 0)),
        (Level::Raid0, &[4, 8], 12, 0, (0, 0)), // md raid0 zones use every byte
        (Level::Raid0, &[2, 4, 8], 14, 0, (0, 0)),
        (Level::Raid1, &[4, 4], 4, 0, (1, 1)),
        (Level::Raid1, &[4, 4, 4], 4, 0, (2, 2)),
        (Level::Raid1, &[4, 8], 4, 4, (1, 1)),
        (Level::Raid5, &[4, 4, 4], 8, 0, (1, 1)),
        (Level::Raid5, &[4, 4, 4, 4], 12, 0, (1, 1)),
        (Level::Raid5, &[4, 4, 4, 4, 4], 16, 0, (1, 1)),
        (Level::Raid5, &[4, 8, 8], 8, 8, (1, 1)),
        (Level::Raid5, &[2, 4, 4, 4], 6, 6, (1, 1)),
        (Level::Raid6, &[4, 4, 4, 4], 8, 0, (2, 2)),
        (Level::Raid6, &[4, 4, 4, 4, 4], 12, 0, (2, 2)),
        (Level::Raid6, &[4, 4, 4, 4, 4, 4], 16, 0, (2, 2)),
        (Level::Raid6, &[3, 4, 4, 4], 6, 3, (2, 2)),
        (Level::Raid10, &[4, 4], 4, 0, (1, 1)),
        (Level::Raid10, &[4, 4, 4], 6, 0, (1, 1)), // near-2 layout over three disks
        (Level::Raid10, &[4, 4, 4, 4], 8, 0, (1, 2)),
        (Level::Raid10, &[4, 4, 4, 4, 4, 4], 12, 0, (1, 3)),
        (Level::Raid10, &[4, 4, 8, 8], 8, 8, (1, 2)),
        (Level::Single, &[4], 4, 0, (0, 0)),
    ];
    for &(level, sizes, capacity, lost, (guaranteed, best_case)) in table {
        let spec = storage(vec![array("data", level, all_sata())]);
        let plan = planner::plan(&spec, &[], &inventory(sata_tb(sizes)))
            .unwrap_or_else(|r| panic!("{level} {sizes:?} refused: {r:?}"));
        let a = &plan.arrays[0];
        let case = format!("{level} over {sizes:?} TB");
        assert_eq!(a.members.len(), sizes.len(), "{case}");
        assert_eq!(a.capacity, Size(capacity * TB), "{case}: capacity");
        assert_eq!(a.lost_to_mixed_sizes, Size(lost * TB), "{case}: lost");
        assert_eq!(
            a.tolerance,
            Tolerance {
                guaranteed,
                best_case
            },
            "{case}: tolerance"
        );
        let mixed_warning = a.warnings.iter().any(|w| w.contains("differ in size"));
        assert_eq!(
            mixed_warning,
            sizes.iter().any(|s| *s != sizes[0]),
            "{case}: {:?}",
            a.warnings
        );
        if lost > 0 {
            assert!(
                a.warnings
                    .iter()
                    .any(|w| w.contains(&Size(lost * TB).to_string())),
                "{case}: says how much is lost: {:?}",
                a.warnings
            );
        }
        assert_eq!(
            a.warnings.iter().any(|w| w.contains("no redundancy")),
            level == Level::Raid0,
            "{case}"
        );
    }
}

#[test]
fn too_few_disks_for_a_level_is_refused_with_the_minimum() {
    let table: &[(Level, usize, &str)] = &[
        (Level::Raid0, 1, "at least 2"),
        (Level::Raid1, 1, "at least 2"),
        (Level::Raid5, 2, "at least 3"),
        (Level::Raid6, 3, "at least 4"),
        (Level::Raid10, 1, "at least 2"),
        (Level::Single, 2, "takes one disk"),
    ];
    for &(level, n, expected) in table {
        let spec = storage(vec![array("data", level, all_sata())]);
        let refusals = planner::plan(&spec, &[], &inventory(sata_tb(&vec![4; n]))).unwrap_err();
        assert_eq!(refusals.len(), 1, "{level}: {refusals:?}");
        assert!(
            refusals[0].reason.contains(expected),
            "{level} with {n}: {}",
            refusals[0]
        );
    }
}

fn with_ext4(mut d: Disk) -> Disk {
    d.contents = vec![Signature::Filesystem {
        fstype: "ext4".into(),
        label: Some("photos".into()),
        uuid: None,
    }];
    d
}

/// A card flashed again with the same recipe finds the array it made
/// before on the disks (`nas:data`, partition 1 of each): the refusal
/// offers keeping it, with import = true, before erasing it. An array of
/// another name gets only the usual words.
#[test]
fn a_disk_of_an_array_with_the_recipe_s_name_is_refused_with_import_offered_first() {
    let member = |name: &str, array: &str| {
        let mut d = disk(name, 4 * TB, Transport::Sata, true);
        d.contents = vec![Signature::PartitionTable {
            scheme: "gpt".into(),
        }];
        d.partitions = vec![nasforge_engine::machine::disks::Partition {
            name: format!("{name}1"),
            number: 1,
            start: 1 << 20,
            size: Size(4 * TB - (2 << 20)),
            contents: vec![Signature::MdMember {
                version: "1.2".into(),
                name: Some(array.into()),
            }],
        }];
        d
    };
    let spec = storage(vec![array("data", Level::Raid1, all_sata())]);
    let refusals = planner::plan(
        &spec,
        &[],
        &inventory(vec![member("sda", "nas:data"), member("sdb", "nas:data")]),
    )
    .unwrap_err();
    assert_eq!(
        refusals[0].reason,
        "holds a gpt partition table; sda1: an md RAID member of 'nas:data' and the recipe does not allow erasing it; it is a member of the md array 'nas:data', which has this array's name: to keep that array as it is, with its files (this recipe's own, set up before, or an old NAS's), put import = true in storage.arrays[0] in place of its disks; to erase it, back it up and set wipe = true in storage.arrays[0], or take the disk out"
    );
    let refusals = planner::plan(
        &spec,
        &[],
        &inventory(vec![
            member("sda", "oldnas:media"),
            member("sdb", "oldnas:media"),
        ]),
    )
    .unwrap_err();
    assert!(
        refusals[0].reason.ends_with("and the recipe does not allow erasing it; back it up and set wipe = true in storage.arrays[0], or take the disk out"),
        "{}",
        refusals[0].reason
    );
}

#[test]
fn a_disk_with_data_is_refused_by_name_unless_wipe_is_set() {
    let disks = vec![
        with_ext4(disk("sda", 4 * TB, Transport::Sata, true)),
        disk("sdb", 4 * TB, Transport::Sata, true),
    ];
    let mut a = array("data", Level::Raid1, all_sata());
    let refusals =
        planner::plan(&storage(vec![a.clone()]), &[], &inventory(disks.clone())).unwrap_err();
    assert_eq!(
        refusals[0],
        Refusal {
            array: "data".into(),
            kept: false,
            disk: Some("sda".into()),
            reason: "holds an ext4 filesystem labelled 'photos' and the recipe does not allow erasing it; back it up and set wipe = true in storage.arrays[0], or take the disk out".into(),
            at: None
        }
    );

    a.wipe = true;
    let plan = planner::plan(&storage(vec![a]), &[], &inventory(disks)).unwrap();
    let members: Vec<(&str, bool)> = plan.arrays[0]
        .members
        .iter()
        .map(|m| (m.disk.name.as_str(), m.erase))
        .collect();
    assert_eq!(members, [("sda", true), ("sdb", false)]);
    assert!(
        plan.arrays[0]
            .warnings
            .iter()
            .any(|w| w.contains("sda holds an ext4") && w.contains("will be erased"))
    );
}

#[test]
fn with_a_count_blank_disks_are_taken_before_disks_with_data() {
    let disks = vec![
        with_ext4(disk("sda", 4 * TB, Transport::Sata, true)),
        disk("sdb", 4 * TB, Transport::Sata, true),
        disk("sdc", 4 * TB, Transport::Sata, true),
    ];
    let rules = DiskMatch {
        count: Count::Exactly(2),
        ..all_sata()
    };
    let mut a = array("data", Level::Raid1, rules);
    a.wipe = true;
    let plan = planner::plan(&storage(vec![a]), &[], &inventory(disks)).unwrap();
    let names: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(names, ["sdb", "sdc"]);
    assert!(
        plan.arrays[0]
            .skipped
            .iter()
            .any(|s| s.starts_with("sda: not needed"))
    );
}

#[test]
fn disks_the_system_uses_are_never_taken_even_with_wipe() {
    let mut boot = disk("sda", 4 * TB, Transport::Sata, true);
    boot.in_use = vec![InUse::Boot];
    let mut held = disk("sdb", 4 * TB, Transport::Sata, true);
    held.in_use = vec![InUse::Held {
        device: "sdb".into(),
        by: "md127".into(),
    }];
    let disks = vec![
        boot,
        held,
        disk("sdc", 4 * TB, Transport::Sata, true),
        disk("sdd", 4 * TB, Transport::Sata, true),
    ];
    let mut a = array("data", Level::Raid1, all_sata());
    a.wipe = true;
    let plan = planner::plan(&storage(vec![a.clone()]), &[], &inventory(disks.clone())).unwrap();
    let names: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(names, ["sdc", "sdd"]);
    assert!(
        plan.arrays[0]
            .skipped
            .iter()
            .any(|s| s.contains("sda: never used: it holds the running system's root filesystem"))
    );

    a.level = Level::Raid6;
    let refusals = planner::plan(&storage(vec![a]), &[], &inventory(disks)).unwrap_err();
    let text = refusals[0].to_string();
    assert!(
        text.contains("needs at least 4") && text.contains("sda is in use by the system"),
        "{text}"
    );
}

#[test]
fn a_shortfall_lists_every_disk_and_why_it_did_not_count() {
    let disks = vec![
        disk("sda", 4 * TB, Transport::Sata, true),
        disk("sdb", 500_000_000_000, Transport::Sata, true),
        disk("sdc", 4 * TB, Transport::Usb, true),
    ];
    let rules = DiskMatch {
        min_size: Some(Size(TB)),
        count: Count::Exactly(3),
        ..all_sata()
    };
    let refusals = planner::plan(
        &storage(vec![array("data", Level::Raid5, rules)]),
        &[],
        &inventory(disks),
    )
    .unwrap_err();
    let text = refusals[0].to_string();
    assert!(text.starts_with("array 'data': needs 3 disks matching { transport = \"sata\", min_size = \"1TB\", count = 3 }, but only 1 can be used"), "{text}");
    assert!(
        text.contains("sdb (500 GB is smaller than min_size 1 TB)"),
        "{text}"
    );
    assert!(
        text.contains("sdc (transport is usb, the rule wants sata)"),
        "{text}"
    );
}

#[test]
fn two_arrays_never_share_a_disk() {
    let disks = sata_tb(&[4, 4, 8, 8]);
    let small = DiskMatch {
        max_size: Some(Size(5 * TB)),
        ..all_sata()
    };
    let spec = storage(vec![
        array("fast", Level::Raid1, small),
        array("bulk", Level::Raid1, all_sata()),
    ]);
    let plan = planner::plan(&spec, &[], &inventory(disks)).unwrap();
    let names = |i: usize| {
        plan.arrays[i]
            .members
            .iter()
            .map(|m| m.disk.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(0), ["sda", "sdb"]);
    assert_eq!(names(1), ["sdc", "sdd"]);
}

#[test]
fn usb_members_and_controller_caveats_are_warned_about() {
    let mut disks = vec![
        disk("sda", 2 * TB, Transport::Usb, false),
        disk("sdb", 2 * TB, Transport::Usb, false),
    ];
    for d in &mut disks {
        d.controller = Some(Controller {
            pci: "0000:01:00.0".into(),
            vendor: 0x1b4b,
            device: 0x9215,
            name: Some("Marvell 88SE9215".into()),
            note: Some("link resets were reported".into()),
            link_mts: Some(5000),
            link_width: Some(1),
        });
    }
    let rules = DiskMatch {
        transport: Some(Transport::Usb),
        ..DiskMatch::default()
    };
    let plan = planner::plan(
        &storage(vec![array("data", Level::Raid1, rules)]),
        &[],
        &inventory(disks),
    )
    .unwrap();
    let w = &plan.arrays[0].warnings;
    assert!(
        w.iter()
            .any(|w| w.starts_with("sda, sdb are attached over USB: UAS link resets")),
        "{w:?}"
    );
    assert_eq!(
        w.iter()
            .filter(|w| w.starts_with("Marvell 88SE9215: link resets"))
            .count(),
        1,
        "once per controller: {w:?}"
    );
}

#[test]
fn the_bottleneck_is_the_slowest_of_disks_pcie_link_and_network() {
    let gen2_x1 = Controller {
        pci: "0000:01:00.0".into(),
        vendor: 0x1b4b,
        device: 0x9215,
        name: Some("Marvell 88SE9215".into()),
        note: None,
        link_mts: Some(5000),
        link_width: Some(1),
    };
    let ssds: Vec<Disk> = (0..4)
        .map(|i| {
            let mut d = disk(
                &format!("sd{}", (b'a' + i) as char),
                TB,
                Transport::Sata,
                false,
            );
            d.controller = Some(gen2_x1.clone());
            d
        })
        .collect();
    let spec = storage(vec![array("data", Level::Raid0, all_sata())]);
    let mut inv = Inventory {
        disks: ssds,
        network: Some(NetworkLink {
            interface: "eth0".into(),
            mbit: 10_000,
        }),
        arrays: vec![],
        zfs: Default::default(),
        failing: Default::default(),
        existing: Vec::new(),
        existing_pools: Vec::new(),
    };
    // Four SSDs ≈ 4 × 500 MB/s, Gen2 x1 ≈ 330 MB/s (CM4 seed), 10 GbE ≈ 1170 MB/s.
    let plan = planner::plan(&spec, &[], &inv).unwrap();
    let b = plan.arrays[0].throughput.bottleneck();
    assert_eq!(
        (b.what.as_str(), b.mb_s),
        (
            "the PCIe Gen 2 (5.0 GT/s) x1 link of the Marvell 88SE9215",
            330
        )
    );

    inv.network = Some(NetworkLink {
        interface: "eth0".into(),
        mbit: 1000,
    });
    let plan = planner::plan(&spec, &[], &inv).unwrap();
    assert_eq!(
        plan.arrays[0].throughput.bottleneck().mb_s,
        117,
        "GbE ≈ 117 MB/s (seed)"
    );
}

#[test]
fn fixtures_plan_as_a_user_on_that_board_would_expect() {
    // CM4: sdc holds an old ext4 backup and sdd belongs to an old md array.
    let board = common::board("cm4-marvell9215");
    let inv = board.inventory();
    let spec = storage(vec![array("data", Level::Raid10, all_sata())]);
    let refusals = planner::plan(&spec, &[], &inv).unwrap_err();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].disk.as_deref(), Some("sdc"));
    assert!(
        refusals[0]
            .reason
            .starts_with("holds an ext4 filesystem labelled 'backup'")
    );

    let mut wiping = array("data", Level::Raid5, all_sata());
    wiping.wipe = true;
    let plan = planner::plan(&storage(vec![wiping]), &[], &inv).unwrap();
    let a = &plan.arrays[0];
    let names: Vec<&str> = a.members.iter().map(|m| m.disk.name.as_str()).collect();
    assert_eq!(
        names,
        ["sda", "sdb", "sdc"],
        "sdd is held by md127 and never taken, wipe or not"
    );
    assert!(
        a.skipped
            .iter()
            .any(|s| s == "sdd: never used: sdd is in use by md127"),
        "{:?}",
        a.skipped
    );
    assert_eq!(
        a.throughput.bottleneck().what,
        "the network (eth0 at 1000 Mbit/s)"
    );

    // Pi 4 booting from USB: asking for every USB disk never includes the boot disk.
    let board = common::board("pi4-usb");
    let rules = DiskMatch {
        transport: Some(Transport::Usb),
        ..DiskMatch::default()
    };
    let mut a = array("data", Level::Raid1, rules);
    a.wipe = true;
    let plan = planner::plan(&storage(vec![a]), &[], &board.inventory()).unwrap();
    let names: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(names, ["sda", "sdb"]);
    assert!(
        plan.arrays[0]
            .warnings
            .iter()
            .any(|w| w.contains("differ in size"))
    );
    assert!(
        plan.arrays[0]
            .warnings
            .iter()
            .any(|w| w.contains("mixes SSDs and spinning disks"))
    );
}

#[test]
fn an_assembled_array_with_the_planned_name_is_refused_naming_it_and_its_members() {
    // Two old NAS disks, put back in, auto-assembled as /dev/md/data; two
    // new blank disks would otherwise be planned, and "create" found done.
    let mut disks = sata_tb(&[4, 4, 4, 4]);
    for d in &mut disks[2..] {
        let part = format!("{}1", d.name);
        d.in_use = vec![InUse::Held {
            device: part.clone(),
            by: "md127".into(),
        }];
        d.partitions = vec![nasforge_engine::machine::disks::Partition {
            name: part,
            number: 1,
            start: 1 << 20,
            size: Size(4 * TB - (2 << 20)),
            contents: vec![],
        }];
    }
    let mut inv = inventory(disks);
    inv.arrays = vec![MdArray {
        device: "md127".into(),
        name: Some("data".into()),
        members: vec!["sdc1".into(), "sdd1".into()],
    }];
    let refusals = planner::plan(
        &storage(vec![array("data", Level::Raid1, all_sata())]),
        &[],
        &inv,
    )
    .unwrap_err();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let text = refusals[0].to_string();
    assert!(
        text.starts_with("array 'data': /dev/md/data already exists (md127, from sdc1 on sdc (TEST DISK (SN-sdc), 4 TB sata HDD), sdd1 on sdd (TEST DISK (SN-sdd), 4 TB sata HDD))")
            && text.contains("rename the new array (storage.arrays[0].name)")
            && text.contains("set wipe = true in storage.arrays[0] and stop it (`mdadm --stop /dev/md/data`)"),
        "{text}"
    );

    // Another name, or a single disk (no md device), plans as before.
    let plan = planner::plan(
        &storage(vec![array("tank", Level::Raid1, all_sata())]),
        &[],
        &inv,
    )
    .unwrap();
    assert_eq!(plan.arrays[0].members.len(), 2);
    let mut single = array("data", Level::Single, all_sata());
    single.disk_match.as_mut().unwrap().count = Count::Exactly(1);
    assert!(planner::plan(&storage(vec![single]), &[], &inv).is_ok());
}

/// `level` over `n` 4 TB SATA disks (every disk, count = "all") with
/// `vdevs` and `spares`.
fn plan_of(level: Level, n: usize, vdevs: Option<usize>, spares: usize) -> planner::ArrayPlan {
    let mut a = array("data", level, all_sata());
    a.vdevs = vdevs;
    a.spares = spares;
    planner::plan(&storage(vec![a]), &[], &inventory(sata_tb(&vec![4; n])))
        .unwrap_or_else(|r| panic!("{level} over {n} refused: {r:?}"))
        .arrays
        .remove(0)
}

#[test]
fn spares_are_the_last_disks_and_hold_nothing_in_the_figures() {
    // (level, disks, vdevs, spares, capacity TB, survives (guaranteed, best case), disks ≈MB/s)
    type Row = (Level, usize, Option<usize>, usize, u64, (usize, usize), u32);
    let table: &[Row] = &[
        (Level::Raid6, 15, None, 0, 52, (2, 2), 13 * 180),
        (Level::Raid6, 15, None, 1, 48, (2, 2), 12 * 180),
        (Level::Raid6, 15, Some(2), 1, 40, (2, 4), 10 * 180),
        (Level::Raid6, 16, Some(2), 2, 40, (2, 4), 10 * 180),
        (Level::Raid5, 9, Some(2), 1, 24, (1, 2), 6 * 180),
        (Level::Raid1, 3, None, 1, 4, (1, 1), 180),
        (Level::Raid10, 5, None, 1, 8, (1, 2), 2 * 180),
    ];
    for &(level, n, vdevs, spares, capacity, (guaranteed, best_case), mb_s) in table {
        let case = format!("{level} over {n} disks, vdevs {vdevs:?}, spares {spares}");
        let a = plan_of(level, n, vdevs, spares);
        assert_eq!(a.members.len(), n, "{case}: spares are members");
        let spare_names: Vec<&str> = a.spares().map(|m| m.disk.name.as_str()).collect();
        let last: Vec<String> = sata_tb(&vec![4; n])[n - spares..]
            .iter()
            .map(|d| d.name.clone())
            .collect();
        assert_eq!(spare_names, last, "{case}: the last disks are the spares");
        assert_eq!(a.capacity, Size(capacity * TB), "{case}: capacity");
        assert_eq!(
            a.tolerance,
            Tolerance {
                guaranteed,
                best_case
            },
            "{case}"
        );
        assert_eq!(
            a.throughput.limits[0].mb_s, mb_s,
            "{case}: the disks' speed"
        );
        assert_eq!(
            a.throughput.limits[0].what,
            format!("the disks ({} × ≈180 MB/s, {level})", n - spares),
            "{case}"
        );
    }
}

#[test]
fn the_plan_names_the_legs_and_the_spares() {
    let a = plan_of(Level::Raid6, 15, Some(2), 1);
    let plan = planner::Plan {
        arrays: vec![a],
        shares: vec![],
        alert: planner::Alert::Program("/usr/lib/nasforge/mdadm-event".into()),
        spin_down: nasforge_engine::spec::SpinDown::Off,
        kept: vec![],
        system_mirror: None,
    };
    let text = plan.describe();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Array 'data': 2 raid6 legs of 7 disks each, striped (raid60); 1 hot spare as /dev/md/data, ext4 mounted at /srv/data"
    );
    assert_eq!(lines[1], "  leg 'data-0' (/dev/md/data-0):");
    assert_eq!(lines[2], "  - sda: TEST DISK (SN-sda), 4 TB sata HDD");
    assert_eq!(lines[9], "  leg 'data-1' (/dev/md/data-1):");
    assert_eq!(lines[10], "  - sdh: TEST DISK (SN-sdh), 4 TB sata HDD");
    assert_eq!(
        lines[17],
        "  hot spare, holding no data (md rebuilds a failed member onto it at once, in whichever leg lost a disk):"
    );
    assert_eq!(lines[18], "  - sdo: TEST DISK (SN-sdo), 4 TB sata HDD");
    assert_eq!(
        lines[19],
        "  capacity: about 40 TB (before filesystem overhead)"
    );
    assert_eq!(
        lines[20],
        "  survives: 2 failed disk(s) in each leg, 4 in all when they fall in different legs"
    );

    let one = plan_of(Level::Raid6, 6, None, 2);
    let plan = planner::Plan {
        arrays: vec![one],
        ..plan
    };
    let text = plan.describe();
    assert!(
        text.starts_with("Array 'data': raid6 of 4 disk(s); 2 hot spares as /dev/md/data, ext4 mounted at /srv/data\n  - sda:"),
        "{text}"
    );
    assert!(
        text.contains("\n  hot spares, holding no data (md rebuilds a failed member onto one at once):\n  - sde: TEST DISK (SN-sde), 4 TB sata HDD\n  - sdf:"),
        "{text}"
    );
}

#[test]
fn a_wide_single_parity_group_and_a_small_spare_are_warned_about() {
    let warned = |a: &planner::ArrayPlan| -> Vec<String> {
        a.warnings
            .iter()
            .filter(|w| w.contains("second disk failing"))
            .cloned()
            .collect()
    };
    assert_eq!(
        warned(&plan_of(Level::Raid5, 5, None, 0)),
        Vec::<String>::new()
    );
    assert_eq!(
        warned(&plan_of(Level::Raid5, 7, None, 1)),
        [
            "raid5 over 6 disks: a second disk failing before the first is rebuilt loses everything; from 6 disks raid6 (two disks of parity) survives that"
        ]
    );
    assert_eq!(
        warned(&plan_of(Level::Raid5, 12, Some(2), 0)),
        [
            "raid5 over 6 disks in each leg: a second disk failing before the first is rebuilt loses everything; from 6 disks raid6 (two disks of parity) survives that"
        ]
    );
    assert_eq!(
        warned(&plan_of(Level::Raid6, 15, None, 0)),
        Vec::<String>::new()
    );

    let mut a = array("data", Level::Raid1, all_sata());
    a.spares = 1;
    let plan = planner::plan(&storage(vec![a]), &[], &inventory(sata_tb(&[4, 4, 3]))).unwrap();
    assert!(
        plan.arrays[0].warnings.contains(
            &"sdc (3 TB) is smaller than the smallest member (4 TB): no failed member can be rebuilt onto it, so it is no spare; use a disk at least as large".to_string()
        ),
        "{:?}",
        plan.arrays[0].warnings
    );
}

#[test]
fn every_disk_must_split_into_the_groups_or_the_plan_says_which_count_would() {
    let refused = |level: Level, n: usize, vdevs: Option<usize>, spares: usize| {
        let mut a = array("data", level, all_sata());
        a.vdevs = vdevs;
        a.spares = spares;
        planner::plan(&storage(vec![a]), &[], &inventory(sata_tb(&vec![4; n])))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        refused(Level::Raid6, 15, Some(2), 0),
        [
            "array 'data': 15 disks are usable, and 15 active ones do not split into 2 legs of the same width: set count = 14 to leave 1 out, or spares = 1 to keep them as hot spares"
        ]
    );
    assert_eq!(
        refused(Level::Raid6, 16, Some(2), 1),
        [
            "array 'data': 16 disks are usable, and 15 active ones besides spares = 1 do not split into 2 legs of the same width: set count = 15 to leave 1 out, or spares = 2"
        ]
    );
    let short = refused(Level::Raid6, 8, Some(2), 1);
    assert!(
        short[0].starts_with("array 'data': raid6 needs at least 4 active disks in each of 2 legs and 1 spare(s) but 8 are usable: needs 9 disks matching"),
        "{short:?}"
    );
    let short = refused(Level::Raid5, 3, None, 1);
    assert!(
        short[0].starts_with("array 'data': raid5 needs at least 3 active disks and 1 spare(s) but 3 are usable: needs 4 disks matching"),
        "{short:?}"
    );
}

#[test]
fn a_leg_whose_name_an_assembled_array_has_is_refused() {
    let mut inv = inventory(sata_tb(&[4; 8]));
    inv.arrays = vec![MdArray {
        device: "md127".into(),
        name: Some("data-1".into()),
        members: vec![],
    }];
    let mut a = array("data", Level::Raid6, all_sata());
    a.vdevs = Some(2);
    let refusals = planner::plan(&storage(vec![a]), &[], &inv).unwrap_err();
    let text = refusals[0].to_string();
    assert!(
        text.starts_with(
            "array 'data': /dev/md/data-1 already exists (md127, from no members listed)"
        ),
        "{text}"
    );
}

/// `sdc` failing by SMART's account, as unattended setup finds it.
fn with_sdc_failing(disks: Vec<Disk>) -> Inventory {
    let mut inv = inventory(disks);
    inv.failing.insert(
        "sdc".into(),
        "its overall health self-assessment FAILED, 8 sectors pending reallocation".into(),
    );
    inv
}

#[test]
fn a_failing_disk_among_all_is_refused_by_name_and_serial_with_the_way_to_accept_it() {
    let inv = with_sdc_failing(sata_tb(&[4, 4, 4, 4]));
    let refused = planner::plan(
        &storage(vec![array("data", Level::Raid5, all_sata())]),
        &[],
        &inv,
    )
    .unwrap_err();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].disk.as_deref(), Some("sdc"));
    assert_eq!(
        refused[0].reason,
        "the TEST DISK with serial SN-sdc is failing by SMART's account: its overall health self-assessment FAILED, 8 sectors pending reallocation. Nothing was written. Replace it, or, knowing its data may be lost, to build on it all the same, add its serial to [storage]: allow_failing = [\"SN-sdc\"]"
    );
}

#[test]
fn a_failing_disk_is_passed_over_when_a_count_can_be_met_without_it() {
    let inv = with_sdc_failing(sata_tb(&[4, 4, 4, 4]));
    let mut rules = all_sata();
    rules.count = Count::Exactly(3);
    let plan = planner::plan(
        &storage(vec![array("data", Level::Raid5, rules.clone())]),
        &[],
        &inv,
    )
    .unwrap();
    let members: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sda", "sdb", "sdd"]);
    assert!(
        plan.arrays[0]
            .skipped
            .iter()
            .any(|s| s.starts_with("sdc: failing by SMART (its overall health")),
        "{:?}",
        plan.arrays[0].skipped
    );
    // Four asked for: the failing disk is what is missing, and said so.
    rules.count = Count::Exactly(4);
    let refused = planner::plan(
        &storage(vec![array("data", Level::Raid5, rules)]),
        &[],
        &inv,
    )
    .unwrap_err();
    assert!(
        refused.iter().any(|r| r.disk.as_deref() == Some("sdc")
            && r.reason.contains("allow_failing = [\"SN-sdc\"]")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|r| r.reason.contains("only 3 can be used")
                && r.reason.contains("sdc is failing by SMART")),
        "{refused:?}"
    );
}

#[test]
fn a_failing_disk_the_recipe_accepts_by_serial_is_used_with_a_warning() {
    let inv = with_sdc_failing(sata_tb(&[4, 4, 4, 4]));
    let mut s = storage(vec![array("data", Level::Raid5, all_sata())]);
    // Another disk's serial accepts nothing.
    s.allow_failing = vec!["SN-sda".into()];
    assert!(planner::plan(&s, &[], &inv).is_err());
    s.allow_failing = vec!["SN-sdc".into()];
    let plan = planner::plan(&s, &[], &inv).unwrap();
    assert_eq!(plan.arrays[0].members.len(), 4);
    assert!(
        plan.arrays[0].warnings.iter().any(|w| w
            == "sdc (TEST DISK, serial SN-sdc) is failing by SMART's account (its overall health self-assessment FAILED, 8 sectors pending reallocation); used as storage.allow_failing says"),
        "{:?}",
        plan.arrays[0].warnings
    );
}

#[test]
fn a_failing_disk_without_a_serial_is_refused_saying_it_cannot_be_accepted() {
    let mut disks = sata_tb(&[4, 4, 4]);
    disks[2].serial = None;
    let inv = with_sdc_failing(disks);
    let refused = planner::plan(
        &storage(vec![array("data", Level::Raid5, all_sata())]),
        &[],
        &inv,
    )
    .unwrap_err();
    assert!(
        refused.iter().any(|r| r.disk.as_deref() == Some("sdc")
            && r.reason
                .contains("with serial unknown is failing by SMART's account")
            && r.reason.ends_with(
                "it has no serial for storage.allow_failing to name, so it cannot be used"
            )),
        "{refused:?}"
    );
}
