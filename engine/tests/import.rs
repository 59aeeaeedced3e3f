//! Adopting an md array another machine made (`import = true`), on the CM4
//! fixture whose sdd carries a member of 'oldnas:data' (udev's record of a
//! real member), with mdadm's `--examine --export` answering as super1.c
//! prints it: the array found and listed, planned as it is with nothing
//! erased, partitioned or formatted, its steps assembling it read-only
//! first; and each way a recipe can mean something else refused before
//! anything is written.

use nasforge_testkit::board as common;

use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::setup::{self, Prepared, SetupError};
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;

/// super1.c `export_examine_super1`'s lines for sdd: a raid1 of two made
/// on 'oldnas', its other member not in this machine.
const SDD: &str = "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_NAME=oldnas:data\nMD_ARRAY_SIZE=4.00 TB\nMD_UUID=5c1a7e42:0b9d3f61:8e2a4c75:19d6b803\nMD_UPDATE_TIME=1796380000\nMD_DEV_UUID=77e0c2d1:4a5b6c7d:8e9f0a1b:2c3d4e5f\nMD_EVENTS=4127\n";

fn mdadm() -> RecordingRunner {
    RecordingRunner::answering(vec![(
        "mdadm --examine --export /dev/sdd".into(),
        SDD.into(),
    )])
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
            == "  raid1 'oldnas:data' (UUID 5c1a7e42:0b9d3f61:8e2a4c75:19d6b803), 1 of 2 members: sdd; 4.00 TB"),
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
        wrong_level[0].contains("storage.arrays[0].level: the array on the disks is raid1 'oldnas:data' (UUID 5c1a7e42:0b9d3f61:8e2a4c75:19d6b803), 1 of 2 members: sdd; 4.00 TB, not raid5; if it is the one you mean, set level = \"raid1\""),
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
    let pool = check(&ADOPT.replace("raid1", "raidz1").replace("ext4", "zfs"));
    assert!(
        pool.contains("storage.arrays[0].level: import adopts md arrays (raid0, raid1, raid5, raid6, raid10); adopting a ZFS pool is not built yet"),
        "{pool}"
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
