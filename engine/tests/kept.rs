//! Disks kept as they are (`[[storage.disks]]`, `keep = true`): which disk
//! and filesystem the planner takes, what it refuses, and that no step
//! ever writes to such a disk.

use nasforge_engine::machine::disks::{Disk, InUse, Partition};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::planner;
use nasforge_engine::size::Size;
use nasforge_engine::spec::{
    Array, Count, DeviceRecipe, DiskMatch, Filesystem, KeptDisk, KeptFilesystem, Level, Mode,
    SpinDown, Storage, Transport,
};
use nasforge_engine::steps::{self, Action, Context};
use nasforge_testkit::disks::{self, inventory};
use std::path::Path;

const GB: u64 = 1_000_000_000;

fn usb_disk(name: &str, size: u64) -> Disk {
    disks::usb(name, size, "Elements 25A3")
}

fn ext4(label: &str, uuid: &str) -> Signature {
    disks::ext4(label, uuid)
}

/// A media disk: a GPT with one ext4 partition labelled "photos".
fn media(name: &str) -> Disk {
    let mut d = usb_disk(name, 4000 * GB);
    d.model = Some("Elements 25A3 media".into());
    d.contents = vec![Signature::PartitionTable {
        scheme: "gpt".into(),
    }];
    d.partitions = vec![Partition {
        name: format!("{name}1"),
        number: 1,
        start: 1 << 20,
        size: Size(3999 * GB),
        contents: vec![ext4("photos", "0b6d3c9e-1111-4222-8333-444455556666")],
    }];
    d
}

fn kept(rule: DiskMatch) -> KeptDisk {
    KeptDisk {
        name: "media".into(),
        disk: rule,
        partition: None,
        filesystem: None,
        mount: "/srv/media".into(),
        keep: true,
    }
}

fn storage(disks: Vec<KeptDisk>) -> Storage {
    Storage {
        mode: Mode::Unattended,
        arrays: vec![Array {
            vdevs: None,
            spares: 0,
            parity: None,
            keep: Vec::new(),
            name: "docs".into(),
            level: Level::Raid1,
            disk_match: Some(DiskMatch {
                transport: Some(Transport::Usb),
                count: Count::Exactly(2),
                ..DiskMatch::default()
            }),
            filesystem: Filesystem::Ext4,
            mount: "/srv/docs".into(),
            wipe: true,
            import: false,
            uuid: None,
        }],
        mailaddr: None,
        alert_program: None,
        spin_down: SpinDown::After(1200),
        disks,
        usb_quirks: vec![],
        system_mirror: None,
        allow_failing: Vec::new(),
    }
}

fn by_model(pattern: &str) -> DiskMatch {
    DiskMatch {
        model: Some(pattern.into()),
        ..DiskMatch::default()
    }
}

#[test]
fn a_kept_disk_is_mounted_as_it_is_and_never_written() {
    let inv = inventory(vec![
        usb_disk("sda", 2000 * GB),
        usb_disk("sdb", 2000 * GB),
        media("sdc"),
    ]);
    // The array's rule (every USB disk, wipe = true) also fits the media
    // disk: the kept entry must keep it out of reach.
    let plan = planner::plan(&storage(vec![kept(by_model("*media"))]), &[], &inv).unwrap();
    let members: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sda", "sdb"]);
    let k = &plan.kept[0];
    assert_eq!(
        (k.device.as_str(), k.filesystem),
        ("sdc1", KeptFilesystem::Ext4)
    );
    assert_eq!(k.uuid, "0b6d3c9e-1111-4222-8333-444455556666");
    assert!(
        plan.describe()
            .contains("Kept disk 'media': the ext4 'photos' filesystem on sdc1"),
        "{}",
        plan.describe()
    );

    let ctx = Context::random("nas", &plan);
    let steps = steps::generate(&plan, &ctx);
    let fstab = steps.iter().find(|s| s.id == "fstab").unwrap();
    assert!(fstab.actions.iter().any(|a| matches!(a, Action::ManagedBlock { contents, .. }
        if contents.contains("UUID=0b6d3c9e-1111-4222-8333-444455556666  /srv/media  ext4  defaults,nofail  0  0"))), "{fstab:?}");
    assert!(steps.iter().any(|s| s.id == "mount:media"));
    // Nothing that erases, partitions or formats names the kept disk.
    for step in &steps {
        for action in &step.actions {
            let text = format!("{action:?}");
            let writes = ["wipefs", "sgdisk", "mkfs", "mdadm", "Gpt", "dd"];
            if text.contains("sdc") || text.contains("usb-TEST_sdc") {
                assert!(
                    !writes.iter().any(|w| text.contains(w)),
                    "step {} writes to the kept disk: {text}",
                    step.id
                );
            }
        }
    }
    // hd-idle covers the kept disk as well as the members.
    let spin = steps.iter().find(|s| s.id == "spin-down").unwrap();
    assert!(format!("{spin:?}").contains("usb-TEST_sdc"), "{spin:?}");
}

#[test]
fn a_kept_disk_needs_one_disk_one_filesystem_and_the_one_named() {
    let refused = |k: KeptDisk, disks: Vec<Disk>| {
        let r = planner::plan(&storage(vec![k]), &[], &inventory(disks)).unwrap_err();
        r.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let two = refused(
        kept(by_model("Elements*")),
        vec![media("sdc"), media("sdd")],
    );
    assert!(
        two.contains("kept disk 'media'") && two.contains("fits 2 disks"),
        "{two}"
    );
    let none = refused(kept(by_model("WD*")), vec![media("sdc")]);
    assert!(
        none.contains("no disk matches storage.disks[0].match"),
        "{none}"
    );
    let blank = refused(kept(by_model("*")), vec![usb_disk("sdc", GB)]);
    assert!(blank.contains("holds no filesystem"), "{blank}");
    let mut want_ntfs = kept(by_model("*media"));
    want_ntfs.filesystem = Some(KeptFilesystem::Ntfs);
    let wrong = refused(want_ntfs, vec![media("sdc")]);
    assert!(
        wrong.contains("says ntfs, but it holds an ext4 filesystem"),
        "{wrong}"
    );
    let mut busy = media("sdc");
    busy.in_use = vec![InUse::Mounted {
        device: "sdc1".into(),
        at: "/media/pi/photos".into(),
    }];
    let mounted = refused(kept(by_model("*media")), vec![busy]);
    assert!(mounted.contains("in use"), "{mounted}");
    let mut two_fs = media("sdc");
    let mut second = two_fs.partitions[0].clone();
    second.name = "sdc2".into();
    second.number = 2;
    two_fs.partitions.push(second);
    let ambiguous = refused(kept(by_model("*media")), vec![two_fs.clone()]);
    assert!(ambiguous.contains("partition = N"), "{ambiguous}");
    let mut second_only = kept(by_model("*media"));
    second_only.partition = Some(2);
    let plan = planner::plan(
        &storage(vec![second_only]),
        &[],
        &inventory(vec![two_fs, usb_disk("sda", GB), usb_disk("sdb", GB)]),
    )
    .unwrap();
    assert_eq!(plan.kept[0].device, "sdc2");
}

fn check(text: &str) -> Result<DeviceRecipe, String> {
    DeviceRecipe::parse(text, Path::new("nasforge.toml")).map_err(|e| e.to_string())
}

#[test]
fn the_recipe_says_keep_and_shares_may_live_on_a_kept_disk() {
    let ok = check(
        r#"[storage]
mode = "unattended"
[[storage.disks]]
name = "media"
match = { model = "Elements*" }
keep = true
mount = "/srv/media"
[[shares]]
name = "media"
path = "/srv/media"
smb = { guest = true, readonly = true }
"#,
    )
    .unwrap();
    assert_eq!(ok.storage.unwrap().disks[0].name, "media");

    let err = check(
        r#"[storage]
mode = "unattended"
[[storage.arrays]]
name = "media"
level = "raid1"
disks = { transport = "sata" }
filesystem = "ext4"
mount = "/srv/data"
[[storage.disks]]
name = "media"
match = { model = "Elements*", count = 2 }
keep = false
mount = "/srv/data/media"
"#,
    )
    .unwrap_err();
    for want in [
        "nasforge.toml:12:8: storage.disks[0].keep: a disk listed in [[storage.disks]] is shared as it is",
        "storage.disks[0].name: the name `media` is already used by storage.arrays[0]",
        "storage.disks[0].mount: /srv/data/media and /srv/data (storage.arrays[0]) are nested",
        "storage.disks[0].match.count: a kept disk is one disk",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
    let typo = check(
        "[storage]\nmode = \"unattended\"\n[[storage.disks]]\nname = \"m\"\nmatch = {}\nkeep = true\nmount = \"/srv/m\"\nfilesytem = \"ntfs\"\n",
    )
    .unwrap_err();
    assert!(
        typo.contains("nasforge.toml:8:1") && typo.contains("unknown field `filesytem`"),
        "{typo}"
    );
}
