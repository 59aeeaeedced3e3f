//! What the host kernel can do for real: GPT partitioning and mkfs on loop
//! devices, checked with sgdisk, sfdisk and blkid; and disks with data left
//! byte-identical. md RAID, mounts and shares are proved in the emulated
//! board, not here (this kernel has no md driver).

mod common;

use nasforge_setup::disks::Host;
use nasforge_setup::executor;
use nasforge_setup::journal::Journal;
use nasforge_setup::partition::{self, PartitionKind};
use nasforge_setup::planner;
use nasforge_setup::runner::{Runner, SystemRunner};
use nasforge_setup::spec::DeviceRecipe;
use nasforge_setup::steps::{self, Action, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

/// A loop device over a sparse file, detached on drop.
struct Loop {
    device: PathBuf,
    _backing: tempfile::TempDir,
}

impl Loop {
    /// None (with the reason printed) where loop devices cannot be used.
    fn new(size: u64) -> Option<Loop> {
        if unsafe { libc::geteuid() } != 0 {
            println!("skipped: loop device tests need root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk.img");
        std::fs::File::create(&file).unwrap().set_len(size).unwrap();
        // -P: partition scanning, so BLKRRPART works and p1 appears.
        let out = Command::new("losetup")
            .args(["-f", "--show", "-P"])
            .arg(&file)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let device = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
                Some(Loop {
                    device,
                    _backing: dir,
                })
            }
            Ok(o) => {
                println!(
                    "skipped: no loop device ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                println!("skipped: losetup not available ({e})");
                None
            }
        }
    }

    fn path(&self) -> &str {
        self.device.to_str().unwrap()
    }

    fn part1(&self) -> String {
        partition::partition_path(self.path(), 1)
    }

    fn sha256(&self) -> String {
        let out = Command::new("sha256sum")
            .arg(&self.device)
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A plan whose single disk is `device`, as discovery would describe it.
fn plan_on(device: &str, level: &str, fs: &str, count: usize) -> (planner::Plan, Context) {
    let recipe = format!(
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"vol\"\nlevel = \"{level}\"\ndisks = {{ count = {count} }}\nfilesystem = \"{fs}\"\nmount = \"/srv/vol\"\n"
    );
    let recipe = DeviceRecipe::parse(&recipe, Path::new("test.toml")).unwrap();
    let name = device.trim_start_matches("/dev/").to_string();
    let disks: Vec<_> = (0..count)
        .map(|i| nasforge_setup::disks::Disk {
            name: if i == 0 {
                name.clone()
            } else {
                format!("{name}x{i}")
            },
            major: 7,
            minor: 0,
            size: nasforge_setup::size::Size(320 * MIB),
            logical_block_size: 512,
            model: None,
            serial: None,
            wwn: None,
            transport: None,
            rotational: false,
            rotational_from: nasforge_setup::disks::RotationalSource::Sysfs,
            removable: false,
            controller: None,
            usb_mbit: None,
            by_id: None,
            partitions: vec![],
            contents: vec![],
            in_use: vec![],
        })
        .collect();
    let inventory = nasforge_setup::disks::Inventory {
        disks,
        network: None,
    };
    let plan = planner::plan(recipe.storage.as_ref().unwrap(), &[], &inventory).unwrap();
    let context = Context {
        hostname: "testnas".into(),
        fs_uuids: vec!["5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3".into()],
    };
    (plan, context)
}

/// Runs a step's actions for real, except udevadm where this host has no
/// udev (a container): settle has nothing to wait for there.
fn apply_step(step: &steps::Step, runner: &mut SystemRunner) {
    for action in step.actions.iter().chain(&step.always) {
        if let Action::Run(cmd) = action
            && !installed(&cmd.argv[0])
        {
            println!(
                "not run, {} is not installed on this host: {cmd}",
                cmd.argv[0]
            );
            continue;
        }
        runner
            .apply(action)
            .unwrap_or_else(|e| panic!("{}: {e}", step.id));
    }
}

#[test]
fn gpt_partition_and_mkfs_for_each_filesystem() {
    for fs in ["ext4", "xfs", "btrfs"] {
        let Some(disk) = Loop::new(320 * MIB) else {
            return;
        };
        let (plan, context) = plan_on(disk.path(), "single", fs, 1);
        let steps = steps::generate(&plan, &context);
        let mut runner = SystemRunner::new(Host::new("/"), None).unwrap();
        runner.echo = false;
        apply_step(
            steps
                .iter()
                .find(|s| s.id.starts_with("partition:"))
                .unwrap(),
            &mut runner,
        );

        let verify = run("sgdisk", &["-v", disk.path()]);
        assert!(
            verify.contains("No problems found"),
            "{fs}: sgdisk -v: {verify}"
        );
        let dump = run("sfdisk", &["--dump", disk.path()]);
        assert!(dump.contains("label: gpt"), "{dump}");
        let line = dump
            .lines()
            .find(|l| l.starts_with(&disk.part1()))
            .unwrap_or_else(|| panic!("no partition 1 in {dump}"));
        assert!(
            line.contains("start=        2048")
                && line.contains("type=0FC63DAF-8483-4772-8E79-3D69D8477DE4")
                && line.contains("name=\"nasforge-vol\""),
            "{line}"
        );
        let size: u64 = line
            .split("size=")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(
            size % 2048,
            0,
            "the partition ends on a MiB boundary: {line}"
        );
        let mbr = std::fs::read(&disk.device).unwrap();
        assert_eq!(
            (mbr[446 + 4], &mbr[510..512]),
            (0xee, &[0x55u8, 0xaa][..]),
            "protective MBR"
        );
        assert!(
            Path::new(&disk.part1()).exists(),
            "the kernel re-read the table"
        );
        assert!(partition::is_ours(
            &disk.device,
            512,
            "nasforge-vol",
            PartitionKind::LinuxFilesystem
        ));

        apply_step(
            steps.iter().find(|s| s.id == "mkfs:vol").unwrap(),
            &mut runner,
        );
        let probe = run("blkid", &["-p", "-o", "export", &disk.part1()]);
        assert!(probe.contains(&format!("TYPE={fs}\n")), "{fs}: {probe}");
        assert!(
            probe.contains("UUID=5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3\n"),
            "mkfs used the planned UUID: {probe}"
        );
        assert!(probe.contains("LABEL=vol\n"), "{probe}");

        // The mkfs step's guard now sees its own filesystem.
        let host = Host::new("/");
        let mkfs = steps.iter().find(|s| s.id == "mkfs:vol").unwrap();
        assert!(
            matches!(mkfs.check(&host), steps::Check::Done(_)),
            "{fs}: {:?}",
            mkfs.check(&host)
        );
    }
}

#[test]
fn mkfs_gets_the_stripe_geometry_of_the_array() {
    // xfs wants a 64 MiB log once the stripe unit is set: a roomier disk.
    let Some(disk) = Loop::new(2048 * MIB) else {
        return;
    };
    // raid5 over 4 disks: 3 data disks, 512 KiB chunks.
    let (plan, context) = plan_on(disk.path(), "raid5", "ext4", 4);
    let argv = steps::mkfs(&plan.arrays[0], &context.fs_uuids[0], disk.path());
    run(
        &argv[0],
        &argv[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let header = run("dumpe2fs", &["-h", disk.path()]);
    assert!(header.contains("RAID stride:              128"), "{header}");
    assert!(header.contains("RAID stripe width:        384"), "{header}");

    let (plan, context) = plan_on(disk.path(), "raid6", "xfs", 4);
    let argv = steps::mkfs(&plan.arrays[0], &context.fs_uuids[0], disk.path());
    let out = run(
        &argv[0],
        &argv[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    );
    // 512 KiB stripe unit = 128 blocks of 4 KiB; 2 data disks.
    assert!(
        out.contains("sunit=128") && out.contains("swidth=256 blks"),
        "{out}"
    );
}

/// A writable copy of the Pi 5 fixture whose `sdb` device node is `disk`.
fn pi5_with_sdb_on(disk: &Loop) -> common::Board {
    let board = common::writable_copy("pi5-jmb585");
    std::fs::remove_file(board.node("sdb")).unwrap();
    std::os::unix::fs::symlink(&disk.device, board.node("sdb")).unwrap();
    board
}

const RAID5_ALL_SATA: &str = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = { transport = \"sata\" }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n";

#[test]
fn unattended_setup_refuses_a_disk_with_data_and_leaves_it_byte_identical() {
    let Some(disk) = Loop::new(64 * MIB) else {
        return;
    };
    run("mkfs.ext4", &["-q", "-L", "photos", disk.path()]);
    let before = disk.sha256();
    let board = pi5_with_sdb_on(&disk);
    let root = board.host.root.clone();
    let recipe = root.join("recipe.toml");
    std::fs::write(&recipe, RAID5_ALL_SATA).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .arg("--unattended")
        .arg("--root")
        .arg(&root)
        .arg("--recipe")
        .arg(&recipe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("array 'data': sdb: holds an ext4 filesystem labelled 'photos' and the recipe does not allow erasing it"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("setup complete"));
    assert_eq!(disk.sha256(), before, "the disk is byte-identical");
    // The fixture is a Raspberry Pi OS system: the boot partition is /boot/firmware.
    let status =
        std::fs::read_to_string(root.join("boot/firmware").join("nasforge-status.txt")).unwrap();
    assert!(
        status.contains("Setup: NOT POSSIBLE, nothing was changed")
            && status.contains("sdb: holds an ext4"),
        "{status}"
    );
}

#[test]
fn a_disk_that_gained_data_after_planning_is_refused_at_the_step() {
    let Some(disk) = Loop::new(64 * MIB) else {
        return;
    };
    let board = pi5_with_sdb_on(&disk);
    let host = board.host.clone();
    let root = host.root.clone();
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared =
        nasforge_setup::setup::prepare(&host, Path::new("recipe.toml"), &recipe).unwrap();
    assert!(
        prepared.plan.arrays[0]
            .members
            .iter()
            .any(|m| m.disk.name == "sdb" && !m.erase),
        "planned while blank"
    );

    // Between planning and running, someone puts a filesystem on sdb.
    run("mkfs.ext4", &["-q", "-L", "late", disk.path()]);
    let before = disk.sha256();
    let journal_path = root.join("journal.json");
    let mut journal = Journal::new(recipe, prepared.context, prepared.plan, prepared.steps);
    let index = journal
        .steps
        .iter()
        .position(|s| s.id == "partition:sdb")
        .unwrap();
    journal.done = journal.steps[..index]
        .iter()
        .map(|s| nasforge_setup::journal::StepRecord {
            id: s.id.clone(),
            already_done: None,
            at: 0,
        })
        .collect();
    let mut runner = SystemRunner::new(host.clone(), None).unwrap();
    runner.echo = false;
    let err = executor::execute(&mut journal, &journal_path, &host, &mut runner, &mut |_| {})
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("partition:sdb")
            && text.contains("now holds an ext4 filesystem labelled 'late'"),
        "{text}"
    );
    assert_eq!(disk.sha256(), before, "nothing was written to sdb");
    let saved = Journal::load(&journal_path).unwrap().unwrap();
    assert_eq!(
        (saved.next_step(), saved.failure.unwrap().step),
        (index, "partition:sdb".to_string())
    );
}
