//! Unattended setup asks SMART of every free disk before it plans: on the
//! Pi 5 fixture with smartctl answering for sdc what a real failing drive
//! said, the recipe is refused naming the disk and its serial, nothing is
//! planned onto it, and accepting it by serial in the recipe lets setup go
//! on.

use nasforge_testkit::board as common;

use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::setup::{self, SetupError};
use nasforge_engine::spec::DeviceRecipe;
use std::path::Path;

/// Real smartctl output: see engine/tests/data/smartctl/README.md.
const FAILING: &str = include_str!("data/smartctl/hitachi-failing.json");
const HEALTHY: &str = include_str!("data/smartctl/qemu-ata-selftests.json");

fn recipe(accept: &str) -> DeviceRecipe {
    DeviceRecipe::parse(
        &format!(
            r#"[storage]
mode = "unattended"
{accept}
[[storage.arrays]]
name = "data"
level = "raid5"
disks = {{ transport = "sata", count = "all" }}
filesystem = "ext4"
mount = "/srv/data"
"#
        ),
        Path::new("nasforge.toml"),
    )
    .unwrap()
}

/// smartctl as the board runs it: sdc failing, the other disks healthy.
fn smartctl() -> RecordingRunner {
    let mut runner = RecordingRunner::default();
    for disk in ["sda", "sdb", "sdd"] {
        runner.responses.push((
            format!("smartctl --json -H -A /dev/{disk}"),
            HEALTHY.to_string(),
        ));
    }
    runner
        .responses
        .push(("smartctl --json -H -A /dev/sdc".into(), FAILING.to_string()));
    runner
}

#[test]
fn a_disk_smart_calls_failing_is_refused_in_unattended_mode_unless_the_recipe_accepts_its_serial() {
    let board = common::board("pi5-jmb585");
    let mut notes = Vec::new();
    let err = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe(""),
        &mut smartctl(),
        &mut |n| notes.push(n.to_string()),
    )
    .err()
    .expect("a failing disk refused");
    let SetupError::Refused(refused) = &err else {
        panic!("{err}");
    };
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].disk.as_deref(), Some("sdc"));
    assert!(
        refused[0].reason.contains("the WDC WD40EFRX-68N32N0 with serial WD-WCC7K0000003 is failing by SMART's account: its overall health self-assessment FAILED, Reallocated_Sector_Ct is failing now (normalized 1, threshold 5), 8 sectors pending reallocation, 1975 sectors reallocated. Nothing was written.")
            && refused[0].reason.contains("allow_failing = [\"WD-WCC7K0000003\"]"),
        "{}",
        refused[0].reason
    );
    assert!(
        notes.iter().any(
            |n| n.starts_with("  sdc: ") && n.contains("(failing by SMART: its overall health")
        ),
        "{notes:?}"
    );

    let prepared = setup::prepare(
        &board.host,
        Path::new("nasforge.toml"),
        &recipe("allow_failing = [\"WD-WCC7K0000003\"]"),
        &mut smartctl(),
        &mut |_| {},
    )
    .unwrap();
    let array = &prepared.plan.arrays[0];
    assert!(array.members.iter().any(|m| m.disk.name == "sdc"));
    assert!(
        array
            .warnings
            .iter()
            .any(|w| w.contains("used as storage.allow_failing says")),
        "{:?}",
        array.warnings
    );
}
