//! A pool's files as setup writes them, run with the real mergerfs and
//! SnapRAID over tmpfs "disks" (a mount namespace of the test's own): the
//! service's `nasforge-setup pool mount` joins the mounted disks and leaves
//! a missing one out, new files land on the disk with most free space,
//! and after a sync a lost disk's files come back with `snapraid fix`,
//! byte for byte, and the disk joins the running pool (`pool join`).

use nasforge_engine::machine::disks::Inventory;
use nasforge_engine::planner;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{self, Action, Context};
use nasforge_testkit::{disks, mounts};
use std::path::{Path, PathBuf};
use std::process::Command;

const MB: u64 = 1 << 20;

const RECIPE: &str = disks::POOL_RECIPE;

/// The plan's snapraid.conf and the pool service's mergerfs options and
/// branches, for disks of 16, 32 and 64 MiB and a kept one of 24 MiB.
fn setup_files() -> (String, String, Vec<String>) {
    let photos = disks::photos("sdd", 24 * MB, "Elements");
    let inventory = Inventory {
        disks: vec![
            disks::usb("sda", 16 * MB, "Blank"),
            disks::usb("sdb", 64 * MB, "Blank"),
            disks::usb("sdc", 32 * MB, "Blank"),
            photos,
        ],
        network: None,
        arrays: vec![],
        zfs: Default::default(),
        failing: Default::default(),
        existing: Vec::new(),
        existing_pools: Vec::new(),
    };
    let recipe = DeviceRecipe::parse(RECIPE, Path::new("recipe.toml")).unwrap();
    let plan = planner::plan(recipe.storage.as_ref().unwrap(), &[], &inventory).unwrap();
    let ctx = Context {
        hostname: "pinas".into(),
        system_uuid: None,
        fs_uuids: vec!["0b6d3c9e-2222-4222-8333-444455556666".into()],
    };
    let written = |suffix: &str| {
        steps::generate(&plan, &ctx)
            .iter()
            .flat_map(|s| s.actions.clone())
            .find_map(|a| match a {
                Action::WriteFile { path, contents, .. } if path.ends_with(suffix) => {
                    Some(contents)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no step writes {suffix}"))
    };
    let conf = written("/etc/snapraid.conf");
    let unit = written("/nasforge-pool-pool.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has ExecStart");
    let argv: Vec<String> = exec.split(' ').map(str::to_string).collect();
    assert_eq!(
        argv[..4],
        [
            "/usr/local/sbin/nasforge-setup",
            "pool",
            "mount",
            "--options"
        ]
    );
    (conf, argv[4].clone(), argv[6..].to_vec())
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn sha256(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("file"))
        .collect();
    names.sort();
    names
}

#[test]
#[ignore = "needs root to mount: scripts/test runs it as root, as CI does"]
fn the_pool_joins_the_mounted_disks_and_snapraid_restores_a_lost_one() {
    let (conf, options, branches) = setup_files();
    assert_eq!(branches, ["/mnt/pool/d1", "/mnt/pool/d2", "/srv/photos"]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let at = |p: &str| -> PathBuf { root.join(p.trim_start_matches('/')) };
    // The files name the board's paths; here they live under the test's root.
    let conf = conf
        .replace(" /mnt/", &format!(" {}/mnt/", root.display()))
        .replace(" /srv/", &format!(" {}/srv/", root.display()))
        .replace(" /var/", &format!(" {}/var/", root.display()));
    mounts::private_namespace();
    mounts::tmpfs(&at("/mnt/pool/parity1"), Some(64));
    mounts::tmpfs(&at("/mnt/pool/d1"), Some(16));
    mounts::tmpfs(&at("/srv/photos"), Some(24));
    std::fs::create_dir_all(at("/mnt/pool/d2")).unwrap();
    std::fs::create_dir_all(at("/var/lib/snapraid")).unwrap();
    std::fs::create_dir_all(at("/srv/pool")).unwrap();
    // The kept disk's own file, there before the pool.
    std::fs::write(at("/srv/photos/file-kept.jpg"), vec![7u8; 3 * MB as usize]).unwrap();
    let conf_path = at("/snapraid.conf");
    std::fs::write(&conf_path, &conf).unwrap();
    let setup = env!("CARGO_BIN_EXE_nasforge-setup");
    let mount_pool = |branches: &[&str]| {
        let mut cmd = Command::new(setup);
        cmd.args(["pool", "mount", "--options", &options]);
        cmd.arg(at("/srv/pool"));
        cmd.args(branches.iter().map(|b| at(b)));
        cmd.output().unwrap()
    };

    // d2's disk is missing: its empty mount point on the system disk is
    // left out and named.
    let out = mount_pool(&["/mnt/pool/d1", "/mnt/pool/d2", "/srv/photos"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{} is not mounted", at("/mnt/pool/d2").display())),
        "{stderr}"
    );
    std::fs::write(at("/srv/pool/file-early"), b"early").unwrap();
    assert!(
        files(&at("/mnt/pool/d2")).is_empty(),
        "a file landed on the system disk"
    );
    assert!(
        at("/srv/pool/file-kept.jpg").exists(),
        "the kept disk's file is in the pool"
    );
    mounts::umount(&at("/srv/pool"));

    mounts::tmpfs(&at("/mnt/pool/d2"), Some(32));
    let out = mount_pool(&["/mnt/pool/d1", "/mnt/pool/d2", "/srv/photos"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written = Vec::new();
    for i in 0..20 {
        let name = format!("file-{i:02}");
        let data: Vec<u8> = (0..2 * MB as usize)
            .map(|b| (b * 31 + i * 7) as u8)
            .collect();
        std::fs::write(at("/srv/pool").join(&name), &data).unwrap();
        written.push(name);
    }
    // Most free space first: d2 (32 MiB) until it has less free than the
    // others, then the others in turn.
    let (d1, d2, kept) = (
        files(&at("/mnt/pool/d1")),
        files(&at("/mnt/pool/d2")),
        files(&at("/srv/photos")),
    );
    assert!(
        d2.len() > d1.len() && !d1.is_empty() && kept.len() > 1,
        "d1 {d1:?} d2 {d2:?} kept {kept:?}"
    );
    let lost: Vec<(String, String)> = d2
        .iter()
        .map(|n| (n.clone(), sha256(&at("/mnt/pool/d2").join(n))))
        .collect();

    let snapraid = |args: &[&str]| {
        let mut cmd = Command::new("snapraid");
        cmd.arg("-c").arg(&conf_path).args(args);
        cmd
    };
    let pool_sync = |extra: &[&str]| {
        let mut cmd = Command::new(setup);
        cmd.args(["pool", "sync", "--config"]).arg(&conf_path);
        cmd.arg("--root").arg(root).args(extra);
        cmd.output().unwrap()
    };
    let out = pool_sync(&[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && said.contains("The pool's parity is up to date (22 added, 0 removed"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 20 new files, the early one and the kept disk's own. Then many
    // files removed at once: the sync waits for a person.
    for i in 0..45 {
        std::fs::write(at("/srv/pool").join(format!("tiny-{i}")), [i as u8; 100]).unwrap();
    }
    assert!(pool_sync(&[]).status.success());
    for i in 0..45 {
        std::fs::remove_file(at("/srv/pool").join(format!("tiny-{i}"))).unwrap();
    }
    let out = pool_sync(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("45 files were removed since the last sync (more than 40)")
            && stderr.contains("nasforge-setup pool sync --allow-deletes"),
        "{stderr}"
    );
    let record = std::fs::read_to_string(at("/var/lib/nasforge/pool-care.json")).unwrap();
    assert!(
        record.contains("held back: 0 added, 45 removed"),
        "{record}"
    );
    assert!(pool_sync(&["--allow-deletes"]).status.success());
    let diff = snapraid(&["diff"]).output().unwrap();
    assert_eq!(
        diff.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&diff.stdout)
    );

    // d2 is lost: the board comes up without it.
    mounts::umount(&at("/srv/pool"));
    mounts::umount(&at("/mnt/pool/d2"));
    let out = mount_pool(&["/mnt/pool/d1", "/mnt/pool/d2", "/srv/photos"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!at("/srv/pool").join(&lost[0].0).exists());
    // A blank disk takes its place under its name, as `replace` does it.
    mounts::tmpfs(&at("/mnt/pool/d2"), Some(32));
    run(snapraid(&["-d", "d2", "-l"]).arg(at("/fix.log")).arg("fix"));
    run(&mut snapraid(&["-d", "d2", "-a", "check"]));
    for (name, sum) in &lost {
        assert_eq!(&sha256(&at("/mnt/pool/d2").join(name)), sum, "{name}");
    }
    let join = || {
        let out = Command::new(setup)
            .args(["pool", "join"])
            .arg(at("/srv/pool"))
            .arg(at("/mnt/pool/d2"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(join().contains("joined the pool"));
    assert!(
        join().contains("in the pool at"),
        "a second join adds nothing"
    );
    let mut served = files(&at("/srv/pool"));
    served.retain(|n| n != "file-kept.jpg" && n != "file-early");
    assert_eq!(served, written);
    mounts::umount(&at("/srv/pool"));
}

#[test]
fn with_no_disk_mounted_the_pool_is_not_mounted_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let branch = tmp.path().join("d1");
    std::fs::create_dir_all(&branch).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(["pool", "mount", "--options", "fsname=pool"])
        .arg(tmp.path().join("pool"))
        .arg(&branch)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("none of the pool's disks is mounted"),
        "{stderr}"
    );
    assert!(!tmp.path().join("pool").exists());
}
