//! Shared by the integration tests: fake boards from tests/data, with their
//! device nodes made as sparse files of the sysfs size carrying real
//! signature bytes, and udev's by-id links beside them.

use nasforge_engine::executor::{self, Event};
use nasforge_engine::journal::{self, Journal};
use nasforge_engine::machine::disks::{self, Host, Inventory};
use nasforge_engine::planner::Plan;
use nasforge_engine::runner::{RecordingRunner, Runner};
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{Context, Step};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/tests/data")
        .join(rel)
}

/// A board fixture and the temporary directory holding whatever the test
/// may change (device nodes, or a whole copy of the tree).
pub struct Board {
    pub host: Host,
    _scratch: tempfile::TempDir,
}

impl Board {
    pub fn inventory(&self) -> Inventory {
        disks::discover(&self.host).expect("discovery on the fixture")
    }

    pub fn node(&self, name: &str) -> PathBuf {
        self.host.dev.join(name)
    }
}

/// md at work on array `kernel` (`md127`) as sysfs shows it: `action`
/// (`recover`, `reshape`, `check`...) `done` of `total` sectors at `speed`
/// KiB/s. Exact counts: 3,600,000,000 KiB left at 100,000 KiB/s is 600 min.
pub fn md_at_work(host: &Host, kernel: &str, action: &str, done: u64, total: u64, speed: u64) {
    let md = host.path("/sys/block").join(kernel).join("md");
    fs::create_dir_all(&md).unwrap();
    for (name, value) in [
        ("sync_action", action.to_string()),
        ("sync_completed", format!("{done} / {total}")),
        ("sync_speed", speed.to_string()),
    ] {
        fs::write(md.join(name), value + "\n").unwrap();
    }
}

/// The fixture tree read in place, device nodes in a temporary directory.
pub fn board(name: &str) -> Board {
    board_with_nodes(name, "dev.txt")
}

/// As [`board`], with the device nodes from another manifest in the
/// fixture (`dev-with-data.txt`: the same disks holding other things).
pub fn board_with_nodes(name: &str, manifest: &str) -> Board {
    let scratch = tempfile::tempdir().unwrap();
    make_nodes(&data(name), manifest, scratch.path());
    Board {
        host: Host::new(data(name)).with_dev(scratch.path()),
        _scratch: scratch,
    }
}

/// A writable copy of the fixture with its device nodes in `<root>/dev`, as
/// the binary's `--root` expects (and for tests that add files such as a
/// journal or a staged password file).
pub fn writable_copy(name: &str) -> Board {
    writable_copy_with_nodes(name, "dev.txt")
}

pub fn writable_copy_with_nodes(name: &str, manifest: &str) -> Board {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(data(name))
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    make_nodes(&root, manifest, &root.join("dev"));
    Board {
        host: Host::new(&root),
        _scratch: scratch,
    }
}

fn make_nodes(root: &Path, manifest: &str, dev: &Path) {
    fs::create_dir_all(dev).unwrap();
    let manifest = fs::read_to_string(root.join(manifest)).unwrap();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let mut cols = line.split('\t');
        let node = cols.next().unwrap();
        let sectors: u64 = fs::read_to_string(root.join("sys/block").join(node).join("size"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let file = File::create(dev.join(node)).unwrap();
        file.set_len(sectors * 512).unwrap();
        for blob in cols {
            let (blob, offset) = blob.split_once('@').unwrap();
            let bytes = fs::read(data("blobs").join(blob)).unwrap();
            file.write_all_at(&bytes, offset.parse().unwrap()).unwrap();
        }
    }
    for entry in fs::read_dir(root.join("run/udev/data")).unwrap().flatten() {
        let devnum = entry
            .file_name()
            .to_string_lossy()
            .trim_start_matches('b')
            .to_string();
        let Some(node) = fs::read_dir(root.join("sys/block"))
            .unwrap()
            .flatten()
            .find(|b| fs::read_to_string(b.path().join("dev")).is_ok_and(|d| d.trim() == devnum))
        else {
            continue;
        };
        for link in fs::read_to_string(entry.path())
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("S:disk/by-id/"))
        {
            let path = dev.join("disk/by-id").join(link);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            // Two enclosures may claim the same link; the first wins, as in udev.
            let _ = std::os::unix::fs::symlink(Path::new("../..").join(node.file_name()), path);
        }
    }
}

/// The journal records of a run that stopped at `steps[index]`, so that
/// executing the journal starts there.
pub fn done_before(
    steps: &[nasforge_engine::steps::Step],
    index: usize,
) -> Vec<nasforge_engine::journal::StepRecord> {
    steps[..index]
        .iter()
        .map(|s| nasforge_engine::journal::StepRecord {
            id: s.id.clone(),
            already_done: None,
            at: 0,
        })
        .collect()
}

/// Gives a writable board ZFS as `machine::zfs::support` looks for it (the
/// module loaded, zpool installed), with `zpool` and `zfs` as shell scripts
/// that print the answer [`zfs_answer`] left for their arguments, fail as
/// zpool does for a pool or dataset they do not know, and log every call
/// to `<root>/fake-zfs/calls`. No pool exists until an answer says so.
pub fn with_zfs(board: &Board) {
    let root = &board.host.root;
    fs::create_dir_all(root.join("sys/module/zfs")).unwrap();
    fs::write(root.join("sys/module/zfs/version"), "2.1.11-1+deb12u1\n").unwrap();
    fs::create_dir_all(root.join("sbin")).unwrap();
    fs::create_dir_all(root.join("fake-zfs")).unwrap();
    for tool in ["zpool", "zfs"] {
        let script = root.join("sbin").join(tool);
        fs::write(
            &script,
            r#"#!/bin/sh
answers="$(dirname "$0")/../fake-zfs"
echo "$(basename "$0") $*" >> "$answers/calls"
key="$(printf '%s' "$(basename "$0") $*" | tr ' /' '_%')"
if [ -f "$answers/$key" ]; then cat "$answers/$key"; exit 0; fi
echo "cannot open '$*': no such pool or dataset" >&2
exit 1
"#,
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }
    zfs_answer(board, "zpool list -H -o name", "");
}

/// What the fake `zpool`/`zfs` prints for exactly this command line.
pub fn zfs_answer(board: &Board, command: &str, stdout: &str) {
    let key = command.replace(' ', "_").replace('/', "%");
    fs::write(board.host.root.join("fake-zfs").join(key), stdout).unwrap();
}

/// The fake tools' calls so far, one command line each.
pub fn zfs_calls(board: &Board) -> Vec<String> {
    fs::read_to_string(board.host.root.join("fake-zfs/calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A fixture from tests/data/zfs (zpool and zfs output).
pub fn zfs_output(name: &str) -> String {
    fs::read_to_string(data("zfs").join(name)).unwrap()
}

/// The Samba password the image builder stages, which the samba-users step
/// imports (and is done without).
pub fn stage_passwords(board: &Board) {
    let staged = board.host.path("/var/lib/nasforge/smbpasswd");
    fs::create_dir_all(staged.parent().unwrap()).unwrap();
    fs::write(&staged, "admin:1000:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-6565F0A2:\n").unwrap();
}

/// Lines a recording runner sees for each step when nothing is done yet.
pub fn lines_per_step(steps: &[Step]) -> Vec<Vec<String>> {
    steps
        .iter()
        .map(|s| {
            let mut r = RecordingRunner::default();
            for a in s.actions.iter().chain(&s.always) {
                r.apply(a).unwrap();
            }
            r.lines
        })
        .collect()
}

/// A power cut at the first action of each step in turn, on a fresh copy of
/// `board_name`: the next boot resumes at that step from the journal on
/// disk, runs exactly the steps left, and a finished setup run again does
/// nothing.
pub fn resume_from_every_step(
    board_name: &str,
    recipe: &DeviceRecipe,
    context: &Context,
    plan: &Plan,
    steps: &[Step],
) {
    let per_step = lines_per_step(steps);
    let n = steps.len();
    for k in 0..n {
        let board = writable_copy(board_name);
        stage_passwords(&board);
        let path = board.host.path(journal::PATH);
        let mut journal = Journal::new(
            recipe.clone(),
            context.clone(),
            plan.clone(),
            steps.to_vec(),
        );
        journal.save(&path).unwrap();

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
        assert_eq!(journal.failure.as_ref().unwrap().step, steps[k].id);
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

        let mut again = RecordingRunner::default();
        let mut journal = journal;
        executor::execute(&mut journal, &path, &board.host, &mut again, &mut |_| {}).unwrap();
        assert!(again.lines.is_empty());
    }
}
