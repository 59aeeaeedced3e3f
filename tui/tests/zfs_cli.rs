//! ZFS pools through the nasforge-setup binary: the plan a recipe gives on
//! a board with and without ZFS, and ZED's events through `alert --zed`.

use nasforge_testkit::board as common;

use std::process::{Command, Output};

const POOL: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "tank"
level = "raidz1"
disks = { transport = "sata", count = 3 }
filesystem = "zfs"
mount = "/srv/tank"

[[shares]]
name = "media"
path = "/srv/tank/media"
smb = { users = ["admin"] }
quota = "100GiB"
"#;

fn nasforge_setup(board: &common::Board, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(args)
        .args(["--root", board.host.root.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn with_recipe(board: &common::Board) {
    let boot = board.host.path("/boot/firmware");
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::write(boot.join("nasforge.toml"), POOL).unwrap();
}

#[test]
fn plan_dry_run_shows_the_pool_and_refuses_it_on_a_board_without_zfs() {
    let board = common::writable_copy("pi5-jmb585");
    with_recipe(&board);
    let out = nasforge_setup(&board, &["plan", "--dry-run"], &[]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("array 'tank': a ZFS pool cannot be built on this board: kernel"),
        "{err}"
    );

    common::with_zfs(&board);
    let out = nasforge_setup(&board, &["plan", "--dry-run"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with(
            "Pool 'tank': ZFS, one raidz1 vdev of 3 disks, mounted at /srv/tank; ashift 12"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            " -O mountpoint=/srv/tank tank raidz1 /dev/disk/by-id/wwn-0x50014ee2b0000001 "
        ) && stdout.contains("zfs create -p -o quota=107374182400 tank/media"),
        "{stdout}"
    );
    let calls = common::zfs_calls(&board);
    assert!(
        !calls.is_empty() && calls.iter().all(|c| c == "zpool status -P"),
        "a dry run only reads which pools are imported: {calls:?}"
    );
}

#[test]
fn zed_events_become_alerts_or_log_lines() {
    let board = common::writable_copy("pi5-jmb585");
    common::with_zfs(&board);
    let log = || {
        std::fs::read_to_string(board.host.path("/var/log/nasforge-alerts.log")).unwrap_or_default()
    };
    let out = nasforge_setup(
        &board,
        &["alert", "--zed"],
        &[
            ("ZEVENT_SUBCLASS", "statechange"),
            ("ZEVENT_POOL", "tank"),
            (
                "ZEVENT_VDEV_PATH",
                "/dev/disk/by-id/wwn-0x50014ee2b0000002-part1",
            ),
            ("ZEVENT_VDEV_STATE_STR", "FAULTED"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log().contains("member-failed on pinas: /dev/disk/by-id/wwn-0x50014ee2b0000002-part1 of pool tank is FAULTED"),
        "{}",
        log()
    );
    // With no [alerts] channel the event stays in the log and the status
    // file, as mdadm's do.
    assert!(log().contains("no alert channel is set up"), "{}", log());

    let scrub = [("ZEVENT_SUBCLASS", "scrub_finish"), ("ZEVENT_POOL", "tank")];
    common::zfs_answer(
        &board,
        "zpool status -P -p tank",
        &common::zfs_output("status-raidz1-healthy.txt"),
    );
    let out = nasforge_setup(&board, &["alert", "--zed"], &scrub);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log().contains("zed: scrub_finish of pool tank (no alert needed)"),
        "{}",
        log()
    );
    common::zfs_answer(
        &board,
        "zpool status -P -p tank",
        &common::zfs_output("status-mirrors-checksum-errors.txt"),
    );
    let out = nasforge_setup(&board, &["alert", "--zed"], &scrub);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        log().contains("data-errors on pinas: the scrub of pool tank found errors"),
        "{}",
        log()
    );
}
