//! Disks from an old NAS on the fake boards: udev's record of what a disk
//! holds, and what mdadm and zpool say of the arrays and pools on them, in
//! those tools' own formats.

use crate::board::Board;
use nasforge_engine::machine::existing::{self, ExistingMd};
use nasforge_engine::steps::Step;

/// udev's record of the disk `devnum` (`8:16`) says it holds `fstype`
/// (`linux_raid_member`, `zfs_member`) labelled `label`, as libblkid
/// reports an md member's "host:name" and a pool's name.
pub fn labelled(board: &Board, devnum: &str, fstype: &str, label: &str) {
    let record = board.host.path(&format!("/run/udev/data/b{devnum}"));
    let mut text = std::fs::read_to_string(&record).unwrap();
    text.push_str(&format!("E:ID_FS_TYPE={fstype}\nE:ID_FS_LABEL={label}\n"));
    std::fs::write(&record, text).unwrap();
}

/// The lines super1.c's `export_examine_super1` prints for one member of
/// the `level` array 'openmediavault:0' of `devices` members (OpenMediaVault
/// names an array after its host), UUID `OMV_UUID`.
pub fn omv_member(level: &str, devices: usize, dev_uuid: &str) -> String {
    format!(
        "MD_LEVEL={level}\nMD_DEVICES={devices}\nMD_NAME=openmediavault:0\nMD_ARRAY_SIZE=4.00 TB\nMD_UUID={OMV_UUID}\nMD_UPDATE_TIME=1796380000\nMD_DEV_UUID={dev_uuid}\nMD_EVENTS=18\n"
    )
}

pub const OMV_UUID: &str = "3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708";

/// Where setup assembles that array read-only to look into it.
pub const OMV_PROBE: &str = "/dev/md/nasforge-probe-3f1c2a4b";

/// As zpool 2.x's `show_import` lists a mirror 'oldtank' on the Pi 5
/// fixture's sdb and sdc, last used by another system.
pub const OLDTANK_LISTING: &str = "   pool: oldtank
     id: 5871402329107765531
  state: ONLINE
 status: The pool was last accessed by another system.
 action: The pool can be imported using its name or numeric identifier and
\tthe '-f' flag.
   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY
 config:

\toldtank                                      ONLINE
\t  mirror-0                                   ONLINE
\t    ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000002  ONLINE
\t    ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000003  ONLINE
";

/// The steps adopt an array or pool first of all, and nothing in them
/// erases, partitions, formats or creates an array.
pub fn adopts_and_builds_nothing(steps: &[Step]) {
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.first().is_some_and(|id| id.starts_with("adopt")),
        "adopted before anything else: {ids:?}"
    );
    for building in [
        "wipe:",
        "partition:",
        "mkfs:",
        "create-array:",
        "create-pool:",
    ] {
        assert!(
            !ids.iter().any(|id| id.starts_with(building)),
            "{building} in {ids:?}"
        );
    }
}

/// What a Synology's two disks `sda` and `sdb` hold, as mdadm examines
/// them: DSM's own system on a raid1 over each disk's partition 1 and its
/// swap on one over partition 2, both with 0.90 superblocks, whose export
/// (super0.c `export_examine_super0`) has no name; the files on a raid1
/// over partition 5, metadata 1.2, named after the DiskStation.
pub fn synology_arrays() -> Vec<ExistingMd> {
    let super0 = |uuid: &str| {
        format!(
            "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_UUID={uuid}\nMD_UPDATE_TIME=1796380000\nMD_EVENTS=40\n"
        )
    };
    let super1 = format!(
        "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_NAME=DiskStation:2\nMD_UUID={SYNOLOGY_DATA}\nMD_UPDATE_TIME=1796380000\nMD_EVENTS=90\n"
    );
    let mut examined = Vec::new();
    for (part, text) in [
        ("1", super0(SYNOLOGY_SYSTEM)),
        ("2", super0("0b5e3a61:1c2d3e4f:50617283:94a5b6c7")),
        ("5", super1),
    ] {
        for disk in ["sda", "sdb"] {
            examined.push((
                format!("{disk}{part}"),
                disk.to_string(),
                existing::parse_examine(&text).unwrap(),
            ));
        }
    }
    existing::group(examined)
}

/// The UUIDs of [`synology_arrays`]' system and data arrays.
pub const SYNOLOGY_SYSTEM: &str = "a1b2c3d4:e5f60718:293a4b5c:6d7e8f90";
pub const SYNOLOGY_DATA: &str = "5c4b3a29:18f7e6d5:c4b3a291:8f7e6d5c";
