//! An array already set up on a fake board, for the care tests: the setup
//! journal that recorded it, member partitions in sysfs held by the md
//! array, and the md array's own sysfs directory, which a test then changes
//! (a member failed, a disk pulled, a rebuild under way).

use crate::board::{self as common, Board};
use crate::finished;
use nasforge_engine::journal::Journal;
use nasforge_engine::planner;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::Context;
use std::fs;
use std::path::{Path, PathBuf};

pub const MD: &str = "md127";

pub fn recipe(level: &str, count: usize, filesystem: &str) -> String {
    format!(
        r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "{level}"
disks = {{ transport = "sata", count = {count} }}
filesystem = "{filesystem}"
mount = "/srv/data"
"#
    )
}

/// The pi5 board with array `data` built by a finished setup from the first
/// `count` SATA disks, healthy, and its journal saved.
pub fn set_up(level: &str, count: usize, filesystem: &str, nodes: &str) -> (Board, Journal) {
    set_up_from(&recipe(level, count, filesystem), level, count, nodes)
}

/// As [`set_up`], from `text`: [`recipe`]'s array `data` of `level` over
/// `count` disks, and whatever else the test adds (a kept disk).
pub fn set_up_from(text: &str, level: &str, count: usize, nodes: &str) -> (Board, Journal) {
    let board = common::writable_copy_with_nodes("pi5-jmb585", nodes);
    let recipe = DeviceRecipe::parse(text, Path::new("nasforge.toml")).unwrap();
    let plan = planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &board.inventory(),
    )
    .unwrap();
    let context = Context {
        hostname: "nas".into(),
        system_uuid: None,
        fs_uuids: vec!["1b4e28ba-2fa1-11d2-883f-0016d3cca427".into()],
    };
    let journal = finished::save(&board.host, Journal::new(recipe, context, plan, vec![]));
    let members: Vec<String> = journal.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.clone())
        .collect();
    let md = md_dir(&board);
    fs::create_dir_all(&md).unwrap();
    for (file, value) in [
        ("level", level.to_string()),
        ("raid_disks", count.to_string()),
        ("degraded", "0".into()),
        ("sync_action", "idle".into()),
        ("sync_completed", "none".into()),
        ("sync_speed", "0".into()),
        ("reshape_position", "none".into()),
    ] {
        fs::write(md.join(file), format!("{value}\n")).unwrap();
    }
    fs::write(board.host.dev.join(MD), "").unwrap();
    fs::create_dir_all(board.host.dev.join("md")).unwrap();
    std::os::unix::fs::symlink(format!("../{MD}"), board.host.dev.join("md/data")).unwrap();
    for (i, disk) in members.iter().enumerate() {
        add_member(&board, disk, i, "in_sync");
    }
    (board, journal)
}

pub fn md_dir(board: &Board) -> PathBuf {
    board.host.path("/sys/block").join(MD).join("md")
}

fn disk_sys(board: &Board, disk: &str) -> PathBuf {
    fs::canonicalize(board.host.path("/sys/block").join(disk)).unwrap()
}

/// Partition 1 of `disk` in sysfs and /dev (with its by-id `-part1`
/// links), held by the array and listed by md with `state`.
pub fn add_member(board: &Board, disk: &str, index: usize, state: &str) {
    let part = format!("{disk}1");
    let sys = disk_sys(board, disk).join(&part);
    fs::create_dir_all(sys.join("holders").join(MD)).unwrap();
    let sectors: u64 = fs::read_to_string(disk_sys(board, disk).join("size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let major = fs::read_to_string(disk_sys(board, disk).join("dev")).unwrap();
    let major = major.split(':').next().unwrap().to_string();
    for (file, value) in [
        ("partition", "1".to_string()),
        ("start", "2048".into()),
        ("size", (sectors - 4096).to_string()),
        ("dev", format!("{major}:{}", 100 + index)),
    ] {
        fs::write(sys.join(file), format!("{value}\n")).unwrap();
    }
    fs::write(board.host.dev.join(&part), "").unwrap();
    let by_id = board.host.dev.join("disk/by-id");
    for link in fs::read_dir(&by_id).unwrap().flatten() {
        let target = fs::read_link(link.path()).unwrap();
        if target.file_name().unwrap() == disk {
            let name = format!("{}-part1", link.file_name().to_string_lossy());
            let _ = std::os::unix::fs::symlink(format!("../../{part}"), by_id.join(name));
        }
    }
    let dev = md_dir(board).join(format!("dev-{part}"));
    fs::create_dir_all(&dev).unwrap();
    fs::write(dev.join("state"), format!("{state}\n")).unwrap();
    std::os::unix::fs::symlink(&sys, dev.join("block")).unwrap();
}

pub fn set(board: &Board, file: &str, value: &str) {
    fs::write(md_dir(board).join(file), format!("{value}\n")).unwrap();
}

/// md marks `part` faulty; the array is one member short.
pub fn fail(board: &Board, part: &str) {
    set(board, &format!("dev-{part}/state"), "faulty");
    set(board, "degraded", "1");
}

/// `disk` is pulled out: gone from sysfs, /dev and the array (its
/// partition 1, or the disk itself for an adopted array of whole disks).
pub fn pull(board: &Board, disk: &str) {
    let part = md_dir(board).join(format!("dev-{disk}1"));
    let member = if part.exists() {
        part
    } else {
        md_dir(board).join(format!("dev-{disk}"))
    };
    fs::remove_dir_all(member).unwrap();
    fs::remove_file(board.host.path("/sys/block").join(disk)).unwrap();
    fs::remove_file(board.host.dev.join(disk)).unwrap();
    set(board, "degraded", "1");
}

/// `disk` reports `sectors` 512-byte sectors.
pub fn resize(board: &Board, disk: &str, sectors: u64) {
    fs::write(disk_sys(board, disk).join("size"), format!("{sectors}\n")).unwrap();
}

/// [`set_up`]'s array as an old NAS made it and setup adopted it: md's
/// superblocks on the whole disks (as OpenMediaVault puts them), no
/// partition on them, and the journal's entry adopted with that UUID.
pub fn adopt_whole_disks(board: &Board, journal: &mut Journal) {
    let array = &mut journal.plan.arrays[0];
    let disks: Vec<String> = array.members.iter().map(|m| m.disk.name.clone()).collect();
    let md = md_dir(board);
    let by_id = board.host.dev.join("disk/by-id");
    for disk in &disks {
        let part = format!("{disk}1");
        fs::remove_dir_all(md.join(format!("dev-{part}"))).unwrap();
        fs::remove_dir_all(disk_sys(board, disk).join(&part)).unwrap();
        fs::remove_file(board.host.dev.join(&part)).unwrap();
        for link in fs::read_dir(&by_id).unwrap().flatten() {
            if fs::read_link(link.path()).unwrap().file_name().unwrap() == part.as_str() {
                fs::remove_file(link.path()).unwrap();
            }
        }
        fs::create_dir_all(disk_sys(board, disk).join("holders").join(MD)).unwrap();
        let dev = md.join(format!("dev-{disk}"));
        fs::create_dir_all(&dev).unwrap();
        fs::write(dev.join("state"), "in_sync\n").unwrap();
        std::os::unix::fs::symlink(disk_sys(board, disk), dev.join("block")).unwrap();
    }
    array.imported = Some(planner::Imported {
        uuid: crate::old_nas::OMV_UUID.into(),
        name: Some("openmediavault:0".into()),
        devices: disks.clone(),
        raid_devices: disks.len(),
        partitions: disks.into_iter().map(|d| (d, None)).collect(),
        degraded: false,
        left_behind: vec![],
        force: false,
        locked: vec![],
    });
}
