//! What the host kernel can do for real: GPT partitioning and mkfs on loop
//! devices, checked with sgdisk, sfdisk and blkid; and disks with data left
//! byte-identical, whatever made the data (f2fs, jfs, reiserfs, nilfs2, udf,
//! bcache, fake-RAID metadata, bytes no probe knows). md RAID, mounts and shares are proved in the emulated
//! board, not here (this kernel has no md driver).

use nasforge_testkit::board as common;

use nasforge_engine::executor;
use nasforge_engine::journal::Journal;
use nasforge_engine::machine::disks::{Disk, Host, Partition};
use nasforge_engine::machine::signature::{self, Signature};
use nasforge_engine::planner;
use nasforge_engine::runner::{RecordingRunner, Runner, SystemRunner};
use nasforge_engine::setup::Prepared;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{self, Action, Context};
use nasforge_engine::storage::partition::{self, PartitionKind};
use nasforge_setup::wizard::{choices, facts};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

/// Loop devices need root: the tests that use them are `#[ignore]`d, so a
/// run without root reports them skipped; scripts/test includes them when
/// it runs as root, as CI does. Run anyway without root, they fail saying
/// why instead of passing untested.
const NEEDS_ROOT: &str = "needs root for loop devices: scripts/test runs it as root, as CI does";

/// A loop device over a sparse file, detached on drop.
struct Loop {
    device: PathBuf,
    _backing: tempfile::TempDir,
}

impl Loop {
    fn new(size: u64) -> Loop {
        assert!(unsafe { libc::geteuid() } == 0, "{NEEDS_ROOT}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk.img");
        std::fs::File::create(&file).unwrap().set_len(size).unwrap();
        // -P: partition scanning, so BLKRRPART works and p1 appears.
        let out = Command::new("losetup")
            .args(["-f", "--show", "-P"])
            .arg(&file)
            .output()
            .expect("losetup (util-linux)");
        assert!(
            out.status.success(),
            "no loop device: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Loop {
            device: PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()),
            _backing: dir,
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
    let name = device.trim_start_matches("/dev/").to_string();
    let disks = (0..count)
        .map(|i| {
            loop_disk(&if i == 0 {
                name.clone()
            } else {
                format!("{name}x{i}")
            })
        })
        .collect();
    plan_over(level, fs, count, false, disks)
}

/// A blank 320 MiB disk as discovery describes a loop device.
fn loop_disk(name: &str) -> Disk {
    Disk {
        name: name.to_string(),
        major: 7,
        minor: 0,
        size: nasforge_engine::size::Size(320 * MIB),
        logical_block_size: 512,
        physical_block_size: None,
        model: None,
        serial: None,
        wwn: None,
        transport: None,
        rotational: false,
        rotational_from: nasforge_engine::machine::disks::RotationalSource::Sysfs,
        removable: false,
        controller: None,
        usb_mbit: None,
        usb: None,
        by_id: None,
        links: Vec::new(),
        partitions: vec![],
        contents: vec![],
        in_use: vec![],
    }
}

fn plan_over(
    level: &str,
    fs: &str,
    count: usize,
    wipe: bool,
    disks: Vec<Disk>,
) -> (planner::Plan, Context) {
    let recipe = format!(
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"vol\"\nlevel = \"{level}\"\ndisks = {{ count = {count} }}\nfilesystem = \"{fs}\"\nmount = \"/srv/vol\"\nwipe = {wipe}\n"
    );
    let recipe = DeviceRecipe::parse(&recipe, Path::new("test.toml")).unwrap();
    let inventory = nasforge_engine::machine::disks::Inventory {
        disks,
        network: None,
        arrays: vec![],
        zfs: Default::default(),
        failing: Default::default(),
        existing: Vec::new(),
        existing_pools: Vec::new(),
    };
    let plan = planner::plan(recipe.storage.as_ref().unwrap(), &[], &inventory).unwrap();
    let context = Context {
        hostname: "testnas".into(),
        system_uuid: None,
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

fn quiet_runner(host: Host) -> SystemRunner {
    let mut runner = SystemRunner::new(host, None).unwrap();
    runner.echo = false;
    runner
}

fn prepare(host: &Host, recipe: &DeviceRecipe) -> Prepared {
    nasforge_engine::setup::prepare(
        host,
        Path::new("recipe.toml"),
        recipe,
        &mut RecordingRunner::default(),
        &mut |_| {},
    )
    .unwrap()
}

/// Runs the prepared steps on `host` as a run that stopped before
/// `partition:sdb` resumes, expecting it to fail: that step's index and the
/// error.
fn resume_at_partition_sdb(
    recipe: DeviceRecipe,
    prepared: Prepared,
    journal_path: &Path,
    host: &Host,
) -> (usize, String) {
    let mut journal = Journal::new(recipe, prepared.context, prepared.plan, prepared.steps);
    let index = journal
        .steps
        .iter()
        .position(|s| s.id == "partition:sdb")
        .unwrap();
    journal.done = common::done_before(&journal.steps, index);
    let mut runner = quiet_runner(host.clone());
    let err =
        executor::execute(&mut journal, journal_path, host, &mut runner, &mut |_| {}).unwrap_err();
    (index, err.to_string())
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn gpt_partition_and_mkfs_for_each_filesystem() {
    for fs in ["ext4", "xfs", "btrfs"] {
        let disk = Loop::new(320 * MIB);
        let (plan, context) = plan_on(disk.path(), "single", fs, 1);
        let steps = steps::generate(&plan, &context);
        let mut runner = quiet_runner(Host::new("/"));
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
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn mkfs_gets_the_stripe_geometry_of_the_array() {
    // xfs wants a 64 MiB log once the stripe unit is set: a roomier disk.
    let disk = Loop::new(2048 * MIB);
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

fn sdb_as_the_wizard_sees_it(board: &common::Board) -> Disk {
    let facts = facts::gather(&board.host, &mut RecordingRunner::default()).unwrap();
    facts
        .inventory
        .disks
        .into_iter()
        .find(|d| d.name == "sdb")
        .unwrap()
}

const RAID5_ALL_SATA: &str = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = { transport = \"sata\" }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n";

/// `nasforge-setup --unattended` on `board` with the RAID5_ALL_SATA recipe.
fn unattended(board: &common::Board) -> std::process::Output {
    let root = &board.host.root;
    let recipe = root.join("recipe.toml");
    std::fs::write(&recipe, RAID5_ALL_SATA).unwrap();
    Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .arg("--unattended")
        .arg("--root")
        .arg(root)
        .arg("--recipe")
        .arg(&recipe)
        .output()
        .unwrap()
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn unattended_setup_refuses_a_disk_with_data_and_leaves_it_byte_identical() {
    let disk = Loop::new(64 * MIB);
    run("mkfs.ext4", &["-q", "-L", "photos", disk.path()]);
    let before = disk.sha256();
    let board = pi5_with_sdb_on(&disk);
    let root = board.host.root.clone();

    let out = unattended(&board);
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
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_disk_that_gained_data_after_planning_is_refused_at_the_step() {
    let disk = Loop::new(64 * MIB);
    let board = pi5_with_sdb_on(&disk);
    let host = board.host.clone();
    let root = host.root.clone();
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared = prepare(&host, &recipe);
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
    let (index, text) = resume_at_partition_sdb(recipe, prepared, &journal_path, &host);
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

/// A case's fixture is made by `program`: missing, the case fails naming
/// it rather than passing untested (scripts/setup installs it).
fn require_tool(program: &str) {
    assert!(
        installed(program),
        "{program} is not installed: run scripts/setup"
    );
}

fn write_at(disk: &Loop, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&disk.device)
        .unwrap();
    file.write_all_at(bytes, offset).unwrap();
    file.sync_all().unwrap();
}

fn device_size(disk: &Loop) -> u64 {
    signature::device_size(&std::fs::File::open(&disk.device).unwrap()).unwrap()
}

/// An Intel RST (IMSM) member's metadata anchor where libblkid's isw_raid
/// probe reads it: the MPB header in the second-to-last sector, its
/// signature followed by the format version. mdadm cannot write one on this
/// host (it opens an md device first, and the kernel has no md driver).
/// blkid checks no checksum, so none is made up.
fn write_imsm(disk: &Loop) {
    let mut mpb = [0u8; 512];
    mpb[..30].copy_from_slice(b"Intel Raid ISM Cfg Sig. 1.0.00");
    mpb[36..40].copy_from_slice(&512u32.to_le_bytes()); // mpb_size
    mpb[40..44].copy_from_slice(&0x6e61_7366u32.to_le_bytes()); // family_num
    mpb[44..48].copy_from_slice(&1u32.to_le_bytes()); // generation_num
    write_at(disk, device_size(disk) - 1024, &mpb);
}

/// A SNIA DDF member's headers as libblkid's ddf_raid probe reads them
/// (big-endian, as the standard has it): the anchor in the last sector,
/// pointing at the primary header a MiB before it. Reserved bytes are 0xff;
/// blkid checks no CRC, so none is made up.
fn write_ddf(disk: &Loop) {
    let size = device_size(disk);
    let primary_lba = (size - MIB) / 512;
    let header = |kind: u8| {
        let mut h = [0xffu8; 512];
        h[0..4].copy_from_slice(&0xde11_de11u32.to_be_bytes());
        h[8..32].copy_from_slice(b"nasforge-test-ddf-member"); // guid
        h[32..40].copy_from_slice(b"01.02.00"); // revision
        h[40..44].copy_from_slice(&1u32.to_be_bytes()); // sequence
        h[44..48].copy_from_slice(&0u32.to_be_bytes()); // timestamp
        h[48..51].copy_from_slice(&[0, 0, 0]); // open, foreign, enforce-groups flags
        h[96..104].copy_from_slice(&primary_lba.to_be_bytes());
        h[112] = kind;
        h
    };
    write_at(disk, primary_lba * 512, &header(0x01));
    write_at(disk, size - 512, &header(0x00));
}

/// Bytes with no signature in them, inside the last MiB but not at its
/// edges: what is left when a tool nasforge has never heard of was there.
fn write_noise_near_the_end(disk: &Loop) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            // xorshift64: fixed, so every run writes the same bytes.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8 | 1
        })
        .collect();
    write_at(disk, device_size(disk) - 700 * 1024, &noise);
}

/// Contents of a whole disk that the probe in signature.rs does not know:
/// util-linux's probe names them, or (the last) nothing does.
struct Hidden {
    /// The program that makes it; None for those written by this file.
    tool: Option<&'static str>,
    /// The loop device's size: nilfs2 wants at least 128 MiB and a page.
    mib: u64,
    make: fn(&Loop),
    /// What `blkid -p` reports as its TYPE; None: nothing (exit status 2).
    blkid_type: Option<&'static str>,
    /// How setup and the wizard describe it.
    described: &'static str,
}

const HIDDEN: &[Hidden] = &[
    Hidden {
        tool: Some("mkfs.f2fs"),
        mib: 64,
        make: |d| drop(run("mkfs.f2fs", &["-q", "-l", "keep", d.path()])),
        blkid_type: Some("f2fs"),
        described: "an f2fs filesystem labelled 'keep'",
    },
    Hidden {
        tool: Some("mkfs.jfs"),
        mib: 64,
        make: |d| drop(run("mkfs.jfs", &["-q", "-L", "keep", d.path()])),
        blkid_type: Some("jfs"),
        described: "a jfs filesystem labelled 'keep'",
    },
    Hidden {
        tool: Some("mkfs.reiserfs"),
        mib: 64,
        make: |d| drop(run("mkfs.reiserfs", &["-q", "-f", "-l", "keep", d.path()])),
        blkid_type: Some("reiserfs"),
        described: "a reiserfs filesystem labelled 'keep'",
    },
    Hidden {
        tool: Some("mkfs.nilfs2"),
        mib: 160,
        make: |d| drop(run("mkfs.nilfs2", &["-q", "-L", "keep", d.path()])),
        blkid_type: Some("nilfs2"),
        described: "a nilfs2 filesystem labelled 'keep'",
    },
    Hidden {
        tool: Some("mkudffs"),
        mib: 64,
        make: |d| drop(run("mkudffs", &["--label=keep", d.path()])),
        blkid_type: Some("udf"),
        described: "a udf filesystem labelled 'keep'",
    },
    Hidden {
        tool: Some("make-bcache"),
        mib: 64,
        make: |d| drop(run("make-bcache", &["-B", d.path()])),
        blkid_type: Some("bcache"),
        described: "a bcache device",
    },
    Hidden {
        tool: None,
        mib: 64,
        make: write_imsm,
        blkid_type: Some("isw_raid_member"),
        described: "an Intel RST (IMSM) fake-RAID member (isw_raid_member)",
    },
    Hidden {
        tool: None,
        mib: 64,
        make: write_ddf,
        blkid_type: Some("ddf_raid_member"),
        described: "a DDF fake-RAID member (ddf_raid_member)",
    },
    Hidden {
        tool: None,
        mib: 64,
        make: write_noise_near_the_end,
        blkid_type: None,
        described: "data no probe recognises in its last MiB",
    },
];

/// What the real `blkid -p` makes of `disk`: its TYPE, or None when it
/// finds nothing.
fn blkid_type(disk: &Loop) -> Option<String> {
    let out = Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE"])
        .arg(&disk.device)
        .output()
        .unwrap();
    match out.status.code() {
        Some(0) => Some(String::from_utf8(out.stdout).unwrap().trim().to_string()),
        Some(2) => None,
        other => panic!(
            "blkid -p {}: {other:?} {}",
            disk.path(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn whole_disks_only_util_linux_or_no_probe_names_are_refused_without_wipe_and_left_byte_identical()
{
    for case in HIDDEN {
        if let Some(tool) = case.tool {
            require_tool(tool);
        }
        let disk = Loop::new(case.mib * MIB);
        (case.make)(&disk);
        assert_eq!(
            blkid_type(&disk).as_deref(),
            case.blkid_type,
            "the fixture is what util-linux itself reads: {}",
            case.described
        );
        assert!(
            signature::read(&disk.device, 0, None).unwrap().is_empty()
                || case.blkid_type == Some("udf"),
            "{}: the probe in signature.rs alone would call it blank",
            case.described
        );
        let before = disk.sha256();
        let board = pi5_with_sdb_on(&disk);

        let sdb = sdb_as_the_wizard_sees_it(&board);
        assert!(
            !sdb.is_blank() && sdb.describe_contents().contains(case.described),
            "the wizard sees {}: {:?}",
            case.described,
            sdb.contents
        );
        assert_ne!(choices::holds(&sdb), "empty", "{}", case.described);

        let out = unattended(&board);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && stderr.contains("array 'data': sdb: holds ")
                && stderr.contains(&format!(
                    "{} and the recipe does not allow erasing it",
                    case.described
                )),
            "{stderr}"
        );
        assert_eq!(disk.sha256(), before, "{}: byte-identical", case.described);

        // With wipe = true the wipe step clears all that the gate saw, so
        // the partition step after it finds the disk blank.
        let name = disk.path().trim_start_matches("/dev/").to_string();
        let mut found = loop_disk(&name);
        found.contents = signature::whole_disk(&disk.device, vec![]).unwrap();
        let (plan, context) = plan_over("single", "ext4", 1, true, vec![found]);
        assert!(plan.arrays[0].members[0].erase, "{}", case.described);
        let steps = steps::generate(&plan, &context);
        let mut runner = quiet_runner(Host::new("/"));
        apply_step(
            steps.iter().find(|s| s.id.starts_with("wipe:")).unwrap(),
            &mut runner,
        );
        assert_eq!(
            signature::whole_disk(&disk.device, vec![]).unwrap(),
            [],
            "{}: wiped",
            case.described
        );
    }
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_fully_zeroed_disk_is_still_blank() {
    let disk = Loop::new(64 * MIB);
    // Written, not only sparse: zeros a disk really holds.
    let zeros = vec![0u8; MIB as usize];
    write_at(&disk, 0, &zeros);
    write_at(&disk, device_size(&disk) - MIB, &zeros);
    assert_eq!(blkid_type(&disk), None);
    assert_eq!(signature::whole_disk(&disk.device, vec![]).unwrap(), []);

    let board = pi5_with_sdb_on(&disk);
    let sdb = sdb_as_the_wizard_sees_it(&board);
    assert!(sdb.is_blank(), "{:?}", sdb.contents);
    assert_eq!(choices::holds(&sdb), "empty");
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared = prepare(&board.host, &recipe);
    assert!(
        prepared.plan.arrays[0]
            .members
            .iter()
            .any(|m| m.disk.name == "sdb" && !m.erase),
        "used without wipe = true"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_disk_that_gained_a_fake_raid_label_after_planning_is_refused_at_the_step() {
    let disk = Loop::new(64 * MIB);
    let board = pi5_with_sdb_on(&disk);
    let host = board.host.clone();
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared = prepare(&host, &recipe);

    // Between planning and running, the disk turns out to be an Intel RST
    // member (a BIOS RAID set up on it): only util-linux's probe names it.
    write_imsm(&disk);
    assert_eq!(blkid_type(&disk).as_deref(), Some("isw_raid_member"));
    let before = disk.sha256();
    let journal_path = host.path(nasforge_engine::journal::PATH);
    let (_, text) = resume_at_partition_sdb(recipe, prepared, &journal_path, &host);
    assert!(
        text.contains("partition:sdb")
            && text.contains("now holds an Intel RST (IMSM) fake-RAID member"),
        "{text}"
    );
    assert_eq!(disk.sha256(), before, "nothing was written to sdb");
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_wipe_cut_after_the_whole_disk_wipefs_resumes_after_a_reboot() {
    let disk = Loop::new(64 * MIB);
    run("sgdisk", &["-n1:1M:+16M", "-n2:0:+16M", disk.path()]);
    run("partx", &["-u", disk.path()]);
    run("mkfs.ext4", &["-q", "-L", "old", &disk.part1()]);
    let name = disk.path().trim_start_matches("/dev/").to_string();
    let mut planned = loop_disk(&name);
    planned.contents = vec![Signature::PartitionTable {
        scheme: "gpt".into(),
    }];
    planned.partitions = (1..=2)
        .map(|number| Partition {
            name: format!("{name}p{number}"),
            number,
            start: MIB + (number as u64 - 1) * 16 * MIB,
            size: nasforge_engine::size::Size(16 * MIB),
            contents: vec![],
        })
        .collect();
    let (plan, context) = plan_over("single", "ext4", 1, true, vec![planned]);
    let steps = steps::generate(&plan, &context);
    let wipe = steps.iter().find(|s| s.id.starts_with("wipe:")).unwrap();
    let mut runner = quiet_runner(Host::new("/"));

    // The power goes right after `wipefs --all --force <disk>` ...
    let whole = wipe
        .actions
        .iter()
        .position(|a| a.to_string() == format!("wipefs --all --force {}", disk.path()))
        .unwrap();
    for action in &wipe.actions[..=whole] {
        runner.apply(action).unwrap();
    }
    // ... and the next boot finds no partition table, so no partitions.
    run("partx", &["-d", disk.path()]);
    assert!(!Path::new(&disk.part1()).exists());

    // The journal re-runs the whole step.
    apply_step(wipe, &mut runner);
    assert_eq!(
        signature::read(&disk.device, 0, None).unwrap(),
        [],
        "nothing left on the disk"
    );
    let bytes = std::fs::read(&disk.device).unwrap();
    assert!(
        bytes[..MIB as usize].iter().all(|&b| b == 0)
            && bytes[bytes.len() - MIB as usize..].iter().all(|&b| b == 0),
        "both ends zeroed"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_wipe_cut_before_the_ends_are_zeroed_runs_again_despite_the_bytes_left() {
    let disk = Loop::new(64 * MIB);
    run("mkfs.ext4", &["-q", "-L", "old", disk.path()]);
    let board = pi5_with_sdb_on(&disk);
    let recipe = DeviceRecipe::parse(
        &format!("{RAID5_ALL_SATA}wipe = true\n"),
        Path::new("recipe.toml"),
    )
    .unwrap();
    let prepared = prepare(&board.host, &recipe);
    let wipe = prepared.steps.iter().find(|s| s.id == "wipe:sdb").unwrap();
    assert_eq!(wipe.check(&board.host), steps::Check::Pending);

    // The power goes after wipefs cleared the magic, before ZeroEnds: the
    // rest of the old superblock is bytes no probe recognises.
    run("wipefs", &["--all", "--force", disk.path()]);
    assert_eq!(
        signature::whole_disk(&disk.device, vec![]).unwrap(),
        [Signature::Unrecognised {
            first_mib: true,
            last_mib: false
        }]
    );
    assert_eq!(
        wipe.check(&board.host),
        steps::Check::Pending,
        "what is left of the planned erase is erased"
    );
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn a_partition_step_cut_after_the_table_runs_again_and_wipes_the_partition() {
    let disk = Loop::new(64 * MIB);
    // The guard, on the Pi 5 fixture whose sdb is this loop device.
    let board = pi5_with_sdb_on(&disk);
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared = prepare(&board.host, &recipe);
    let step = prepared
        .steps
        .iter()
        .find(|s| s.id == "partition:sdb")
        .unwrap();
    let mut on_board = quiet_runner(board.host.clone());
    on_board.apply(&step.actions[0]).unwrap(); // WriteGpt, then the power goes
    assert_eq!(step.check(&board.host), steps::Check::Pending);

    // Re-running the step on the real device: an old filesystem inside the
    // new partition's range (what the skipped wipefs was for) is gone.
    let (plan, context) = plan_on(disk.path(), "single", "ext4", 1);
    let steps = steps::generate(&plan, &context);
    let partition_step = steps
        .iter()
        .find(|s| s.id.starts_with("partition:"))
        .unwrap();
    let mut runner = quiet_runner(Host::new("/"));
    runner.apply(&partition_step.actions[0]).unwrap();
    run("partx", &["-u", disk.path()]);
    run("mkfs.ext4", &["-q", "-L", "ghost", &disk.part1()]);
    apply_step(partition_step, &mut runner);
    assert_eq!(
        signature::read(Path::new(&disk.part1()), 0, None).unwrap(),
        [],
        "the partition was wiped"
    );
    assert!(run("sgdisk", &["-v", disk.path()]).contains("No problems found"));
    assert!(partition::is_ours(
        &disk.device,
        512,
        "nasforge-vol",
        PartitionKind::LinuxFilesystem
    ));
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn an_old_array_under_the_planned_name_is_never_formatted() {
    // The old array's device: an ext4 "photos" with data on it.
    let old = Loop::new(64 * MIB);
    run("mkfs.ext4", &["-q", "-L", "photos", old.path()]);
    let before = old.sha256();
    let board = common::writable_copy("pi5-jmb585");
    let host = board.host.clone();
    let recipe = DeviceRecipe::parse(RAID5_ALL_SATA, Path::new("recipe.toml")).unwrap();
    let prepared = prepare(&host, &recipe);
    // After planning, the old disks come up and assemble as /dev/md/data.
    let md = host.path("/sys/block/md127/md/dev-sde1");
    std::fs::create_dir_all(&md).unwrap();
    std::os::unix::fs::symlink("../../../../../sde/sde1", md.join("block")).unwrap();
    std::os::unix::fs::symlink(&old.device, board.node("md127")).unwrap();
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink("../md127", board.node("md/data")).unwrap();

    let journal_path = host.path(nasforge_engine::journal::PATH);
    let mut journal = Journal::new(recipe, prepared.context, prepared.plan, prepared.steps);
    let mut runner = quiet_runner(host.clone());
    for from in ["create-array:data", "mkfs:data"] {
        // From the create step, and as if an older nasforge had found it done.
        let index = journal.steps.iter().position(|s| s.id == from).unwrap();
        journal.done = common::done_before(&journal.steps, index);
        let err = executor::execute(&mut journal, &journal_path, &host, &mut runner, &mut |_| {})
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("({from}) refused: /dev/md/data")),
            "{err}"
        );
        assert_eq!(old.sha256(), before, "the old array is byte-identical");
    }
}

#[test]
#[ignore = "needs root for loop devices: scripts/test runs it as root, as CI does"]
fn without_root_a_loop_device_test_is_skipped_or_fails_saying_why() {
    // Root is needed to drop to another user; this is also how CI runs.
    assert!(unsafe { libc::geteuid() } == 0, "{NEEDS_ROOT}");
    // The test binary as `nobody`, from a directory nobody can reach.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("loop_devices");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    // Another test thread forking while the copy was open for writing can
    // hold that descriptor until its child execs, and setpriv's exec then
    // fails with ETXTBSY: that is the copy still being busy, so try again.
    let as_nobody = |ignored: &[&str]| {
        let mut tries = 0;
        loop {
            let out = Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&exe)
                .args(["gpt_partition_and_mkfs_for_each_filesystem", "--exact"])
                .args(ignored)
                .output()
                .unwrap();
            tries += 1;
            if tries == 10 || !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
                break out;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    let out = as_nobody(&["--ignored"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success() && text.contains(NEEDS_ROOT), "{text}");
    let out = as_nobody(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 ignored") && text.contains("0 passed"),
        "{text}"
    );
}
