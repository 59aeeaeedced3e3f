//! The exact steps for representative plans (snapshots), and resuming an
//! interrupted setup from every step.

use nasforge_testkit::board as common;

use nasforge_engine::executor;
use nasforge_engine::journal::Journal;
use nasforge_engine::planner::{self, Plan};
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{self, Action, Context, Step};
use nasforge_engine::storage::partition;
use std::path::Path;

const PI5_RAID5: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid5"
disks = { transport = "sata", model = "WDC WD40EFRX*", count = 4 }
filesystem = "ext4"
mount = "/srv/data"

[[shares]]
name = "data"
path = "/srv/data"
smb = { users = ["admin", "anna"], timemachine = true }
nfs = { clients = "192.168.1.0/24" }
"#;

const CM4_MIRROR_AND_SINGLE: &str = r#"
[storage]
mode = "unattended"
mailaddr = "nas@example.com"
[[storage.arrays]]
name = "data"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "xfs"
mount = "/srv/data"
[[storage.arrays]]
name = "backup"
level = "single"
disks = { transport = "sata", count = 1 }
filesystem = "ext4"
mount = "/srv/backup"
wipe = true

[[shares]]
name = "media"
path = "/srv/data/media"
nfs = { clients = ["192.168.1.0/24", "tv.lan"], readonly = true }
"#;

const PI4_RAID0_UNEQUAL: &str = r#"
[storage]
mode = "unattended"
alert_program = "/usr/local/bin/nas-alert"
[[storage.arrays]]
name = "scratch"
level = "raid0"
disks = { transport = "usb", count = 2 }
filesystem = "btrfs"
mount = "/srv/scratch"

[[shares]]
name = "scratch"
path = "/srv/scratch"
smb = { users = ["pi"] }
"#;

/// 15 of the PC's 16 SAS disks: two raid6 legs of 7 striped (raid60) and
/// a hot spare.
const X86_RAID60_SPARE: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid6"
vdevs = 2
spares = 1
disks = { transport = "sas", count = 15 }
filesystem = "ext4"
mount = "/srv/data"

[[shares]]
name = "data"
path = "/srv/data"
nfs = { clients = "192.168.1.0/24" }
"#;

struct Case {
    recipe: DeviceRecipe,
    plan: Plan,
    steps: Vec<Step>,
    context: Context,
}

fn case(board: common::Board, recipe: &str) -> Case {
    let recipe = DeviceRecipe::parse(recipe, Path::new("recipe.toml")).unwrap();
    let plan = planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &board.inventory(),
    )
    .unwrap();
    let context = Context {
        hostname: nasforge_engine::machine::hostname(&board.host),
        system_uuid: None,
        fs_uuids: (0..plan.arrays.len())
            .map(|i| format!("0000000{i}-1111-4222-8333-444455556666"))
            .collect(),
    };
    let steps = steps::generate(&plan, &context);
    Case {
        recipe,
        plan,
        steps,
        context,
    }
}

fn snapshot_text(c: &Case) -> String {
    format!("{}\n{}", c.plan.describe(), executor::dry_run(&c.steps))
}

#[test]
fn pi5_raid5_with_samba_time_machine_and_nfs() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    insta::assert_snapshot!("pi5_raid5", snapshot_text(&c));
}

#[test]
fn cm4_mirror_plus_a_wiped_single_disk() {
    let c = case(common::board("cm4-marvell9215"), CM4_MIRROR_AND_SINGLE);
    insta::assert_snapshot!("cm4_mirror_and_single", snapshot_text(&c));
}

#[test]
fn pi4_raid0_over_unequal_usb_disks() {
    let c = case(common::board("pi4-usb"), PI4_RAID0_UNEQUAL);
    insta::assert_snapshot!("pi4_raid0_unequal", snapshot_text(&c));
}

#[test]
fn x86_raid60_of_two_raid6_legs_and_a_hot_spare() {
    let c = case(common::board("x86-sas-16"), X86_RAID60_SPARE);
    insta::assert_snapshot!("x86_raid60_spare", snapshot_text(&c));
}

/// The step's actions (then its `always` ones), as `--dry-run` prints them.
fn lines_of(c: &Case, id: &str) -> Vec<String> {
    let step = c
        .steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id}"));
    step.actions
        .iter()
        .chain(&step.always)
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_legs_are_made_and_cleared_before_the_raid0_over_them() {
    let c = case(common::board("x86-sas-16"), X86_RAID60_SPARE);
    let ids: Vec<&str> = c
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| id.contains("-array:") || id.starts_with("mkfs:") || *id == "mdadm-conf")
        .collect();
    assert_eq!(
        ids,
        [
            "create-array:data-0",
            "clear-array:data-0",
            "create-array:data-1",
            "clear-array:data-1",
            "create-array:data",
            "clear-array:data",
            "mkfs:data",
            "mdadm-conf"
        ]
    );
    let part = |serial: &str| format!("/dev/disk/by-id/wwn-0x{serial}-part1");
    let wd: Vec<String> = (1..=8)
        .map(|i| part(&format!("50014ee2c000000{i}")))
        .collect();
    let leg0 = &lines_of(&c, "create-array:data-0")[2];
    assert_eq!(
        leg0,
        &format!(
            "mdadm --create /dev/md/data-0 --run --homehost=pcnas --name=data-0 --metadata=1.2 --level=6 --raid-devices=7 --chunk=512 --bitmap=internal {}",
            wd[..7].join(" ")
        )
    );
    let leg1 = &lines_of(&c, "create-array:data-1")[2];
    assert!(
        leg1.starts_with("mdadm --create /dev/md/data-1 --run --homehost=pcnas --name=data-1 --metadata=1.2 --level=6 --raid-devices=7 --spare-devices=1 --chunk=512 --bitmap=internal ")
            && leg1.starts_with(&format!("{} {}", leg1.split(" /dev/disk").next().unwrap(), wd[7])),
        "the first leg is full, the second starts with the eighth WD: {leg1}"
    );
    assert_eq!(
        leg1.matches("/dev/disk/by-id/").count(),
        8,
        "7 members and the spare: {leg1}"
    );
    // Five data disks in a leg: one raid0 chunk is a leg's whole stripe.
    assert_eq!(
        lines_of(&c, "create-array:data")[2],
        "mdadm --create /dev/md/data --run --homehost=pcnas --name=data --metadata=1.2 --level=0 --raid-devices=2 --chunk=2560 /dev/md/data-0 /dev/md/data-1"
    );
    assert_eq!(
        lines_of(&c, "clear-array:data-1"),
        ["wipefs --all --force /dev/md/data-1"]
    );
    // ext4's stride is md's chunk in 4 KiB blocks, its stripe every data disk.
    assert_eq!(
        lines_of(&c, "mkfs:data"),
        [
            "mkfs.ext4 -F -L data -U 00000000-1111-4222-8333-444455556666 -E stride=128,stripe_width=1280 /dev/md/data"
        ]
    );
    let conf = lines_of(&c, "mdadm-conf")[0].clone();
    assert!(
        conf.ends_with("    | <output of `mdadm --detail --scan` without spares=, in this order:>\n    | <its ARRAY /dev/md/data-0 line> spare-group=data\n    | <its ARRAY /dev/md/data-1 line> spare-group=data\n    | <its other lines>"),
        "{conf}"
    );
}

#[test]
fn a_single_array_lists_its_spares_after_its_members() {
    let recipe = X86_RAID60_SPARE.replace("vdevs = 2\n", "");
    let c = case(common::board("x86-sas-16"), &recipe);
    let create = &lines_of(&c, "create-array:data")[2];
    assert!(
        create.starts_with("mdadm --create /dev/md/data --run --homehost=pcnas --name=data --metadata=1.2 --level=6 --raid-devices=14 --spare-devices=1 --chunk=512 --bitmap=internal /dev/disk/by-id/wwn-0x50014ee2c0000001-part1 "),
        "{create}"
    );
    let title = &c
        .steps
        .iter()
        .find(|s| s.id == "create-array:data")
        .unwrap()
        .title;
    assert_eq!(
        title,
        "Create raid6 array 'data' from 14 partitions and 1 hot spare(s)"
    );
    assert_eq!(
        lines_of(&c, "mkfs:data"),
        [
            "mkfs.ext4 -F -L data -U 00000000-1111-4222-8333-444455556666 -E stride=128,stripe_width=1536 /dev/md/data"
        ],
        "12 data disks: the spare holds none"
    );
    assert!(
        lines_of(&c, "mdadm-conf")[0]
            .ends_with("    | <output of `mdadm --detail --scan` without spares=>"),
        "no legs, nothing put first"
    );
}

#[test]
fn mdadm_create_follows_the_field_notes() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let create = c
        .steps
        .iter()
        .find(|s| s.id == "create-array:data")
        .unwrap();
    let lines: Vec<String> = create
        .actions
        .iter()
        .chain(&create.always)
        .map(ToString::to_string)
        .collect();
    assert_eq!(lines[1], "udevadm control --stop-exec-queue");
    assert!(lines[2].starts_with("mdadm --create /dev/md/data --run --homehost=pinas --name=data --metadata=1.2 --level=5 --raid-devices=4 --chunk=512 --bitmap=internal /dev/disk/by-id/wwn-0x50014ee2b0000001-part1"), "{}", lines[2]);
    assert_eq!(
        create.always[0].to_string(),
        "udevadm control --start-exec-queue",
        "restarted even when create fails"
    );

    let c = case(common::board("pi4-usb"), PI4_RAID0_UNEQUAL);
    let create = c
        .steps
        .iter()
        .find(|s| s.id == "create-array:scratch")
        .unwrap()
        .actions[2]
        .to_string();
    assert!(
        create.contains("--level=0") && create.contains("--layout=original"),
        "{create}"
    );
    assert!(
        !create.contains("--bitmap") && !create.contains("dangerous"),
        "{create}"
    );
}

#[test]
fn the_udev_queue_is_restarted_when_mdadm_create_fails() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let board = common::writable_copy("pi5-jmb585");
    let index = c
        .steps
        .iter()
        .position(|s| s.id == "create-array:data")
        .unwrap();
    let mut journal = Journal::new(
        c.recipe.clone(),
        c.context.clone(),
        c.plan.clone(),
        c.steps.clone(),
    );
    journal.done = common::done_before(&c.steps, index);
    // The third action of the step is mdadm --create.
    let mut runner = RecordingRunner::interrupting_at(2);
    let path = board.host.path(nasforge_engine::journal::PATH);
    let err =
        executor::execute(&mut journal, &path, &board.host, &mut runner, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("create-array:data"), "{err}");
    assert_eq!(
        runner.lines,
        [
            "udevadm settle",
            "udevadm control --stop-exec-queue",
            "udevadm control --start-exec-queue",
            "udevadm settle"
        ]
    );
}

fn resume_from_every_step(board_name: &str, recipe: &str) {
    let c = case(common::board(board_name), recipe);
    common::resume_from_every_step(board_name, &c.recipe, &c.context, &c.plan, &c.steps);
}

#[test]
fn resumes_a_raid5_setup_from_every_step() {
    resume_from_every_step("pi5-jmb585", PI5_RAID5);
}

#[test]
fn resumes_a_raid0_setup_from_every_step() {
    resume_from_every_step("pi4-usb", PI4_RAID0_UNEQUAL);
}

/// Makes `/dev/md/<name>` on the fake board an assembled array `md127`
/// whose members are the partitions `members` (kernel names), as udev and
/// sysfs show one; its device node holds `blob` (a signature) at byte 0.
fn assemble(board: &common::Board, name: &str, members: &[&str], blob: Option<&str>) {
    let md = board.host.path("/sys/block/md127/md");
    for m in members {
        let dev = md.join(format!("dev-{m}"));
        std::fs::create_dir_all(&dev).unwrap();
        let disk = m.trim_end_matches(|c: char| c.is_ascii_digit());
        std::os::unix::fs::symlink(format!("../../../../../{disk}/{m}"), dev.join("block"))
            .unwrap();
    }
    std::fs::write(board.host.path("/sys/block/md127/dev"), "9:127\n").unwrap();
    std::fs::write(board.host.path("/sys/block/md127/size"), "131072\n").unwrap();
    let node = std::fs::File::create(board.node("md127")).unwrap();
    node.set_len(64 << 20).unwrap();
    if let Some(blob) = blob {
        use std::os::unix::fs::FileExt;
        node.write_all_at(&std::fs::read(common::data("blobs").join(blob)).unwrap(), 0)
            .unwrap();
    }
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink("../md127", board.node(&format!("md/{name}"))).unwrap();
}

/// The partition links and nodes udev makes once the disks are partitioned.
fn partitioned(board: &common::Board, disks: &[&str]) {
    for (i, disk) in disks.iter().enumerate() {
        std::fs::File::create(board.node(&format!("{disk}1"))).unwrap();
        std::os::unix::fs::symlink(
            format!("../../{disk}1"),
            board.node(&format!("disk/by-id/wwn-0x50014ee2b000000{}-part1", i + 1)),
        )
        .unwrap();
    }
}

/// `/dev/md/<name>` on the fake board as the md array `kernel`, listing
/// `members` (kernel names: partitions, or the legs' md arrays).
fn assemble_as(board: &common::Board, kernel: &str, name: &str, members: &[&str]) {
    let md = board.host.path(&format!("/sys/block/{kernel}/md"));
    for m in members {
        let dev = md.join(format!("dev-{m}"));
        std::fs::create_dir_all(&dev).unwrap();
        // md_members reads only the link's last part.
        std::os::unix::fs::symlink(format!("../../../../{m}"), dev.join("block")).unwrap();
    }
    std::fs::File::create(board.node(kernel)).unwrap();
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink(format!("../{kernel}"), board.node(&format!("md/{name}"))).unwrap();
}

/// Partition 1 of each of `disks` in /dev, with the `-part1` links udev
/// makes beside each of the disk's by-id links.
fn partitioned_by_id(board: &common::Board, disks: &[&str]) {
    let by_id = board.node("disk/by-id");
    for disk in disks {
        std::fs::File::create(board.node(&format!("{disk}1"))).unwrap();
        for link in std::fs::read_dir(&by_id).unwrap().flatten() {
            let target = std::fs::read_link(link.path()).unwrap();
            if target.file_name().unwrap() == *disk {
                let name = format!("{}-part1", link.file_name().to_string_lossy());
                std::os::unix::fs::symlink(format!("../../{disk}1"), by_id.join(name)).unwrap();
            }
        }
    }
}

#[test]
fn the_raid0_over_the_legs_is_done_only_when_md_lists_exactly_those_legs() {
    let c = case(common::board("x86-sas-16"), X86_RAID60_SPARE);
    let board = common::writable_copy("x86-sas-16");
    let disks: Vec<String> = c.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.clone())
        .collect();
    let disks: Vec<&str> = disks.iter().map(String::as_str).collect();
    partitioned_by_id(&board, &disks);
    let parts: Vec<String> = disks.iter().map(|d| format!("{d}1")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    assemble_as(&board, "md127", "data-0", &parts[..7]);
    assemble_as(&board, "md126", "data-1", &parts[7..]);
    for id in ["create-array:data-0", "create-array:data-1"] {
        assert!(
            matches!(check(&c, &board, id), steps::Check::Done(_)),
            "{id}: {:?}",
            check(&c, &board, id)
        );
    }
    assert_eq!(
        check(&c, &board, "create-array:data"),
        steps::Check::Pending
    );

    assemble_as(&board, "md125", "data", &["md127"]);
    let steps::Check::Refuse(why) = check(&c, &board, "create-array:data") else {
        panic!("{:?}", check(&c, &board, "create-array:data"));
    };
    assert!(
        why.starts_with(
            "/dev/md/data (md125) is made of md127, but this setup planned it from md126, md127"
        ),
        "{why}"
    );
    // The other leg joins: the array is the one planned.
    let dev = board.host.path("/sys/block/md125/md/dev-md126");
    std::fs::create_dir_all(&dev).unwrap();
    std::os::unix::fs::symlink("../../../../md126", dev.join("block")).unwrap();
    assert!(
        matches!(check(&c, &board, "create-array:data"), steps::Check::Done(ref why) if why.contains("md125")),
        "{:?}",
        check(&c, &board, "create-array:data")
    );
}

fn check(c: &Case, board: &common::Board, id: &str) -> steps::Check {
    c.steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id}"))
        .check(&board.host)
}

#[test]
fn an_array_of_other_disks_under_the_planned_name_is_refused_not_formatted() {
    // Old NAS disks built from the same recipe came up as /dev/md/data.
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let board = common::writable_copy("pi5-jmb585");
    partitioned(&board, &["sda", "sdb", "sdc", "sdd"]);
    assemble(&board, "data", &["sde1", "sdf1"], Some("ext4-photos.bin"));

    let steps::Check::Refuse(why) = check(&c, &board, "create-array:data") else {
        panic!("create-array: {:?}", check(&c, &board, "create-array:data"));
    };
    assert!(
        why.contains("/dev/md/data (md127) is made of sde1, sdf1, but this setup planned it from sda1, sdb1, sdc1, sdd1")
            && why.contains("mdadm --stop /dev/md/data"),
        "{why}"
    );
    assert!(matches!(
        check(&c, &board, "clear-array:data"),
        steps::Check::Refuse(_)
    ));
    let steps::Check::Refuse(why) = check(&c, &board, "mkfs:data") else {
        panic!(
            "mkfs over a foreign filesystem: {:?}",
            check(&c, &board, "mkfs:data")
        );
    };
    assert!(
        why.contains("/dev/md/data holds an ext4 filesystem labelled 'photos', not the filesystem this setup makes")
            && why.contains("nothing was formatted"),
        "{why}"
    );
}

#[test]
fn a_filesystem_only_util_linux_names_is_refused_not_formatted() {
    // nasforge's own probe does not know f2fs; wipefs does, right before mkfs.
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let board = common::writable_copy("pi5-jmb585");
    partitioned(&board, &["sda", "sdb", "sdc", "sdd"]);
    assemble(&board, "data", &["sda1", "sdb1", "sdc1", "sdd1"], None);
    assert!(matches!(
        check(&c, &board, "mkfs:data"),
        steps::Check::Pending
    ));
    let out = std::process::Command::new("mkfs.f2fs")
        .args(["-q", "-l", "old"])
        .arg(board.node("md127"))
        .output()
        .expect("mkfs.f2fs (f2fs-tools, installed by scripts/setup)");
    assert!(out.status.success(), "{out:?}");
    let steps::Check::Refuse(why) = check(&c, &board, "mkfs:data") else {
        panic!("mkfs over f2fs: {:?}", check(&c, &board, "mkfs:data"));
    };
    assert!(
        why.contains("/dev/md/data holds an f2fs filesystem labelled 'old'")
            && why.contains("nothing was formatted"),
        "{why}"
    );
}

#[test]
fn the_array_setup_made_is_done_and_only_then_cleared() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let board = common::writable_copy("pi5-jmb585");
    partitioned(&board, &["sda", "sdb", "sdc", "sdd"]);
    // md lists its members in its own order.
    assemble(
        &board,
        "data",
        &["sdd1", "sdb1", "sda1", "sdc1"],
        Some("ext4-photos.bin"),
    );
    assert!(
        matches!(check(&c, &board, "create-array:data"), steps::Check::Done(ref why) if why.contains("md127")),
        "{:?}",
        check(&c, &board, "create-array:data")
    );
    // A filesystem showing through from the disks' old life is cleared by
    // the step before mkfs, which checks the members again.
    assert_eq!(check(&c, &board, "clear-array:data"), steps::Check::Pending);

    // One member missing from the array is not "ours" either.
    let board = common::writable_copy("pi5-jmb585");
    partitioned(&board, &["sda", "sdb", "sdc", "sdd"]);
    assemble(&board, "data", &["sda1", "sdb1", "sdc1"], None);
    assert!(matches!(
        check(&c, &board, "create-array:data"),
        steps::Check::Refuse(_)
    ));
    assert_eq!(
        check(&c, &board, "mkfs:data"),
        steps::Check::Pending,
        "a blank array is formatted"
    );
}

/// The Pi 4 fixture, whose JMicron bridges give sdb and sdc the same
/// serial, so sdb is addressed by kernel name; here sdb holds an old ext4
/// "photos" and the recipe may erase it.
fn pi4_with_photos_on_sdb() -> (common::Board, Case) {
    let board = common::writable_copy("pi4-usb");
    let photos = std::fs::read(common::data("blobs/ext4-photos.bin")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::OpenOptions::new()
            .write(true)
            .open(board.node("sdb"))
            .unwrap(),
        &photos,
        0,
    )
    .unwrap();
    let recipe = PI4_RAID0_UNEQUAL.replace(
        "mount = \"/srv/scratch\"",
        "mount = \"/srv/scratch\"\nwipe = true",
    );
    let c = case_on(&board, &recipe);
    (board, c)
}

/// As [`case`], on a board that a test may change afterwards.
fn case_on(board: &common::Board, recipe: &str) -> Case {
    let recipe = DeviceRecipe::parse(recipe, Path::new("recipe.toml")).unwrap();
    let plan = planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &board.inventory(),
    )
    .unwrap();
    let context = Context {
        hostname: "pinas".into(),
        system_uuid: None,
        fs_uuids: vec!["00000000-1111-4222-8333-444455556666".into()],
    };
    let steps = steps::generate(&plan, &context);
    Case {
        recipe,
        plan,
        steps,
        context,
    }
}

#[test]
fn a_wipe_or_partition_step_refuses_another_disk_at_the_planned_path() {
    let (board, c) = pi4_with_photos_on_sdb();
    let wipe = c.steps.iter().find(|s| s.id == "wipe:sdb").unwrap();
    assert!(
        wipe.actions
            .iter()
            .any(|a| a.to_string() == "wipefs --all --force /dev/sdb"),
        "sdb has no unique by-id link: {:?}",
        wipe.actions
    );
    assert_eq!(check(&c, &board, "wipe:sdb"), steps::Check::Pending);

    // After a power cut the bridges enumerate in another order: /dev/sdb
    // is now a different disk (another serial and size) with data on it.
    let udev = board.host.path("/run/udev/data/b8:16");
    let record = std::fs::read_to_string(&udev).unwrap();
    std::fs::write(
        &udev,
        record.replace("0123456789ABCDEF", "FEDCBA9876543210"),
    )
    .unwrap();
    std::fs::write(board.host.path("/sys/block/sdb/size"), "3907029168\n").unwrap();
    for id in ["wipe:sdb", "partition:sdb"] {
        let steps::Check::Refuse(why) = check(&c, &board, id) else {
            panic!("{id}: {:?}", check(&c, &board, id));
        };
        assert!(
            why.contains("/dev/sdb is now sdb: JMicron Generic, serial FEDCBA9876543210, no WWN, 2 TB, not the disk this step was planned for (sdb: JMicron Generic, serial 0123456789ABCDEF, no WWN, 4 TB)")
                && why.contains("nothing was"),
            "{id}: {why}"
        );
    }
}

#[test]
fn a_wipe_step_refuses_contents_that_were_not_planned_but_resumes_over_fewer() {
    let (board, c) = pi4_with_photos_on_sdb();
    let node = std::fs::OpenOptions::new()
        .write(true)
        .open(board.node("sdb"))
        .unwrap();
    // Same disk, but now it holds something else than what was reviewed.
    let backup = std::fs::read(common::data("blobs/ext4-backup.bin")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&node, &backup, 0).unwrap();
    let steps::Check::Refuse(why) = check(&c, &board, "wipe:sdb") else {
        panic!("{:?}", check(&c, &board, "wipe:sdb"));
    };
    assert!(
        why.contains("now holds sdb: an ext4 filesystem labelled 'backup', which it did not hold when the plan was made (it held an ext4 filesystem labelled 'photos'); nothing was erased"),
        "{why}"
    );
    // Wiped already (a cut after wipefs): less than planned, so it resumes.
    std::os::unix::fs::FileExt::write_all_at(&node, &vec![0; backup.len()], 0).unwrap();
    assert_eq!(check(&c, &board, "wipe:sdb"), steps::Check::Pending);
}

#[test]
fn a_partition_step_cut_short_runs_again_so_the_new_partition_is_wiped() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let board = common::writable_copy("pi5-jmb585");
    let step = c.steps.iter().find(|s| s.id == "partition:sda").unwrap();
    let Action::WriteGpt {
        block_size,
        name,
        kind,
        ..
    } = &step.actions[0]
    else {
        panic!("{:?}", step.actions[0]);
    };
    // The cut came after the table was written, before `wipefs` of the
    // new partition.
    partition::write_single(&board.node("sda"), *block_size, name, *kind).unwrap();
    assert_eq!(check(&c, &board, "partition:sda"), steps::Check::Pending);
    assert!(
        step.actions
            .last()
            .unwrap()
            .to_string()
            .starts_with("wipefs --all --force /dev/disk/by-id/wwn-0x50014ee2b0000001-part1"),
        "{:?}",
        step.actions
    );
    // Someone else's table is still refused.
    partition::write_single(&board.node("sdb"), *block_size, "photos", *kind).unwrap();
    assert!(matches!(
        check(&c, &board, "partition:sdb"),
        steps::Check::Refuse(_)
    ));
}

/// Every kind of value the recipe checks let through, at its strangest:
/// share names with spaces, accents and `$`, paths with `.`, `_` and `-`, a
/// share at an array's mount, IPv6 networks and wildcard host names.
const ODD_BUT_VALID: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "ext4"
mount = "/srv/data"
[[storage.arrays]]
name = "media-2"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "xfs"
mount = "/srv/media_2.x"

[[shares]]
name = "Família Fotos"
path = "/srv/data/fotos-2024.d"
smb = { users = ["admin", "anna_b"], timemachine = true, timemachine_max_size = "300GiB" }
nfs = { clients = ["192.168.1.0/24", "fd00::/64", "*.lan", "nas-?.home.arpa"] }

[[shares]]
name = "Media & more"
path = "/srv/media_2.x/public"
smb = { users = ["admin"], guest = true }

[[shares]]
name = "backup$"
path = "/srv/media_2.x"
smb = { users = ["anna_b"], readonly = true }
nfs = { clients = "10.0.0.7 *", readonly = true }
"#;

fn written(steps: &[Step], path: &str) -> String {
    steps
        .iter()
        .flat_map(|s| &s.actions)
        .find_map(|a| match a {
            Action::WriteFile {
                path: p, contents, ..
            }
            | Action::ManagedBlock {
                path: p, contents, ..
            } if p == path => Some(contents.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no step writes {path}"))
}

/// `testparm -s` on the file: Samba's own parser must load it, see exactly
/// the shares nasforge meant, and no parameter nasforge did not write.
/// Returns each share's parameters as testparm read them back.
fn testparm(conf: &str) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nasforge.conf");
    std::fs::write(&file, conf).unwrap();
    let out = std::process::Command::new("testparm")
        .args(["-s", "--suppress-prompt"])
        .arg(&file)
        .output()
        .expect("testparm (samba-common-bin, installed by scripts/setup)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("Loaded services file OK"),
        "testparm refused:\n{stderr}\n{conf}"
    );
    assert!(
        !stderr.contains("Unknown parameter") && !stderr.contains("Ignoring"),
        "{stderr}"
    );
    let mut shares = std::collections::BTreeMap::new();
    let mut section = String::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            shares.insert(section.clone(), Vec::new());
        } else if let Some((key, value)) = line.trim().split_once(" = ") {
            shares
                .get_mut(&section)
                .unwrap()
                .push((key.to_string(), value.to_string()));
        }
    }
    shares
}

/// One export line per exports(5): a path (quoted or not), then clients each
/// written `host(options)` with no space inside.
fn parse_export(line: &str) -> (String, Vec<(String, String)>) {
    let (path, rest) = match line.strip_prefix('"') {
        Some(quoted) => quoted.split_once('"').expect("closing quote"),
        None => line.split_once(char::is_whitespace).expect("clients"),
    };
    let clients = rest
        .split_whitespace()
        .map(|entry| {
            let (host, options) = entry
                .strip_suffix(')')
                .and_then(|e| e.split_once('('))
                .unwrap_or_else(|| panic!("`{entry}` is not host(options) in {line}"));
            assert!(
                !host.is_empty() && !host.starts_with('-') && !options.contains(['(', ')']),
                "{line}"
            );
            (host.to_string(), options.to_string())
        })
        .collect();
    (path.to_string(), clients)
}

#[test]
fn rendered_files_read_back_as_the_recipe_meant() {
    let c = case(common::board("pi5-jmb585"), ODD_BUT_VALID);

    let smb = testparm(&written(
        &c.steps,
        nasforge_engine::shares::samba::SHARES_FILE,
    ));
    let names: Vec<&str> = smb.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["Família Fotos", "Media & more", "backup$", "global"]
    );
    let params = |share: &str| -> Vec<(&str, &str)> {
        let mut p: Vec<_> = smb[share]
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        p.sort();
        p
    };
    assert_eq!(
        params("global"),
        [
            ("fruit:aapl", "yes"),
            ("fruit:copyfile", "yes"),
            ("fruit:model", "MacSamba"),
            ("idmap config * : backend", "tdb"),
            ("map to guest", "Bad User"),
            ("multicast dns register", "No"),
        ]
    );
    // Each user's backups in a folder of their own; the limit in MiB.
    assert_eq!(
        params("Família Fotos"),
        [
            ("create mask", "0774"),
            ("directory mask", "02775"),
            ("fruit:metadata", "stream"),
            ("fruit:time machine", "yes"),
            ("fruit:time machine max size", "307200M"),
            ("fruit:veto_appledouble", "no"),
            ("path", "/srv/data/fotos-2024.d/%u"),
            ("read only", "No"),
            ("valid users", "admin anna_b"),
            ("vfs objects", "fruit streams_xattr"),
        ]
    );
    // Guests read; only the users may write. `read only = yes` is Samba's
    // default, which testparm -s leaves out.
    assert_eq!(
        params("Media & more"),
        [
            ("create mask", "0774"),
            ("directory mask", "02775"),
            ("fruit:metadata", "stream"),
            ("fruit:veto_appledouble", "no"),
            ("guest ok", "Yes"),
            ("path", "/srv/media_2.x/public"),
            ("vfs objects", "fruit streams_xattr"),
            ("write list", "admin"),
        ]
    );
    assert_eq!(
        params("backup$"),
        [
            ("create mask", "0774"),
            ("directory mask", "02775"),
            ("fruit:metadata", "stream"),
            ("fruit:veto_appledouble", "no"),
            ("path", "/srv/media_2.x"),
            ("valid users", "anna_b"),
            ("vfs objects", "fruit streams_xattr"),
        ]
    );
    for user in ["admin", "anna_b"] {
        let own = format!("/srv/data/fotos-2024.d/{user}");
        assert!(
            c.steps.iter().flat_map(|s| &s.actions).any(|a| *a
                == Action::ShareDir {
                    mount: "/srv/data".into(),
                    path: own.clone(),
                    owner: Some(user.into()),
                    mode: Some(0o2700),
                }),
            "{user}'s Time Machine folder"
        );
    }

    let exports = written(&c.steps, nasforge_engine::shares::nfs::EXPORTS_FILE);
    let lines: Vec<_> = exports
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(parse_export)
        .collect();
    let with = |hosts: &[&str], options: &str| -> Vec<(String, String)> {
        hosts
            .iter()
            .map(|h| (h.to_string(), options.to_string()))
            .collect()
    };
    assert_eq!(
        lines,
        [
            (
                "/srv/data/fotos-2024.d".to_string(),
                with(
                    &["192.168.1.0/24", "fd00::/64", "*.lan", "nas-?.home.arpa"],
                    "rw,sync,no_subtree_check,root_squash,mp=/srv/data"
                )
            ),
            (
                "/srv/media_2.x".to_string(),
                with(
                    &["10.0.0.7", "*"],
                    "ro,sync,no_subtree_check,root_squash,mp"
                )
            ),
        ]
    );

    let fstab = nasforge_engine::managed::merge(
        "proc /proc proc defaults 0 0\n",
        &written(&c.steps, "/etc/fstab"),
    );
    let mounts: Vec<Vec<&str>> = fstab
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    for fields in &mounts {
        assert_eq!(fields.len(), 6, "{fields:?}");
        assert!(fields.iter().all(|f| !f.contains('\\')), "{fields:?}");
    }
    assert_eq!(
        mounts[1..],
        [
            vec![
                "UUID=00000000-1111-4222-8333-444455556666",
                "/srv/data",
                "ext4",
                "defaults,nofail",
                "0",
                "2"
            ],
            vec![
                "UUID=00000001-1111-4222-8333-444455556666",
                "/srv/media_2.x",
                "xfs",
                "defaults,nofail",
                "0",
                "0"
            ],
        ]
    );
}

/// The mount step starts the unit systemd made from the fstab line; its
/// name must be the one systemd derives from the path.
#[test]
fn mount_units_are_named_as_systemd_names_them() {
    for path in [
        "/srv/data",
        "/srv/media_2.x",
        "/srv/my-data/.hidden/a.b_c",
        "/.dot/x-y",
        "/srv//double/",
    ] {
        let out = std::process::Command::new("systemd-escape")
            .args(["--path", "--suffix=mount", path])
            .output()
            .expect("systemd-escape (systemd, installed by scripts/setup)");
        assert!(out.status.success());
        let want = String::from_utf8(out.stdout).unwrap();
        assert_eq!(steps::mount_unit(path), want.trim(), "{path}");
    }
}

/// What `mdadm --create` leaves on partition 1 of each of `disks`: a
/// metadata 1.2 superblock (magic and major version at 4 KiB) naming the
/// array.
fn md_superblocks(board: &common::Board, disks: &[&str], name: &str) {
    use std::os::unix::fs::FileExt;
    for disk in disks {
        let part = std::fs::File::options()
            .write(true)
            .open(board.node(&format!("{disk}1")))
            .unwrap();
        part.set_len(1 << 20).unwrap();
        part.write_all_at(&0xa92b_4efc_u32.to_le_bytes(), 4096)
            .unwrap();
        part.write_all_at(&1u32.to_le_bytes(), 4100).unwrap();
        part.write_all_at(name.as_bytes(), 4096 + 32).unwrap();
    }
}

/// A power cut after the array was made and before the mdadm.conf step
/// listed it: at the next boot nothing assembled it (`AUTO -all`), so the
/// executor assembles it from its members, settles udev and says so
/// before any step, then goes on where it stopped. When it does not
/// assemble, a step recorded done made it, so the run is refused there,
/// and nothing runs; in the step that was making it, the step runs again.
/// Once setup has finished, an array that is not running is not its to
/// start.
#[test]
fn an_array_made_before_a_power_cut_is_assembled_before_setup_goes_on() {
    let c = case(common::board("pi5-jmb585"), PI5_RAID5);
    let disks = ["sda", "sdb", "sdc", "sdd"];
    let create = c
        .steps
        .iter()
        .position(|s| s.id == "create-array:data")
        .unwrap();
    let mkfs = c.steps.iter().position(|s| s.id == "mkfs:data").unwrap();
    let per_step = common::lines_per_step(&c.steps);
    let members: Vec<String> = (1..=4)
        .map(|i| format!("/dev/disk/by-id/wwn-0x50014ee2b000000{i}-part1"))
        .collect();
    let assemble = format!("mdadm --assemble /dev/md/data {}", members.join(" "));
    let run = |next: usize, mut runner: RecordingRunner, superblocks: bool| {
        let board = common::writable_copy("pi5-jmb585");
        common::stage_passwords(&board);
        partitioned(&board, &disks);
        if superblocks {
            md_superblocks(&board, &disks, "pinas:data");
        }
        let path = board.host.path(nasforge_engine::journal::PATH);
        let mut journal = Journal::new(
            c.recipe.clone(),
            c.context.clone(),
            c.plan.clone(),
            c.steps.clone(),
        );
        journal.done = common::done_before(&c.steps, next);
        let mut events = Vec::new();
        let result =
            executor::execute(
                &mut journal,
                &path,
                &board.host,
                &mut runner,
                &mut |e| match e {
                    executor::Event::Reassembled { device } => events.push(device.to_string()),
                    executor::Event::Starting { index, .. } => events.push(format!("step {index}")),
                    _ => {}
                },
            );
        (result, runner.lines, events, journal)
    };

    let (result, lines, events, _) = run(mkfs, RecordingRunner::default(), true);
    result.unwrap();
    assert_eq!(lines[..2], [assemble.clone(), "udevadm settle".to_string()]);
    assert_eq!(lines[2..], per_step[mkfs..].concat());
    assert_eq!(
        events[..2],
        ["/dev/md/data".to_string(), format!("step {mkfs}")]
    );

    let (result, lines, events, _) = run(mkfs, RecordingRunner::default(), false);
    result.unwrap();
    assert_eq!(
        lines,
        per_step[mkfs..].concat(),
        "no superblock, nothing to assemble"
    );
    assert_eq!(events[0], format!("step {mkfs}"));

    let (result, lines, events, journal) = run(mkfs, RecordingRunner::interrupting_at(0), true);
    let err = result.unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("step {create} (create-array:data) refused: /dev/md/data, which this step made, is not running and did not assemble from its members: ")),
        "{err}"
    );
    assert!(
        lines.is_empty() && events.is_empty(),
        "{lines:?} {events:?}"
    );
    assert_eq!(journal.failure.unwrap().step, "create-array:data");
    assert_eq!(journal.done.len(), mkfs, "the journal stays where it was");

    let (result, lines, events, _) = run(create, RecordingRunner::interrupting_at(0), true);
    result.unwrap();
    assert_eq!(
        lines,
        per_step[create..].concat(),
        "made in part: made again"
    );
    assert_eq!(events[0], format!("step {create}"));

    let (result, lines, events, _) = run(c.steps.len(), RecordingRunner::default(), true);
    result.unwrap();
    assert!(
        lines.is_empty() && events.is_empty(),
        "a finished setup leaves an array someone stopped alone: {lines:?} {events:?}"
    );
}
