//! `nasforge-setup apply` and `share add` on a fake root after a finished
//! setup: the plan is printed, and nothing is changed there.

use nasforge_testkit::board as common;
use nasforge_testkit::finished;

use nasforge_engine::journal;
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;
use std::process::{Command, Output};

const RECIPE: &str = r#"# my NAS
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

const PHOTOS: &str =
    "\n[[shares]]\nname = \"photos\"\npath = \"/srv/data/photos\"\nsmb = { users = [\"admin\"] }\n";

fn nasforge_setup(board: &common::Board, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(args)
        .arg("--root")
        .arg(&board.host.root)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Pi 5 fixture set up from `RECIPE`, with `on_boot` as its nasforge.toml.
fn set_up(on_boot: &str) -> common::Board {
    let board = common::writable_copy("pi5-jmb585");
    finished::setup(
        &board.host,
        &DeviceRecipe::parse(RECIPE, Path::new("r.toml")).unwrap(),
    );
    let boot = board.host.path("/boot/firmware");
    std::fs::create_dir_all(&boot).unwrap();
    std::fs::write(boot.join("nasforge.toml"), on_boot).unwrap();
    board
}

#[test]
fn apply_prints_the_difference_as_a_plan_and_changes_nothing_on_a_fake_root() {
    let board = set_up(&format!("{RECIPE}{PHOTOS}"));
    let before = std::fs::read(board.host.path(journal::PATH)).unwrap();
    let out = nasforge_setup(&board, &["apply", "--yes"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        stdout.contains("+ share 'photos' at /srv/data/photos (SMB: admin)"),
        "{stdout}"
    );
    assert!(!out.status.success());
    assert!(
        stderr.contains("refusing to change the system with --root"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(board.host.path(journal::PATH)).unwrap(),
        before
    );
}

#[test]
fn apply_with_the_recipe_that_was_set_up_has_nothing_to_change() {
    let board = set_up(RECIPE);
    let out = nasforge_setup(&board, &["apply"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("nothing to change"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn apply_names_the_file_and_line_of_a_typo_and_refuses_unknown_users() {
    let board = set_up(&RECIPE.replace("mount = ", "mont = "));
    let err = text(&nasforge_setup(&board, &["apply"]).stderr);
    assert!(
        err.contains("/boot/firmware/nasforge.toml:9:1: unknown field `mont`"),
        "{err}"
    );

    let board = set_up(&format!(
        "{RECIPE}{}",
        PHOTOS.replace("[\"admin\"]", "[\"bob\"]")
    ));
    let out = nasforge_setup(&board, &["apply", "--yes"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stdout).contains("add it with `nasforge-setup user add bob`"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("nothing was changed"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn share_add_shows_the_plan_and_leaves_the_recipe_alone_on_a_fake_root() {
    let board = set_up(RECIPE);
    let file = board.host.path("/boot/firmware/nasforge.toml");
    let out = nasforge_setup(
        &board,
        &[
            "share",
            "add",
            "photos",
            "--path",
            "/srv/data/photos",
            "--smb-users",
            "admin",
            "--yes",
        ],
    );
    assert!(
        text(&out.stdout).contains("+ share 'photos' at /srv/data/photos (SMB: admin)"),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), RECIPE);

    let outside = nasforge_setup(
        &board,
        &["share", "add", "x", "--path", "/home/x", "--guest"],
    );
    let err = text(&outside.stderr);
    assert!(
        err.contains("nasforge.toml:") && err.contains("is not on any array"),
        "{err}"
    );
}

/// A NAS the wizard set up keeps `mode = "wizard"` and no arrays on its
/// card; the share's path is still checked, against what setup made.
#[test]
fn share_add_refuses_a_system_directory_on_a_nas_the_wizard_set_up() {
    let card = "[storage]\nmode = \"wizard\"\n\n[[shares]]\nname = \"data\"\npath = \"/srv/data\"\nsmb = { users = [\"admin\"] }\n";
    let board = set_up(card);
    let file = board.host.path("/boot/firmware/nasforge.toml");
    let out = nasforge_setup(
        &board,
        &[
            "share",
            "add",
            "x",
            "--path",
            "/",
            "--smb-users",
            "admin",
            "--nfs",
            "*",
            "--yes",
        ],
    );
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains(
            "! refused: shares[1].path: share 'x': / is on none of the arrays, pools or kept disks setup made (/srv/data)"
        ),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "nothing was changed and {} is as it was: change the command as said above",
            file.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains("chown"), "nothing would run: {shown}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), card);
}
