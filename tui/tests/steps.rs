//! The exact steps for representative plans (snapshots), and resuming an
//! interrupted setup from every step.

mod common;

use nasforge_setup::executor::{self, Event};
use nasforge_setup::journal::Journal;
use nasforge_setup::planner::{self, Plan};
use nasforge_setup::runner::RecordingRunner;
use nasforge_setup::setup;
use nasforge_setup::spec::DeviceRecipe;
use nasforge_setup::steps::{self, Context, Step};
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
        hostname: setup::hostname(&board.host),
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
    journal.done = c.steps[..index]
        .iter()
        .map(|s| nasforge_setup::journal::StepRecord {
            id: s.id.clone(),
            already_done: None,
            at: 0,
        })
        .collect();
    // The third action of the step is mdadm --create.
    let mut runner = RecordingRunner::interrupting_at(2);
    let path = board.host.path(nasforge_setup::journal::PATH);
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

/// Lines a recording runner sees for each step when nothing is done yet.
fn lines_per_step(steps: &[Step]) -> Vec<Vec<String>> {
    steps
        .iter()
        .map(|s| {
            let mut r = RecordingRunner::default();
            for a in s.actions.iter().chain(&s.always) {
                nasforge_setup::runner::Runner::apply(&mut r, a).unwrap();
            }
            r.lines
        })
        .collect()
}

fn resume_from_every_step(board_name: &str, recipe: &str) {
    let c = case(common::board(board_name), recipe);
    let per_step = lines_per_step(&c.steps);
    let n = c.steps.len();
    for k in 0..n {
        let board = common::writable_copy(board_name);
        let staged = board.host.path("/var/lib/nasforge/smbpasswd");
        std::fs::create_dir_all(staged.parent().unwrap()).unwrap();
        std::fs::write(&staged, "admin:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-6565F0A2:\n").unwrap();
        let path = board.host.path(nasforge_setup::journal::PATH);
        let mut journal = Journal::new(
            c.recipe.clone(),
            c.context.clone(),
            c.plan.clone(),
            c.steps.clone(),
        );
        journal.save(&path).unwrap();

        // Power cut at the first action of step k.
        let before: usize = per_step[..k].iter().map(Vec::len).sum();
        let mut cut = RecordingRunner::interrupting_at(before);
        let err =
            executor::execute(&mut journal, &path, &board.host, &mut cut, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string().contains("simulated power cut"),
            "step {k}: {err}"
        );

        // Next boot: a fresh process reads the journal from disk.
        let mut journal = Journal::load(&path).unwrap().unwrap();
        assert_eq!(
            journal.next_step(),
            k,
            "journal position after a cut in step {k}"
        );
        assert_eq!(journal.failure.as_ref().unwrap().step, c.steps[k].id);
        let mut resumed = RecordingRunner::default();
        let mut started = Vec::new();
        executor::execute(&mut journal, &path, &board.host, &mut resumed, &mut |e| {
            if let Event::Starting { index, .. } = e {
                started.push(index);
            }
        })
        .unwrap_or_else(|e| panic!("resuming at step {k}: {e}"));
        assert_eq!(started, (k..n).collect::<Vec<_>>());
        assert_eq!(resumed.lines, per_step[k..].concat(), "resumed at step {k}");
        let journal = Journal::load(&path).unwrap().unwrap();
        assert!(journal.is_complete() && journal.finished.is_some() && journal.failure.is_none());

        // A finished setup re-run does nothing.
        let mut again = RecordingRunner::default();
        let mut journal = journal;
        executor::execute(&mut journal, &path, &board.host, &mut again, &mut |_| {}).unwrap();
        assert!(again.lines.is_empty());
    }
}

#[test]
fn resumes_a_raid5_setup_from_every_step() {
    resume_from_every_step("pi5-jmb585", PI5_RAID5);
}

#[test]
fn resumes_a_raid0_setup_from_every_step() {
    resume_from_every_step("pi4-usb", PI4_RAID0_UNEQUAL);
}
