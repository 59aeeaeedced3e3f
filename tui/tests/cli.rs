//! The nasforge-setup binary as first boot and a user run it.

use nasforge_testkit::board as common;
use nasforge_testkit::finished;

use nasforge_engine::journal::{self, Journal};
use nasforge_engine::setup::COMPLETE_MARKER;
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;
use std::process::{Command, Output};

fn nasforge_setup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const RECIPE: &str = r#"
[board]
model = "pi5"

[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid5"
disks = { transport = "sata", count = 4 }
filesystem = "ext4"
mount = "/srv/data"

[[shares]]
name = "data"
path = "/srv/data"
smb = { users = ["admin"] }
"#;

/// A Pi 5 fixture with the recipe where the builder puts it.
fn pi5_with_recipe(recipe: &str) -> common::Board {
    let board = common::writable_copy("pi5-jmb585");
    let boot = board.host.path("/boot/firmware");
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::write(boot.join("nasforge.toml"), recipe).unwrap();
    board
}

#[test]
fn without_a_terminal_the_wizard_points_at_what_works_without_one() {
    let board = common::writable_copy("pi5-jmb585");
    let root = board.host.root.to_str().unwrap().to_string();
    let out = nasforge_setup(&["--root", &root, "--dry-run"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("the wizard needs a terminal")
            && err.contains("--unattended")
            && err.contains("nasforge-setup plan"),
        "{err}"
    );
}

#[test]
fn help_describes_the_commands() {
    let out = nasforge_setup(&["--help"]);
    let help = text(&out.stdout);
    for word in [
        "--unattended",
        "--dry-run",
        "wizard",
        "plan",
        "status",
        "--root",
        "--recipe",
    ] {
        assert!(help.contains(word), "{word} missing from:\n{help}");
    }
    let plan_help = text(&nasforge_setup(&["plan", "--help"]).stdout);
    assert!(plan_help.contains("--dry-run"), "{plan_help}");
}

#[test]
fn plan_dry_run_prints_the_plan_and_every_command_from_the_boot_partition_recipe() {
    let board = pi5_with_recipe(RECIPE);
    let root = board.host.root.to_str().unwrap().to_string();
    let out = nasforge_setup(&["plan", "--dry-run", "--root", &root]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with(
            "Array 'data': raid5 of 4 disk(s) as /dev/md/data, ext4 mounted at /srv/data"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("mdadm --create /dev/md/data --run --homehost=pinas"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[18/19] Watch disk health with smartd"),
        "{stdout}"
    );

    let words_only = text(&nasforge_setup(&["plan", "--root", &root]).stdout);
    assert!(
        words_only.contains("capacity: about 12 TB") && !words_only.contains("mdadm --create"),
        "{words_only}"
    );
}

#[test]
fn unattended_on_a_fake_root_plans_but_changes_nothing() {
    let board = pi5_with_recipe(RECIPE);
    let root = board.host.root.to_str().unwrap().to_string();
    let out = nasforge_setup(&["--unattended", "--root", &root]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Array 'data': raid5 of 4 disk(s)"),
        "the plan is shown: {err}"
    );
    assert!(
        err.contains("refusing to change the system with --root"),
        "{err}"
    );
    assert!(
        !board.host.path(journal::PATH).exists(),
        "no journal, so nothing started"
    );
    assert!(!text(&out.stdout).contains(COMPLETE_MARKER));
}

#[test]
fn recipe_errors_name_file_line_and_column_and_wizard_mode_is_not_run_unattended() {
    let board = pi5_with_recipe(&RECIPE.replace("raid5", "raid7"));
    let root = board.host.root.to_str().unwrap().to_string();
    let out = nasforge_setup(&["--unattended", "--root", &root]);
    let err = text(&out.stderr);
    assert!(
        err.contains("boot/firmware/nasforge.toml:9:9: unknown variant `raid7`"),
        "{err}"
    );
    let status =
        std::fs::read_to_string(board.host.path("/boot/firmware/nasforge-status.txt")).unwrap();
    assert!(
        status.contains("Setup: NOT POSSIBLE") && status.contains("raid7"),
        "{status}"
    );

    let board = pi5_with_recipe(&RECIPE.replace("\"unattended\"", "\"wizard\""));
    let root = board.host.root.to_str().unwrap().to_string();
    let err = text(&nasforge_setup(&["--unattended", "--root", &root]).stderr);
    assert!(err.contains("storage.mode is \"wizard\""), "{err}");
}

/// Writes a journal as a finished setup leaves it.
fn finished_journal(board: &common::Board, recipe_text: &str) {
    let recipe = DeviceRecipe::parse(recipe_text, Path::new("r.toml")).unwrap();
    finished::setup(&board.host, &recipe);
}

#[test]
fn a_finished_setup_rerun_is_a_no_op_that_still_reports_complete() {
    let board = pi5_with_recipe(RECIPE);
    finished_journal(&board, RECIPE);
    let root = board.host.root.to_str().unwrap().to_string();
    let before = std::fs::read(board.host.path(journal::PATH)).unwrap();
    let out = nasforge_setup(&["--unattended", "--root", &root]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("already complete"));
    assert_eq!(text(&out.stdout).lines().last(), Some(COMPLETE_MARKER));
    assert_eq!(
        std::fs::read(board.host.path(journal::PATH)).unwrap(),
        before,
        "the journal is untouched"
    );

    let changed = RECIPE.replace("raid5", "raid6");
    std::fs::write(board.host.path("/boot/firmware/nasforge.toml"), &changed).unwrap();
    let err = text(&nasforge_setup(&["--unattended", "--root", &root]).stderr);
    assert!(
        err.contains("records a setup from a different recipe (19 of 19 steps done)"),
        "{err}"
    );
}

#[test]
fn status_reports_arrays_filesystems_and_shares_and_writes_the_boot_file() {
    let board = pi5_with_recipe(RECIPE);
    finished_journal(&board, RECIPE);
    std::fs::write(
        board.host.path("/proc/mdstat"),
        "Personalities : [raid6] [raid5] [raid4]\nmd127 : active raid5 sdd1[4] sdc1[2] sdb1[1] sda1[0]\n      11720653824 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/3] [UUU_]\n      [>....................]  recovery =  2.4% (95232/3906884608) finish=600.0min speed=108000K/sec\n      bitmap: 0/30 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n",
    )
    .unwrap();
    // 2.4% done, 3,600,000,000 KiB left at 100,000 KiB/s: ten hours.
    common::md_at_work(
        &board.host,
        "md127",
        "recover",
        177_000_000,
        7_377_000_000,
        100_000,
    );
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink("../md127", board.node("md/data")).unwrap();
    let root = board.host.root.to_str().unwrap().to_string();

    let out = nasforge_setup(&["status", "--root", &root]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("Setup: complete (19 steps, finished 2027-01-15 08:00 UTC)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "data (md127): raid5, degraded (3 of 4 members), rebuilding 2% (about 10 h 00 min left)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("/srv/data (data): NOT MOUNTED"), "{stdout}");
    assert!(
        stdout.contains("data: /srv/data (SMB for admin)"),
        "{stdout}"
    );
    let file =
        std::fs::read_to_string(board.host.path("/boot/firmware/nasforge-status.txt")).unwrap();
    assert_eq!(file, stdout, "the boot partition gets the same report");

    let json: serde_json::Value =
        serde_json::from_slice(&nasforge_setup(&["status", "--json", "--root", &root]).stdout)
            .unwrap();
    assert_eq!(json["setup"]["state"], "complete");
    assert_eq!(json["arrays"][0]["degraded"], true);
    assert_eq!(json["arrays"][0]["name"], "data");
}

#[test]
fn status_summarises_smart_health_per_member() {
    let board = pi5_with_recipe(RECIPE);
    finished_journal(&board, RECIPE);
    let journal = Journal::load(&board.host.path(journal::PATH))
        .unwrap()
        .unwrap();
    let mut runner = nasforge_engine::runner::RecordingRunner::default();
    runner.responses.push((
        "smartctl --json -a /dev/disk/by-id/wwn-0x50014ee2b0000003".into(),
        r#"{"smart_status":{"passed":false},"temperature":{"current":51},"power_on_time":{"hours":40112}}"#.into(),
    ));
    runner.responses.push((
        "smartctl --json -a".into(),
        r#"{"smart_status":{"passed":true},"temperature":{"current":34},"power_on_time":{"hours":1200}}"#.into(),
    ));
    let status = nasforge_engine::status::collect(&board.host, Some(&journal), &mut runner);
    assert_eq!(
        runner
            .lines
            .iter()
            .filter(|l| l.starts_with("smartctl"))
            .count(),
        4,
        "one query per member: {:?}",
        runner.lines
    );
    let text = status.render();
    assert!(
        text.contains("  sda: passed, 34 °C, 1200 hours on"),
        "{text}"
    );
    assert!(
        text.contains("  sdc: FAILING: replace this disk, 51 °C, 40112 hours on"),
        "{text}"
    );
}

#[test]
fn an_old_array_assembled_under_the_recipes_name_stops_the_plan() {
    // The CM4 fixture's sdd is a member of an old NAS's array, which came
    // up as md127 and udev linked as /dev/md/data.
    let board = common::writable_copy("cm4-marvell9215");
    let md = board.host.path("/sys/block/md127/md/dev-sdd");
    std::fs::create_dir_all(&md).unwrap();
    std::os::unix::fs::symlink("../../../../../sdd", md.join("block")).unwrap();
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink("../md127", board.node("md/data")).unwrap();
    let arrays = board.inventory().arrays;
    assert_eq!(
        arrays,
        [nasforge_engine::machine::disks::MdArray {
            device: "md127".into(),
            name: Some("data".into()),
            members: vec!["sdd".into()],
        }]
    );

    let recipe = board.host.path("/recipe.toml");
    std::fs::write(
        &recipe,
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { transport = \"sata\", count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n",
    )
    .unwrap();
    let root = board.host.root.to_str().unwrap().to_string();
    let out = nasforge_setup(&[
        "plan",
        "--root",
        &root,
        "--recipe",
        recipe.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        err.contains("array 'data': /dev/md/data already exists (md127, from sdd (KINGSTON SA400S37240G (50026B7784A1B2C3), 240.1 GB sata SSD))"),
        "{err}"
    );
    assert!(
        err.contains("found 7 disk(s):")
            && err.contains("  sda: KINGSTON SA400S37240G (50026B7784A1B2C0), 240.1 GB sata SSD"),
        "the disks found are listed: {err}"
    );
}

#[test]
fn the_system_mirror_degraded_during_setup_is_logged_and_after_it_an_alert() {
    let board = common::writable_copy("pi5-jmb585");
    let root = board.host.root.to_str().unwrap();
    let recipe = DeviceRecipe::parse(RECIPE, Path::new("nasforge.toml")).unwrap();
    let finished = finished::setup(&board.host, &recipe);
    let log = || {
        std::fs::read_to_string(board.host.path("/var/log/nasforge-alerts.log")).unwrap_or_default()
    };
    // Setup makes the mirror on one disk: mdadm's monitor says so.
    let mut unfinished = finished.clone();
    unfinished.done.pop();
    unfinished.finished = None;
    unfinished.save(&journal::path(&board.host)).unwrap();
    let degraded = [
        "alert",
        "--root",
        root,
        "--mdadm",
        "DegradedArray",
        "/dev/md/system",
    ];
    let out = nasforge_setup(&degraded);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log().contains(
            "mdadm: DegradedArray /dev/md/system (setup is mirroring the system; no alert needed)"
        ) && !log().contains("lost a disk"),
        "{}",
        log()
    );
    finished.save(&journal::path(&board.host)).unwrap();
    let out = nasforge_setup(&degraded);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log().contains("degraded on pinas: the system's mirror /dev/md/system lost a disk"),
        "{}",
        log()
    );
}

#[test]
fn completions_and_the_manual_page_name_every_command() {
    let bash = nasforge_setup(&["completions", "bash"]);
    let script = text(&bash.stdout);
    assert!(bash.status.success(), "{}", text(&bash.stderr));
    assert!(script.contains("_nasforge__setup()"), "{script}");
    for command in ["replace", "grow", "status", "apply", "alert"] {
        assert!(script.contains(command), "{command} in {script}");
    }
    let fish = text(&nasforge_setup(&["completions", "fish"]).stdout);
    assert!(fish.contains("complete -c nasforge-setup"), "{fish}");
    let man = nasforge_setup(&["man"]);
    let page = text(&man.stdout);
    assert!(
        man.status.success() && page.contains(".TH nasforge-setup 8"),
        "{page}"
    );
    assert!(
        page.contains("replace") && page.contains("\\-\\-unattended"),
        "{page}"
    );
    let bad = nasforge_setup(&["completions", "tcsh"]);
    assert!(
        !bad.status.success()
            && text(&bad.stderr).contains("possible values: bash, elvish, fish, powershell, zsh"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn root_and_recipe_go_before_or_after_a_command_and_setup_flags_not_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    for args in [
        ["--root", root, "apply", "--yes"],
        ["apply", "--yes", "--root", root],
    ] {
        let out = nasforge_setup(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("cannot read the recipe {root}/boot/nasforge.toml")),
            "{args:?}: {stderr}"
        );
    }
    let out = nasforge_setup(&["--unattended", "--root", root, "status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--unattended and --dry-run are for setup itself, not for `status`"),
        "{stderr}"
    );
}
