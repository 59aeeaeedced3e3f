//! Adopting an md array another machine made (`import = true`), on the CM4
//! fixture whose sdd carries a member of 'oldnas:data' (udev's record of a
//! real member), with mdadm's `--examine --export` answering as super1.c
//! prints it: the array found and listed, planned as it is with nothing
//! erased, partitioned or formatted, its steps assembling it read-only
//! first; and each way a recipe can mean something else refused before
//! anything is written. Then a ZFS pool, on a Pi 5 fixture whose sdb and
//! sdc carry ZFS labels, with `zpool import` listing it as zpool 2.x's
//! `show_import` prints a pool last used by another system.

use nasforge_testkit::board as common;
use nasforge_testkit::old_nas::{OLDTANK_LISTING, labelled};

use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::setup::{self, Prepared, SetupError};
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;

/// super1.c `export_examine_super1`'s lines for sdd: a raid1 of two made
/// on 'oldnas', its other member not in this machine.
const SDD: &str = "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_NAME=oldnas:data\nMD_ARRAY_SIZE=4.00 TB\nMD_UUID=5c1a7e42:0b9d3f61:8e2a4c75:19d6b803\nMD_UPDATE_TIME=1796380000\nMD_DEV_UUID=77e0c2d1:4a5b6c7d:8e9f0a1b:2c3d4e5f\nMD_EVENTS=4127\n";

/// Where the array is assembled read-only to be looked into.
const PROBE: &str = "/dev/md/nasforge-probe-5c1a7e42";

/// mdadm reading sdd's superblock, and blkid finding `holds` on the array
/// assembled read-only.
fn mdadm_finding(holds: &str) -> RecordingRunner {
    RecordingRunner::answering(vec![
        ("mdadm --examine --export /dev/sdd".into(), SDD.into()),
        (format!("blkid -p -o value -s TYPE {PROBE}"), holds.into()),
    ])
}

fn mdadm() -> RecordingRunner {
    mdadm_finding("ext4\n")
}

fn recipe(arrays: &str) -> DeviceRecipe {
    DeviceRecipe::parse(
        &format!("[storage]\nmode = \"unattended\"\n{arrays}"),
        Path::new("nasforge.toml"),
    )
    .unwrap()
}

const ADOPT: &str = r#"[[storage.arrays]]
name = "data"
import = true
level = "raid1"
filesystem = "ext4"
mount = "/srv/data"
"#;

fn prepare(arrays: &str) -> (Result<Prepared, SetupError>, Vec<String>) {
    let board = common::board("cm4-marvell9215");
    let mut notes = Vec::new();
    let prepared = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(arrays),
        &mut mdadm(),
        &mut |n| notes.push(n.to_string()),
    );
    (prepared, notes)
}

fn refusals(arrays: &str) -> Vec<String> {
    match prepare(arrays).0 {
        Err(SetupError::Refused(r)) => r.iter().map(ToString::to_string).collect(),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("planned"),
    }
}

#[test]
fn an_old_raid1_is_adopted_as_it_is_and_a_new_array_takes_only_the_other_disks() {
    // The new array first in the recipe: the adoption still runs before
    // anything is written, and its disk is still not the new array's.
    let (prepared, notes) = prepare(&format!(
        "[[storage.arrays]]\nname = \"new\"\nlevel = \"raid1\"\ndisks = {{ transport = \"sata\", count = 2 }}\nfilesystem = \"ext4\"\nmount = \"/srv/new\"\n{ADOPT}"
    ));
    let prepared = prepared.unwrap();
    assert!(
        notes.iter().any(|n| n
            == "  raid1 'oldnas:data' (UUID 5c1a7e42:0b9d3f61:8e2a4c75:19d6b803), 1 of 2 members: sdd; 4.00 TB; holds ext4"),
        "{notes:?}"
    );
    let adopted = &prepared.plan.arrays[1];
    let imported = adopted.imported.as_ref().unwrap();
    assert_eq!(imported.devices, ["sdd"]);
    assert!(imported.degraded);
    assert_eq!(adopted.tolerance.guaranteed, 0);
    assert!(
        adopted
            .warnings
            .iter()
            .any(|w| w.contains("1 of its 2 members is not here: it runs degraded")),
        "{:?}",
        adopted.warnings
    );
    let new: Vec<&str> = prepared.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert!(!new.contains(&"sdd"), "{new:?}");
    let described = prepared.plan.describe();
    assert!(
        described.contains("Array 'data': the raid1 array 'oldnas:data' (UUID 5c1a7e42:0b9d3f61:8e2a4c75:19d6b803) adopted as it is, 1 of 2 member(s) here, as /dev/md/data, its ext4 filesystem mounted at /srv/data; nothing on it is erased"),
        "{described}"
    );

    let ids: Vec<&str> = prepared.steps.iter().map(|s| s.id.as_str()).collect();
    for never in [
        "wipe:sdd",
        "partition:sdd",
        "mkfs:data",
        "create-array:data",
    ] {
        assert!(!ids.contains(&never), "{never} in {ids:?}");
    }
    let adopt = prepared
        .steps
        .iter()
        .position(|s| s.id == "adopt-array:data")
        .unwrap();
    let first_write = ids
        .iter()
        .position(|id| id.starts_with("wipe:") || id.starts_with("partition:"))
        .unwrap();
    assert!(adopt < first_write, "{ids:?}");
    let mut dry = RecordingRunner::default();
    for a in &prepared.steps[adopt].actions {
        nasforge_engine::runner::Runner::apply(&mut dry, a).unwrap();
    }
    let shown = dry.lines.join("\n");
    assert!(
        shown.contains("mdadm --assemble /dev/md/data --readonly --uuid=5c1a7e42:0b9d3f61:8e2a4c75:19d6b803 --run /dev/disk/by-id/ata-KINGSTON_SA400S37240G_50026B7784A1B2C3\nblkid -p -o value -s TYPE /dev/md/data  # must say ext4")
            && shown.contains("mdadm --readwrite /dev/md/data")
            && !shown.contains("--force")
            && !shown.contains("--update"),
        "{shown}"
    );
    let fstab = prepared.steps.iter().find(|s| s.id == "fstab").unwrap();
    assert!(
        format!("{:?}", fstab.actions)
            .contains("/dev/md/data  /srv/data  ext4  defaults,nofail  0  0"),
        "{:?}",
        fstab.actions
    );
    assert!(
        ids.contains(&"mdadm-conf") && ids.contains(&"mount:data"),
        "{ids:?}"
    );
}

#[test]
fn an_array_that_is_not_what_the_recipe_says_is_refused_naming_what_is_there() {
    let wrong_level = refusals(&ADOPT.replace("raid1", "raid5"));
    assert_eq!(wrong_level.len(), 1, "{wrong_level:?}");
    assert!(
        wrong_level[0].contains("storage.arrays[0].level: the array on the disks is raid1 'oldnas:data' (UUID 5c1a7e42:0b9d3f61:8e2a4c75:19d6b803), 1 of 2 members: sdd; 4.00 TB; holds ext4, not raid5; if it is the one you mean, set level = \"raid1\""),
        "{wrong_level:?}"
    );
    let no_such = refusals(&ADOPT.replace("name = \"data\"", "name = \"media\""));
    assert!(
        no_such[0].contains("no md array called 'media' (or '<host>:media') is on the disks to import; the disks hold: raid1 'oldnas:data'"),
        "{no_such:?}"
    );
    let by_uuid = prepare(&ADOPT.replace(
        "name = \"data\"",
        "name = \"old\"\nuuid = \"5C1A7E42-0B9D-3F61-8E2A-4C7519D6B803\"",
    ))
    .0
    .unwrap();
    assert_eq!(
        by_uuid.plan.arrays[0].imported.as_ref().unwrap().devices,
        ["sdd"]
    );
}

/// What setup plans for `arrays` with `runner` answering, and the
/// commands it asked.
fn prepare_with(
    arrays: &str,
    mut runner: RecordingRunner,
) -> (Result<Prepared, SetupError>, Vec<String>) {
    let board = common::board("cm4-marvell9215");
    let prepared = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(arrays),
        &mut runner,
        &mut |_| {},
    );
    (prepared, runner.lines)
}

fn refused_with(arrays: &str, runner: RecordingRunner) -> String {
    match prepare_with(arrays, runner).0 {
        Err(SetupError::Refused(r)) => r
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("planned"),
    }
}

#[test]
fn the_array_is_looked_into_read_only_and_a_recipe_naming_another_filesystem_is_refused() {
    let (prepared, ran) = prepare_with(ADOPT, mdadm());
    prepared.unwrap();
    let looked: Vec<&str> = ran
        .iter()
        .map(String::as_str)
        .filter(|c| c.starts_with("mdadm") || c.starts_with("blkid"))
        .filter(|c| !c.starts_with("mdadm --examine"))
        .collect();
    assert_eq!(
        looked,
        [
            "mdadm --assemble /dev/md/nasforge-probe-5c1a7e42 --readonly --uuid=5c1a7e42:0b9d3f61:8e2a4c75:19d6b803 --run /dev/sdd",
            "blkid -p -o value -s TYPE /dev/md/nasforge-probe-5c1a7e42",
            "mdadm --stop /dev/md/nasforge-probe-5c1a7e42",
        ],
        "assembled read-only under a name of its own, looked at, stopped; never --readwrite, --update or --force"
    );

    let xfs = refused_with(&ADOPT.replace("\"ext4\"", "\"xfs\""), mdadm());
    assert!(
        xfs.contains("storage.arrays[0].filesystem: the array holds an ext4 filesystem, not xfs; if it is the one you mean, set filesystem = \"ext4\""),
        "{xfs}"
    );
    let lvm = refused_with(ADOPT, mdadm_finding("LVM2_member\n"));
    assert!(
        lvm.contains("the array holds LVM2_member, not a filesystem: nasforge adopts an array with ext4, xfs, btrfs directly on it"),
        "{lvm}"
    );
    let nothing = refused_with(ADOPT, mdadm_finding(""));
    assert!(
        nothing.contains("a read-only look found no filesystem libblkid knows on the array"),
        "{nothing}"
    );

    // mdadm refusing to assemble it: refused in mdadm's words, and nothing
    // is left to stop.
    let mut busy = mdadm();
    busy.failures.push((
        "mdadm --assemble".into(),
        "mdadm: /dev/sdd is busy - skipping\n".into(),
    ));
    let (prepared, ran) = prepare_with(ADOPT, busy);
    let Err(SetupError::Refused(r)) = prepared else {
        panic!("planned")
    };
    let why = r
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        why.contains("it could not be looked into (assembled read-only, nothing written): `mdadm --assemble /dev/md/nasforge-probe-5c1a7e42 --readonly --uuid=5c1a7e42:0b9d3f61:8e2a4c75:19d6b803 --run /dev/sdd` said: mdadm: /dev/sdd is busy - skipping"),
        "{why}"
    );
    assert!(
        !ran.iter()
            .any(|c| c.starts_with("mdadm --stop") || c.starts_with("blkid -p")),
        "{ran:?}"
    );
}

#[test]
fn a_raid5_missing_two_of_three_is_never_forced_to_start() {
    let board = common::board("cm4-marvell9215");
    let mut runner = RecordingRunner::answering(vec![(
        "mdadm --examine --export /dev/sdd".into(),
        SDD.replace("raid1", "raid5")
            .replace("MD_DEVICES=2", "MD_DEVICES=3"),
    )]);
    let err = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(&ADOPT.replace("raid1", "raid5")),
        &mut runner,
        &mut |_| {},
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().contains("cannot be imported: 1 of its 3 members are here (2 missing); raid5 runs with at most 1 missing, and nasforge never forces an array to start"),
        "{err}"
    );
}

#[test]
fn the_recipe_keys_that_say_how_to_build_are_refused_beside_import() {
    let check = |arrays: &str| -> String {
        DeviceRecipe::parse(
            &format!("[storage]\nmode = \"unattended\"\n{arrays}"),
            Path::new("nasforge.toml"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    let with_disks = check(&ADOPT.replace(
        "import = true",
        "import = true\nwipe = true\ndisks = { count = 2 }",
    ));
    assert!(
        with_disks.contains("storage.arrays[0].disks: an imported array is adopted as its disks hold it, so `disks` has nothing to say")
            && with_disks.contains("storage.arrays[0].wipe: an imported array"),
        "{with_disks}"
    );
    let pool_id = check(
        &ADOPT
            .replace("raid1", "mirror")
            .replace("ext4", "zfs")
            .replace(
                "import = true",
                "import = true\nuuid = \"5c1a7e42:0b9d3f61:8e2a4c75:19d6b803\"",
            ),
    );
    assert!(
        pool_id.contains(
            "storage.arrays[0].uuid: `5c1a7e42:0b9d3f61:8e2a4c75:19d6b803` is not a ZFS pool's id"
        ),
        "{pool_id}"
    );
    let kinds = check(&ADOPT.replace("raid1", "raidz1"));
    assert!(
        kinds.contains(
            "storage.arrays[0].filesystem: raidz1 is a ZFS level; set filesystem = \"zfs\""
        ),
        "{kinds}"
    );
    let single = check(&ADOPT.replace("raid1", "single"));
    assert!(
        single.contains("storage.arrays[0].level: import adopts md arrays (raid0, raid1, raid5, raid6, raid10) and ZFS pools (raidz1, raidz2, raidz3, mirror, stripe), not level single"),
        "{single}"
    );
    let uuid = check(&ADOPT.replace("import = true", "import = true\nuuid = \"data\""));
    assert!(uuid.contains("`data` is not an md array UUID"), "{uuid}");
    let no_disks = check(&ADOPT.replace("import = true\n", ""));
    assert!(
        no_disks.contains("storage.arrays[0]: has no `disks`: say which disks make the array"),
        "{no_disks}"
    );
    let uuid_alone = check(&ADOPT.replace(
        "import = true",
        "disks = { count = 2 }\nuuid = \"5c1a7e42:0b9d3f61:8e2a4c75:19d6b803\"",
    ));
    assert!(
        uuid_alone.contains("storage.arrays[0].uuid: uuid names an existing array to adopt, which only import = true does"),
        "{uuid_alone}"
    );
}

/// `/dev/md/media` on a copy of the Pi 5 fixture as md127 over the whole
/// disks `members`, in md's `array_state`, with udev's record of what it
/// holds.
fn running(board: &common::Board, members: &[&str], state: &str, fstype: &str) {
    let md = board.host.path("/sys/block/md127/md");
    for m in members {
        let dev = md.join(format!("dev-{m}"));
        std::fs::create_dir_all(&dev).unwrap();
        std::os::unix::fs::symlink(format!("../../../../{m}"), dev.join("block")).unwrap();
    }
    std::fs::write(md.join("array_state"), format!("{state}\n")).unwrap();
    std::fs::write(board.host.path("/sys/block/md127/dev"), "9:127\n").unwrap();
    std::fs::write(
        board.host.path("/run/udev/data/b9:127"),
        format!("E:ID_FS_TYPE={fstype}\n"),
    )
    .unwrap();
    std::fs::File::create(board.node("md127")).unwrap();
    std::fs::create_dir_all(board.node("md")).unwrap();
    std::os::unix::fs::symlink("../md127", board.node("md/media")).unwrap();
}

#[test]
fn the_adopt_step_is_done_only_when_the_array_runs_writable_with_its_filesystem() {
    use nasforge_engine::steps::{Check, Guard, Step};
    let guard = Step {
        id: "adopt-array:media".into(),
        title: "Adopt".into(),
        guard: Guard::Adopted {
            device: "/dev/md/media".into(),
            members: vec!["/dev/sdb".into(), "/dev/sdc".into()],
            filesystem: "ext4".into(),
        },
        actions: vec![],
        always: vec![],
    };
    let fresh = common::writable_copy("pi5-jmb585");
    assert!(matches!(guard.check(&fresh.host), Check::Pending));

    // A run cut short after the read-only assembly: still to do.
    let cut = common::writable_copy("pi5-jmb585");
    running(&cut, &["sdb", "sdc"], "readonly", "ext4");
    assert!(matches!(guard.check(&cut.host), Check::Pending));

    let done = common::writable_copy("pi5-jmb585");
    running(&done, &["sdb", "sdc"], "clean", "ext4");
    assert!(matches!(guard.check(&done.host), Check::Done(_)));

    let other_fs = common::writable_copy("pi5-jmb585");
    running(&other_fs, &["sdb", "sdc"], "clean", "xfs");
    assert!(matches!(guard.check(&other_fs.host), Check::Pending));

    let other = common::writable_copy("pi5-jmb585");
    running(&other, &["sdd"], "clean", "ext4");
    let Check::Refuse(why) = guard.check(&other.host) else {
        panic!("an array of other disks under the name");
    };
    assert!(
        why.contains("/dev/md/media (md127) is made of sdd"),
        "{why}"
    );
}

/// sdb and sdc of a writable Pi 5 copy labelled as a pool's disks (udev's
/// record), with zpool and zfs installed.
fn old_pool() -> common::Board {
    let board = common::writable_copy("pi5-jmb585");
    common::with_zfs(&board);
    for devnum in ["8:16", "8:32"] {
        labelled(&board, devnum, "zfs_member", "oldtank");
    }
    board
}

const ADOPT_POOL: &str = r#"[[storage.arrays]]
name = "oldtank"
import = true
level = "mirror"
filesystem = "zfs"
mount = "/srv/oldtank"
"#;

fn prepare_pool(
    board: &common::Board,
    arrays: &str,
) -> (Result<Prepared, SetupError>, Vec<String>) {
    let (prepared, notes, _) = prepare_looking_inside(board, arrays, "", "-\n");
    (prepared, notes)
}

/// As [`prepare_pool`], with zfs and zpool answering the read-only look
/// inside the pool with `datasets` (`zfs get`'s lines) and `bootfs`; the
/// commands run are returned too.
fn prepare_looking_inside(
    board: &common::Board,
    arrays: &str,
    datasets: &str,
    bootfs: &str,
) -> (Result<Prepared, SetupError>, Vec<String>, Vec<String>) {
    prepare_listed(board, OLDTANK_LISTING, arrays, datasets, bootfs)
}

/// As [`prepare_looking_inside`], with `zpool import` listing `listing`.
fn prepare_listed(
    board: &common::Board,
    listing: &str,
    arrays: &str,
    datasets: &str,
    bootfs: &str,
) -> (Result<Prepared, SetupError>, Vec<String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut runner = RecordingRunner::answering(vec![
        ("zpool import -d /dev/disk/by-id".into(), listing.into()),
        ("zfs get -H -r -t filesystem".into(), datasets.into()),
        ("zpool get -H -o value bootfs".into(), bootfs.into()),
    ]);
    let prepared = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(arrays),
        &mut runner,
        &mut |n| notes.push(n.to_string()),
    );
    (prepared, notes, runner.lines)
}

/// zfs get's lines for the pool looked at under its probe name: its top
/// at its default mountpoint, and `child` with `mountpoint` (`source`)
/// and `encryption`.
fn looked(child: &str, mountpoint: &str, source: &str, encryption: &str) -> String {
    let probe = "nasforge-probe-5871402329107765531";
    format!(
        "{probe}\tmountpoint\t/oldtank\tdefault\n{probe}\tcanmount\ton\tdefault\n{probe}\tencryption\toff\tdefault\n\
         {probe}/{child}\tmountpoint\t{mountpoint}\t{source}\n{probe}/{child}\tcanmount\ton\tdefault\n{probe}/{child}\tencryption\t{encryption}\t-\n"
    )
}

#[test]
fn a_pool_is_looked_into_read_only_and_a_system_pool_or_a_dataset_mounted_elsewhere_is_refused() {
    let board = old_pool();
    let refused = |datasets: &str, bootfs: &str| {
        let (prepared, _, ran) = prepare_looking_inside(&board, ADOPT_POOL, datasets, bootfs);
        let Err(SetupError::Refused(r)) = prepared else {
            panic!("planned");
        };
        (r.iter().map(ToString::to_string).collect::<Vec<_>>(), ran)
    };
    let (home, ran) = refused(&looked("home", "/home", "local", "off"), "-\n");
    assert!(
        home.len() == 1
            && home[0].contains("its dataset oldtank/home has a mountpoint of its own, /home, outside /srv/oldtank, where zfs mount -a would mount it")
            && home[0].contains("on the old machine, or here after zpool import -N -f oldtank, run zfs inherit mountpoint oldtank/home (or zfs set canmount=noauto oldtank/home), then zpool export oldtank and run setup again"),
        "{home:?}"
    );
    // Looked at read-only under a name of its own, exported again, and
    // imported no other way.
    let zpool: Vec<&String> = ran.iter().filter(|l| l.starts_with("zpool ")).collect();
    assert_eq!(
        zpool,
        [
            "zpool import -d /dev/disk/by-id",
            "zpool import -N -o readonly=on -o cachefile=none -d /dev/disk/by-id -f -t 5871402329107765531 nasforge-probe-5871402329107765531",
            "zpool get -H -o value bootfs nasforge-probe-5871402329107765531",
            "zpool export nasforge-probe-5871402329107765531",
        ]
    );

    let (system, _) = refused(
        &looked("ROOT", "none", "local", "off"),
        "nasforge-probe-5871402329107765531/ROOT/pve-1\n",
    );
    assert!(
        system.len() == 1 && system[0].contains("it is an operating system's pool (its bootfs is oldtank/ROOT/pve-1): nasforge adopts pools of data only"),
        "{system:?}"
    );
    let (root, _) = refused(&looked("ROOT/debian", "/", "local", "off"), "-\n");
    assert!(
        root[0].contains("(oldtank/ROOT/debian mounts at /)"),
        "{root:?}"
    );

    // Below the recipe's mount, or inherited: adopted; an encrypted child
    // stays locked, and the plan says so.
    for (mountpoint, source) in [
        ("/srv/oldtank/photos", "local"),
        (
            "/oldtank/photos",
            "inherited from nasforge-probe-5871402329107765531",
        ),
    ] {
        let (prepared, _, _) = prepare_looking_inside(
            &board,
            ADOPT_POOL,
            &looked("photos", mountpoint, source, "aes-256-gcm"),
            "-\n",
        );
        let plan = prepared.unwrap().plan;
        assert!(
            plan.arrays[0].warnings.iter().any(|w| w.starts_with("dataset oldtank/photos is encrypted (aes-256-gcm) and stays locked: zfs load-key oldtank/photos then zfs mount oldtank/photos opens it")),
            "{:?}",
            plan.arrays[0].warnings
        );
    }
}

#[test]
fn a_pool_exported_by_its_old_machine_is_looked_into_and_mended_without_f() {
    let board = old_pool();
    // show_import's words for a pool exported where it was last used.
    let exported = OLDTANK_LISTING.replace(
        " status: The pool was last accessed by another system.\n action: The pool can be imported using its name or numeric identifier and\n\tthe '-f' flag.\n   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY\n",
        " action: The pool can be imported using its name or numeric identifier.\n",
    );
    assert_ne!(exported, OLDTANK_LISTING);
    let (prepared, _, ran) = prepare_listed(
        &board,
        &exported,
        ADOPT_POOL,
        &looked("home", "/home", "local", "off"),
        "-\n",
    );
    let Err(SetupError::Refused(r)) = prepared else {
        panic!("planned");
    };
    let why: Vec<String> = r.iter().map(ToString::to_string).collect();
    assert!(
        why.len() == 1
            && why[0].contains("on the old machine, or here after zpool import -N oldtank, run zfs inherit mountpoint oldtank/home"),
        "{why:?}"
    );
    assert!(
        ran.contains(&"zpool import -N -o readonly=on -o cachefile=none -d /dev/disk/by-id -t 5871402329107765531 nasforge-probe-5871402329107765531".to_string()),
        "{ran:?}"
    );
}

#[test]
fn a_share_inside_a_locked_dataset_is_refused_and_one_beside_it_is_served() {
    let board = old_pool();
    let share = |path: &str| {
        format!(
            "{ADOPT_POOL}\n[[shares]]\nname = \"album\"\npath = \"{path}\"\nsmb = {{ users = [\"admin\"] }}\n"
        )
    };
    let encrypted = looked(
        "photos",
        "/oldtank/photos",
        "inherited from nasforge-probe-5871402329107765531",
        "aes-256-gcm",
    );
    let (prepared, _, _) =
        prepare_looking_inside(&board, &share("/srv/oldtank/music"), &encrypted, "-\n");
    let plan = prepared.unwrap().plan;
    assert_eq!(
        plan.arrays[0].imported.as_ref().unwrap().locked,
        [nasforge_engine::planner::Locked {
            dataset: "oldtank/photos".into(),
            path: "/srv/oldtank/photos".into(),
        }]
    );
    for inside in ["/srv/oldtank/photos", "/srv/oldtank/photos/2024"] {
        let (prepared, _, _) = prepare_looking_inside(&board, &share(inside), &encrypted, "-\n");
        let Err(SetupError::Refused(r)) = prepared else {
            panic!("{inside}: planned")
        };
        let why: Vec<String> = r.iter().map(ToString::to_string).collect();
        assert!(
            why.iter().any(|w| w.contains(&format!("shares[0].path: share 'album': {inside} is in the encrypted dataset oldtank/photos, which stays locked (nasforge loads no keys)"))),
            "{why:?}"
        );
    }
}

#[test]
fn an_old_zfs_mirror_is_imported_by_its_id_with_nothing_created() {
    let board = old_pool();
    let (prepared, notes) = prepare_pool(&board, ADOPT_POOL);
    let prepared = prepared.unwrap();
    assert!(
        notes.iter().any(|n| n
            == "  ZFS pool 'oldtank' (id 5871402329107765531), mirror, ONLINE: sdb, sdc; last used by another system"),
        "{notes:?}"
    );
    let pool = &prepared.plan.arrays[0];
    let imported = pool.imported.as_ref().unwrap();
    assert!(imported.force && !imported.degraded);
    let disks: Vec<&str> = pool.members.iter().map(|m| m.disk.name.as_str()).collect();
    assert_eq!(disks, ["sdb", "sdc"]);
    assert!(pool.members.iter().all(|m| !m.erase));
    assert!(
        pool.warnings.iter().any(|w| w.contains(
            "last used by another system and not exported there, so it is imported with -f"
        )),
        "{:?}",
        pool.warnings
    );
    let described = prepared.plan.describe();
    assert!(
        described.contains("Pool 'oldtank': the ZFS mirror pool (id 5871402329107765531) adopted as it is, 2 of its 2 disk(s) here, its top dataset mounted at /srv/oldtank; nothing on it is erased"),
        "{described}"
    );
    let ids: Vec<&str> = prepared.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids[0], "adopt-pool:oldtank", "{ids:?}");
    assert!(
        !ids.iter()
            .any(|id| id.starts_with("create-pool") || id.starts_with("wipe:")),
        "{ids:?}"
    );
    for needed in ["zfs-boot", "mount:oldtank"] {
        assert!(ids.contains(&needed), "{needed} not in {ids:?}");
    }
    let mut dry = RecordingRunner::default();
    for a in &prepared.steps[0].actions {
        nasforge_engine::runner::Runner::apply(&mut dry, a).unwrap();
    }
    let shown = dry.lines.join("\n");
    assert!(
        shown.contains("modprobe zfs\nzpool import -N -d /dev/disk/by-id -o cachefile=/etc/zfs/zpool.cache -f 5871402329107765531  # unless 'oldtank' is imported already\nzfs set mountpoint=/srv/oldtank oldtank")
            && !shown.contains(" -F")
            && !shown.contains(" -X")
            && !shown.contains("upgrade"),
        "{shown}"
    );
    let mount = prepared
        .steps
        .iter()
        .find(|s| s.id == "mount:oldtank")
        .unwrap();
    assert!(
        format!("{:?}", mount.actions).contains("\"mount\", \"-a\""),
        "{:?}",
        mount.actions
    );
}

#[test]
fn a_pool_that_is_not_what_the_recipe_says_is_refused_naming_what_is_there() {
    let board = old_pool();
    let refused = |arrays: &str| match prepare_pool(&board, arrays).0 {
        Err(SetupError::Refused(r)) => r.iter().map(ToString::to_string).collect::<Vec<_>>(),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("planned"),
    };
    let level = refused(&ADOPT_POOL.replace("mirror", "raidz1"));
    assert!(
        level[0].contains("storage.arrays[0].level: the pool on the disks is ZFS pool 'oldtank' (id 5871402329107765531), mirror, ONLINE: sdb, sdc; last used by another system, not raidz1; if it is the one you mean, set level = \"mirror\""),
        "{level:?}"
    );
    let renamed = refused(&ADOPT_POOL.replace(
        "name = \"oldtank\"",
        "name = \"tank\"\nuuid = \"5871402329107765531\"",
    ));
    assert!(
        renamed[0].contains("storage.arrays[0].name: the pool with id 5871402329107765531 is called 'oldtank': a pool keeps its name when it is imported"),
        "{renamed:?}"
    );
    let none = refused(&ADOPT_POOL.replace("oldtank", "media"));
    assert!(
        none[0].contains("no ZFS pool called 'media' is on the disks to import; zpool import lists: ZFS pool 'oldtank'"),
        "{none:?}"
    );
    // A new array's rules never reach the pool's disks.
    let beside = prepare_pool(
        &board,
        &format!("{ADOPT_POOL}[[storage.arrays]]\nname = \"new\"\nlevel = \"raid1\"\ndisks = {{ transport = \"sata\", count = 2 }}\nfilesystem = \"ext4\"\nmount = \"/srv/new\"\nwipe = true\n"),
    )
    .0
    .unwrap();
    let new: Vec<&str> = beside.plan.arrays[1]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert!(!new.contains(&"sdb") && !new.contains(&"sdc"), "{new:?}");
}

#[test]
fn the_adopt_pool_step_is_done_only_when_this_pool_is_imported_at_the_mount() {
    use nasforge_engine::steps::{Check, Guard, Step};
    let step = Step {
        id: "adopt-pool:oldtank".into(),
        title: "Import".into(),
        guard: Guard::PoolAdopted {
            pool: "oldtank".into(),
            id: "5871402329107765531".into(),
            mount: "/srv/oldtank".into(),
        },
        actions: vec![],
        always: vec![],
    };
    let board = old_pool();
    assert!(matches!(step.check(&board.host), Check::Pending));
    common::zfs_answer(&board, "zpool list -H -o name", "oldtank\n");
    common::zfs_answer(
        &board,
        "zpool get -H -o value guid oldtank",
        "5871402329107765531\n",
    );
    common::zfs_answer(
        &board,
        "zfs get -H -o value mountpoint oldtank",
        "/oldtank\n",
    );
    assert!(matches!(step.check(&board.host), Check::Pending));
    common::zfs_answer(
        &board,
        "zfs get -H -o value mountpoint oldtank",
        "/srv/oldtank\n",
    );
    assert!(matches!(step.check(&board.host), Check::Done(_)));
    common::zfs_answer(&board, "zpool get -H -o value guid oldtank", "42\n");
    let Check::Refuse(why) = step.check(&board.host) else {
        panic!("another pool under the name");
    };
    assert!(
        why.contains(
            "a pool called 'oldtank' is imported here already, and it is not the one to adopt"
        ),
        "{why}"
    );
}

#[test]
fn a_pool_whose_read_only_import_fails_is_refused_in_zpools_words() {
    let board = old_pool();
    let mut runner = RecordingRunner::answering(vec![(
        "zpool import -d /dev/disk/by-id".into(),
        OLDTANK_LISTING.into(),
    )]);
    runner.failures.push((
        "zpool import -N -o readonly=on".into(),
        "cannot import 'oldtank': I/O error\n".into(),
    ));
    let err = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(ADOPT_POOL),
        &mut runner,
        &mut |_| {},
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("its datasets could not be looked at (a read-only import): `zpool import -N -o readonly=on -o cachefile=none -d /dev/disk/by-id -f -t 5871402329107765531 nasforge-probe-5871402329107765531` said: cannot import 'oldtank': I/O error"),
        "{err}"
    );
    assert!(
        !runner
            .lines
            .iter()
            .any(|c| c.starts_with("zpool export") || c.starts_with("zfs get")),
        "nothing was imported, so nothing is read or exported: {:?}",
        runner.lines
    );
}

#[test]
fn a_synologys_system_and_swap_arrays_are_never_adopted() {
    use nasforge_testkit::old_nas::{SYNOLOGY_SYSTEM, synology_arrays};
    let board = common::board("pi5-jmb585");
    let mut inventory = board.inventory();
    inventory.existing = synology_arrays();
    let recipe = recipe(&ADOPT.replace(
        "import = true",
        &format!("import = true\nuuid = \"{SYNOLOGY_SYSTEM}\""),
    ));
    let refused: Vec<String> = nasforge_engine::planner::plan(
        recipe.storage.as_ref().unwrap(),
        &recipe.shares,
        &inventory,
    )
    .unwrap_err()
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains(&format!("the array on the disks is raid1 (UUID {SYNOLOGY_SYSTEM}), 2 of 2 members: sda1, sdb1"))
            && refused[0].contains("an operating system's system partition, which nasforge does not adopt. A Synology keeps the files on the arrays of partitions 5 and up"),
        "{refused:?}"
    );
}
