//! `nasforge-setup replace`, `grow` and `resume` on a fake board (commands
//! are recorded there, not run).

use nasforge_testkit::care as care_support;

use std::process::{Command, Output};

fn setup_cli(root: &std::path::Path, args: &[&str]) -> Output {
    // --root is global: after the subcommand, which conflicts with the
    // top-level flags.
    Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn replace_picks_the_one_blank_disk_runs_every_step_and_resume_then_has_nothing_to_do() {
    let (board, _journal) = care_support::set_up("raid5", 3, "ext4", "dev.txt");
    care_support::pull(&board, "sdc");
    let out = setup_cli(&board.host.root, &["replace", "--yes"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("MISSING")
            && all.contains("sdd is the only blank disk that fits")
            && all.contains("nasforge-setup: [1/5] Partition sdd")
            && all.contains("nasforge-setup: [5/5] Record the new members of 'data'")
            && all.contains("nasforge-setup: replace complete"),
        "{all}"
    );
    let out = setup_cli(&board.host.root, &["resume"]);
    assert!(out.status.success());
    assert!(
        text(&out).contains("no operation is pending"),
        "{}",
        text(&out)
    );
}

#[test]
fn grow_without_yes_changes_nothing_unless_confirmed() {
    let (board, _journal) = care_support::set_up("raid5", 3, "ext4", "dev.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(["grow", "--array", "data", "--disk", "/dev/sdd", "--root"])
        .arg(&board.host.root)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("Grow 'data' (raid5) from 3 to 4 disks with sdd")
            && all.contains("Type yes to go on")
            && all.contains("not confirmed; nothing was changed"),
        "{all}"
    );
    assert!(!board.host.path(nasforge_engine::operation::PATH).exists());
    let out = setup_cli(
        &board.host.root,
        &["grow", "--array", "data", "--disk", "sdx"],
    );
    assert!(
        text(&out).contains("no disk `sdx` is attached"),
        "{}",
        text(&out)
    );
}
