//! `[storage.system_mirror]`: the PC's system mirrored onto a second SSD at
//! first boot. Which disk the planner takes and what it refuses, the steps
//! in their safe order, and the checks that keep a re-run from wiping the
//! root the system still runs from. (The conversion itself runs on the
//! emulated PC: tests/e2e_pc.rs.)

use nasforge_engine::machine::disks::{Disk, InUse, Partition};
use nasforge_engine::machine::host::Host;
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::machine::zfs::{ZfsOnBoard, ZfsSupport};
use nasforge_engine::planner;
use nasforge_engine::size::Size;
use nasforge_engine::spec::{
    Array, Count, DeviceRecipe, DiskMatch, Filesystem, Level, Mode, SpinDown, Storage,
    SystemMirror, Transport,
};
use nasforge_engine::steps::{self, Action, Check, Context};
use nasforge_testkit::disks::{self, inventory};
use std::path::Path;

const GB: u64 = 1_000_000_000;
const ROOT_UUID: &str = "5d2d6b4e-1111-4222-8333-444455556666";
const MIB: u64 = 1 << 20;

/// The SSD the image was flashed to, laid out as files/debian/layout-pc.sh
/// lays it out: a 256 MiB EFI system partition, then the ext4 root.
fn system_ssd() -> Disk {
    let mut d = disks::usb("sda", 500 * GB, "Samsung SSD 870 EVO 500GB");
    d.transport = Some(Transport::Sata);
    d.rotational = false;
    d.usb_mbit = None;
    d.by_id = Some("/dev/disk/by-id/ata-Samsung_SSD_870_EVO_500GB_SN-sda".into());
    d.contents = vec![Signature::PartitionTable {
        scheme: "gpt".into(),
    }];
    d.partitions = vec![
        Partition {
            name: "sda1".into(),
            number: 1,
            start: MIB,
            size: Size(256 * MIB),
            contents: vec![Signature::Filesystem {
                fstype: "vfat".into(),
                label: Some("NFESP".into()),
                uuid: Some("1A2B-3C4D".into()),
            }],
        },
        Partition {
            name: "sda2".into(),
            number: 2,
            start: 257 * MIB,
            size: Size(2048 * MIB),
            contents: vec![disks::ext4("NFROOT", ROOT_UUID)],
        },
    ];
    d.in_use = vec![
        InUse::Boot,
        InUse::Mounted {
            device: "sda1".into(),
            at: "/boot/efi".into(),
        },
    ];
    d
}

fn nvme(name: &str, size: u64) -> Disk {
    let mut d = disks::usb(name, size, "WD Blue SN580 1TB");
    d.transport = Some(Transport::Nvme);
    d.rotational = false;
    d.usb_mbit = None;
    d.by_id = Some(format!("/dev/disk/by-id/nvme-WD_Blue_SN580_1TB_SN-{name}"));
    d
}

fn hdd(name: &str) -> Disk {
    let mut d = disks::usb(name, 8000 * GB, "WDC WD80EFAX");
    d.transport = Some(Transport::Sata);
    d.usb_mbit = None;
    d
}

fn storage(mirror: DiskMatch) -> Storage {
    Storage {
        mode: Mode::Unattended,
        arrays: vec![Array {
            vdevs: None,
            spares: 0,
            parity: None,
            keep: Vec::new(),
            name: "data".into(),
            level: Level::Raid5,
            // Every disk: the mirror's must be kept out of reach.
            disk_match: Some(DiskMatch::default()),
            filesystem: Filesystem::Ext4,
            mount: "/srv/data".into(),
            wipe: false,
            import: false,
            uuid: None,
        }],
        mailaddr: None,
        alert_program: None,
        spin_down: SpinDown::Off,
        disks: vec![],
        usb_quirks: vec![],
        system_mirror: Some(SystemMirror {
            disk: mirror,
            wipe: false,
        }),
        allow_failing: Vec::new(),
    }
}

fn not_rotational() -> DiskMatch {
    DiskMatch {
        rotational: Some(false),
        ..DiskMatch::default()
    }
}

fn pc() -> Vec<Disk> {
    vec![
        system_ssd(),
        hdd("sdb"),
        hdd("sdc"),
        hdd("sdd"),
        nvme("nvme0n1", 1000 * GB),
    ]
}

fn refusal(storage: &Storage, disks: Vec<Disk>) -> String {
    let refused = planner::plan(storage, &[], &inventory(disks)).unwrap_err();
    refused
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_other_ssd_is_the_mirror_and_no_array_takes_it() {
    let plan = planner::plan(&storage(not_rotational()), &[], &inventory(pc())).unwrap();
    let m = plan.system_mirror.as_ref().unwrap();
    assert_eq!(
        (m.system.name.as_str(), m.disk.name.as_str(), m.erase),
        ("sda", "nvme0n1", false)
    );
    assert_eq!(m.root_uuid, ROOT_UUID);
    let members: Vec<&str> = plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sdb", "sdc", "sdd"]);
    assert!(
        plan.describe().starts_with(
            "System: mirrored (RAID1, /dev/md/system) from sda (Samsung SSD 870 EVO 500GB"
        ),
        "{}",
        plan.describe()
    );
}

#[test]
fn the_steps_copy_before_they_switch_and_wipe_the_old_root_only_after_the_reboot() {
    let plan = planner::plan(&storage(not_rotational()), &[], &inventory(pc())).unwrap();
    let ctx = Context::random("nas", &plan);
    let uuid = ctx.system_uuid.clone().unwrap();
    let steps = steps::generate(&plan, &ctx);
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    let mirror: Vec<&str> = ids
        .iter()
        .copied()
        .take_while(|id| id.starts_with("system-mirror:"))
        .collect();
    assert_eq!(
        mirror,
        [
            "system-mirror:partition:nvme0n1",
            "system-mirror:esp",
            "system-mirror:array",
            "system-mirror:mkfs",
            "system-mirror:initramfs",
            "system-mirror:switch",
            "system-mirror:release",
            "system-mirror:add",
        ],
        "the mirror comes first, so the data arrays' files go to the new root: {ids:?}"
    );
    // The same sectors as the system disk's, the second a RAID member.
    let Action::Run(sfdisk) = &steps[0].actions[0] else {
        panic!("{:?}", steps[0])
    };
    assert_eq!(
        sfdisk.stdin.as_deref(),
        Some(
            "label: gpt\nunit: sectors\n\nstart=2048, size=524288, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI System\"\nstart=526336, size=4194304, type=A19D880F-05FC-4D3B-A006-743F0F84911E, name=\"nasforge system mirror\"\n"
        )
    );
    let text = |id: &str| {
        let step = steps.iter().find(|s| s.id == id).unwrap();
        step.actions
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let new = "/dev/disk/by-id/nvme-WD_Blue_SN580_1TB_SN-nvme0n1";
    let old = "/dev/disk/by-id/ata-Samsung_SSD_870_EVO_500GB_SN-sda";
    // The copy in slot 0, which GRUB reads first.
    assert!(
        text("system-mirror:array").contains(&format!(
            "--level=1 --raid-devices=2 --bitmap=internal {new}-part2 missing"
        )),
        "{}",
        text("system-mirror:array")
    );
    assert!(text("system-mirror:mkfs").contains(&format!("-U {uuid} /dev/md/system")));
    let initramfs = text("system-mirror:initramfs");
    assert!(
        !initramfs.contains("MODULES=most")
            && initramfs.contains(&format!(
                "/etc/initramfs-tools/hooks/nasforge-system-mirror {old} {new}"
            ))
            && initramfs.contains("mdadm --detail --scan")
            && initramfs.contains("update-initramfs -u -k all"),
        "{initramfs}"
    );
    let switch = steps
        .iter()
        .find(|s| s.id == "system-mirror:switch")
        .unwrap();
    assert!(switch.reboots(), "{switch:?}");
    assert!(
        text("system-mirror:switch").contains(&format!("/etc/nasforge/system-mirror.{ROOT_UUID}")),
        "the marker GRUB looks for is named after the root it replaces"
    );
    assert!(text("system-mirror:release").contains(&format!("wipefs --all --force {old}-part2")));
    assert_eq!(
        text("system-mirror:add"),
        format!("mdadm /dev/md/system --add {old}-part2")
    );
}

#[test]
fn mdadm_watches_the_mirror_of_a_nas_whose_data_is_on_zfs() {
    let mut s = storage(not_rotational());
    s.arrays[0].level = Level::Raidz1;
    s.arrays[0].filesystem = Filesystem::Zfs;
    let mut inv = inventory(pc());
    inv.zfs = ZfsOnBoard::Available(ZfsSupport { version: None });
    let plan = planner::plan(&s, &[], &inv).unwrap();
    let steps = steps::generate(&plan, &Context::random("nas", &plan));
    let ids: Vec<&str> = steps.iter().map(|s| s.id.as_str()).collect();
    assert!(
        ids.contains(&"raid-monitoring") && !ids.contains(&"mdadm-conf"),
        "no md array but the mirror: mdadm's monitor reports on it, and its initramfs is not built twice: {ids:?}"
    );
}

#[test]
fn the_old_root_is_never_wiped_before_the_system_runs_from_the_mirror() {
    let plan = planner::plan(&storage(not_rotational()), &[], &inventory(pc())).unwrap();
    let steps = steps::generate(&plan, &Context::random("nas", &plan));
    let step = |id: &str| steps.iter().find(|s| s.id == id).unwrap().clone();
    let root = tempfile::tempdir().unwrap();
    let host = Host::new(root.path());
    match step("system-mirror:release").check(&host) {
        Check::Refuse(why) => assert!(
            why.contains("the system does not run from the mirror")
                && why.contains("nothing was erased"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(step("system-mirror:switch").check(&host), Check::Pending);
    // After the reboot the root the system runs from holds the marker.
    let marker = root
        .path()
        .join(format!("etc/nasforge/system-mirror.{ROOT_UUID}"));
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, "").unwrap();
    assert!(matches!(
        step("system-mirror:switch").check(&host),
        Check::Done(_)
    ));
    match step("system-mirror:release").check(&host) {
        Check::Refuse(why) => assert!(why.contains("is gone"), "{why}"),
        other => panic!("no such partition here: {other:?}"),
    }
}

#[test]
fn a_disk_holding_data_too_small_or_not_there_is_refused() {
    let mut used = pc();
    used[4] = disks::photos("nvme0n1", 1000 * GB, "WD Blue SN580 1TB");
    used[4].transport = Some(Transport::Nvme);
    used[4].rotational = false;
    let e = refusal(&storage(not_rotational()), used.clone());
    assert!(
        e.contains("array 'system': nvme0n1: it holds")
            && e.contains("set storage.system_mirror.wipe = true"),
        "{e}"
    );
    let mut allowed = storage(not_rotational());
    allowed.system_mirror.as_mut().unwrap().wipe = true;
    let plan = planner::plan(&allowed, &[], &inventory(used)).unwrap();
    assert!(plan.system_mirror.as_ref().unwrap().erase);
    let steps = steps::generate(&plan, &Context::random("nas", &plan));
    assert_eq!(steps[0].id, "wipe:nvme0n1");

    let mut small = pc();
    small[4] = nvme("nvme0n1", 2 * GB);
    let e = refusal(&storage(not_rotational()), small);
    assert!(
        e.contains("nvme0n1: it is 2 GB, and the system's partitions on sda need 2.4 GB")
            && e.contains("mirror onto a disk at least as large"),
        "{e}"
    );

    let e = refusal(&storage(not_rotational()), pc()[..4].to_vec());
    assert!(
        e.contains("no disk but the system's own (sda) matches storage.system_mirror.match"),
        "{e}"
    );

    let mut two = pc();
    two.push(nvme("nvme1n1", 1000 * GB));
    let e = refusal(&storage(not_rotational()), two);
    assert!(
        e.contains("fits 2 disks") && e.contains("by its serial"),
        "{e}"
    );
}

#[test]
fn a_system_disk_not_laid_out_by_nasforge_is_not_copied() {
    let mut disks = pc();
    disks[0].partitions.truncate(1);
    let e = refusal(&storage(not_rotational()), disks);
    assert!(
        e.contains("sda: the system disk holds")
            && e.contains("not the layout of nasforge's PC image"),
        "{e}"
    );
}

#[test]
fn the_recipe_says_which_disk_and_leaves_the_name_system_to_the_mirror() {
    let parse = |text: &str| DeviceRecipe::parse(text, Path::new("r.toml"));
    let base = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n";
    let ok = parse(&format!(
        "{base}[storage.system_mirror]\nmatch = {{ serial = \"S4EV*\" }}\n"
    ))
    .unwrap();
    let m = ok.storage.unwrap().system_mirror.unwrap();
    assert_eq!(
        (m.disk.serial.as_deref(), m.disk.count, m.wipe),
        (Some("S4EV*"), Count::All, false)
    );
    let e = parse(&format!("{base}[storage.system_mirror]\nmatch = {{}}\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("r.toml:10:9: storage.system_mirror.match: say which disk"),
        "{e}"
    );
    let e = parse(&format!(
        "{}[storage.system_mirror]\nmatch = {{ rotational = false }}\n",
        base.replace("name = \"data\"", "name = \"system\"")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`system` is the name of the system's own mirror"),
        "{e}"
    );
    let e = parse(&format!(
        "{}[storage.system_mirror]\nmatch = {{ rotational = false }}\n",
        base.replace("unattended", "wizard")
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("the wizard does not mirror the system"), "{e}");
    let e = parse(&format!(
        "{base}[storage.system_mirror]\nmatch = {{ rotational = false }}\nwipe = true\nsize = 1\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("unknown field `size`"), "{e}");
}
