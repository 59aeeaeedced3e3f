//! Discovery on fake sysfs/udev/proc trees modelled on real boards.

use nasforge_testkit::board as common;

use nasforge_engine::command::{Ask, Query, SpawnError};
use nasforge_engine::machine::disks::{Disk, InUse, RotationalSource};
use nasforge_engine::machine::power::{self, Throttled};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::machine::uas_quirks;
use nasforge_engine::machine::usb::{self, UsbBridge, UsbDriver};
use nasforge_engine::planner;
use nasforge_engine::runner::{RecordingRunner, RunError, Runner};
use nasforge_engine::spec::{DeviceRecipe, Transport};
use nasforge_engine::steps::{Action, Cmd};
use nasforge_engine::{setup, status};
use std::path::Path;
use std::time::Duration;

fn find<'a>(disks: &'a [Disk], name: &str) -> &'a Disk {
    disks
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} not discovered"))
}

#[test]
fn pi5_with_a_jmb585_hat_shows_four_sata_disks_behind_a_gen3_x1_link() {
    let board = common::board("pi5-jmb585");
    let inv = board.inventory();
    let names: Vec<&str> = inv.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sda", "sdb", "sdc", "sdd", "mmcblk0"]);

    let sda = find(&inv.disks, "sda");
    assert_eq!(sda.size.bytes(), 7_814_037_168 * 512);
    assert_eq!(
        sda.model.as_deref(),
        Some("WDC WD40EFRX-68N32N0"),
        "udev's encoded model, trimmed"
    );
    assert_eq!(sda.serial.as_deref(), Some("WD-WCC7K0000001"));
    assert_eq!(sda.wwn.as_deref(), Some("0x50014ee2b0000001"));
    assert_eq!(sda.transport, Some(Transport::Sata));
    assert!(sda.rotational);
    assert_eq!(sda.rotational_from, RotationalSource::Udev);
    assert_eq!(
        sda.by_id.as_deref(),
        Some("/dev/disk/by-id/wwn-0x50014ee2b0000001"),
        "the WWN link is preferred"
    );
    let c = sda.controller.as_ref().unwrap();
    assert_eq!(
        (c.pci.as_str(), c.vendor, c.device),
        ("0001:01:00.0", 0x197b, 0x0585)
    );
    assert_eq!(c.name.as_deref(), Some("JMicron JMB585"));
    assert_eq!((c.link_mts, c.link_width), (Some(8000), Some(1)));
    assert!(sda.is_blank() && sda.in_use.is_empty());

    let sd = find(&inv.disks, "mmcblk0");
    assert_eq!(sd.transport, Some(Transport::Mmc));
    assert!(sd.in_use.contains(&InUse::Boot), "{:?}", sd.in_use);
    assert!(sd.in_use.contains(&InUse::Mounted {
        device: "mmcblk0p1".into(),
        at: "/boot/firmware".into()
    }));
    assert_eq!(
        sd.contents,
        vec![Signature::PartitionTable {
            scheme: "dos".into()
        }]
    );
    assert_eq!(sd.partitions.len(), 2);
    assert_eq!(
        sd.partitions[0].contents,
        vec![Signature::Filesystem {
            fstype: "vfat".into(),
            label: Some("bootfs".into()),
            uuid: None
        }],
        "partitions are probed at their own offsets"
    );

    let net = inv.network.unwrap();
    assert_eq!(
        (net.interface.as_str(), net.mbit),
        ("eth0", 1000),
        "lo has no device and is skipped"
    );
}

#[test]
fn cm4_with_a_marvell_9215_keeps_removable_disks_and_finds_old_data() {
    let board = common::board("cm4-marvell9215");
    let inv = board.inventory();
    let names: Vec<&str> = inv.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sda",
            "sdb",
            "sdc",
            "sdd",
            "mmcblk0",
            "mmcblk0boot0",
            "mmcblk0boot1"
        ]
    );

    let sda = find(&inv.disks, "sda");
    assert!(sda.removable, "the 9215 reports RM=1 ...");
    assert!(
        sda.in_use.is_empty() && sda.is_blank(),
        "... and that does not make the disk unusable"
    );
    assert!(!sda.rotational);
    let c = sda.controller.as_ref().unwrap();
    assert_eq!(c.name.as_deref(), Some("Marvell 88SE9215"));
    assert!(c.note.as_deref().unwrap().contains("link resets"));
    assert_eq!((c.link_mts, c.link_width), (Some(5000), Some(1)));
    assert_eq!(
        sda.by_id.as_deref(),
        Some("/dev/disk/by-id/ata-KINGSTON_SA400S37240G_50026B7784A1B2C0")
    );

    let sdc = find(&inv.disks, "sdc");
    assert_eq!(
        sdc.contents,
        vec![Signature::Filesystem {
            fstype: "ext4".into(),
            label: Some("backup".into()),
            uuid: Some("3f0f7d0e-5b1c-4e52-9a57-2c1de6a1b0c1".into())
        }]
    );
    assert!(sdc.in_use.is_empty());
    assert_eq!(
        sdc.describe_contents(),
        "an ext4 filesystem labelled 'backup'"
    );

    let sdd = find(&inv.disks, "sdd");
    assert_eq!(
        sdd.contents,
        vec![Signature::MdMember {
            version: "1.2".into(),
            name: Some("oldnas:data".into())
        }]
    );
    assert_eq!(
        sdd.in_use,
        vec![InUse::Held {
            device: "sdd".into(),
            by: "md127".into()
        }]
    );

    for area in ["mmcblk0boot0", "mmcblk0boot1"] {
        assert!(
            find(&inv.disks, area).in_use.contains(&InUse::EmmcBootArea),
            "{area}"
        );
    }
    assert!(find(&inv.disks, "mmcblk0").in_use.contains(&InUse::Boot));
}

#[test]
fn a_pc_with_two_sas_hbas_shows_sixteen_sas_disks_and_the_boot_ssd_in_use() {
    let board = common::board("x86-sas-16");
    let inv = board.inventory();
    let names: Vec<&str> = inv.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sda", "sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh", "sdi", "sdj", "sdk", "sdl",
            "sdm", "sdn", "sdo", "sdp", "sdq"
        ]
    );

    let ssd = find(&inv.disks, "sda");
    assert_eq!(ssd.transport, Some(Transport::Sata));
    assert!(!ssd.rotational);
    assert!(ssd.in_use.contains(&InUse::Boot), "{:?}", ssd.in_use);
    assert!(ssd.in_use.contains(&InUse::Mounted {
        device: "sda1".into(),
        at: "/boot/efi".into()
    }));
    let ahci = ssd.controller.as_ref().unwrap();
    assert_eq!(
        (ahci.pci.as_str(), ahci.name.as_deref()),
        ("0000:00:1f.2", Some("Intel ICH9 AHCI"))
    );

    let data = &inv.disks[1..];
    assert!(
        data.iter().all(|d| d.transport == Some(Transport::Sas)),
        "SATA disks on a SAS HBA hang off SAS: {:?}",
        data.iter()
            .map(|d| (&d.name, d.transport))
            .collect::<Vec<_>>()
    );
    for (disks, pci) in [(&data[..8], "0000:00:03.0"), (&data[8..], "0000:00:04.0")] {
        for d in disks {
            let c = d.controller.as_ref().unwrap();
            assert_eq!(
                (c.pci.as_str(), c.vendor, c.device, c.name.as_deref()),
                (pci, 0x1000, 0x0054, Some("LSI SAS1068")),
                "{}",
                d.name
            );
            assert!(d.is_blank() && d.in_use.is_empty(), "{}", d.name);
        }
    }
    let sdq = find(&inv.disks, "sdq");
    assert_eq!((sdq.major, sdq.minor), (65, 0), "the 17th sd disk");
    assert_eq!(sdq.serial.as_deref(), Some("ZDH1A008"));
    assert_eq!(sdq.size.bytes(), 7_814_037_168 * 512);
    assert_eq!(sdq.physical_block_size, Some(4096));
    assert_eq!(
        sdq.by_id.as_deref(),
        Some("/dev/disk/by-id/wwn-0x5000c500b0000008"),
        "the WWN link is preferred over ata-"
    );
    assert_eq!(
        (sdq.rotational, sdq.rotational_from),
        (true, RotationalSource::Udev)
    );
}

#[test]
fn pi4_usb_bridges_lie_about_rotation_and_udev_wins() {
    let board = common::board("pi4-usb");
    let inv = board.inventory();

    let ssd = find(&inv.disks, "sda");
    assert_eq!(ssd.transport, Some(Transport::Usb));
    assert!(
        !ssd.rotational,
        "queue/rotational says 1, udev's ATA data says 0 rpm"
    );
    assert_eq!(ssd.rotational_from, RotationalSource::Udev);
    assert_eq!(ssd.usb_mbit, Some(5000));
    let b = bridge(ssd);
    assert_eq!((b.id().as_str(), b.port.as_str()), ("152d:0578", "2-1"));
    assert_eq!(
        (b.driver, b.self_powered),
        (None, false),
        "no driver link and no bmAttributes in this tree: unknown, not guessed"
    );
    assert_eq!(ssd.model.as_deref(), Some("Samsung SSD 870 EVO 1TB"));
    assert_eq!(
        ssd.controller.as_ref().unwrap().label(),
        "PCI 1106:3483",
        "the VL805 USB controller, unnamed in the table"
    );

    let hdd = find(&inv.disks, "sdb");
    assert!(hdd.rotational);
    assert_eq!(hdd.rotational_from, RotationalSource::Udev);
    assert_eq!(
        hdd.by_id, None,
        "two enclosures share one by-id link, so neither may use it"
    );

    let boot = find(&inv.disks, "sdc");
    assert_eq!(
        boot.rotational_from,
        RotationalSource::Sysfs,
        "no ATA data through this bridge"
    );
    assert!(boot.in_use.contains(&InUse::Boot));
    assert!(boot.in_use.contains(&InUse::Mounted {
        device: "sdc2".into(),
        at: "/".into()
    }));
    assert!(boot.in_use.contains(&InUse::Mounted {
        device: "sdc1".into(),
        at: "/boot/firmware".into()
    }));
    assert_eq!(
        boot.partitions[1].contents,
        vec![Signature::Filesystem {
            fstype: "ext4".into(),
            label: Some("backup".into()),
            uuid: Some("3f0f7d0e-5b1c-4e52-9a57-2c1de6a1b0c1".into())
        }]
    );
}

fn bridge(disk: &Disk) -> &UsbBridge {
    disk.usb
        .as_ref()
        .unwrap_or_else(|| panic!("{} has no USB bridge", disk.name))
}

#[test]
fn pi4_usb_bridges_are_read_with_their_driver_port_and_power() {
    let board = common::board("pi4-usb-bridges");
    let inv = board.inventory();

    let jmicron = bridge(find(&inv.disks, "sda"));
    assert_eq!(
        (jmicron.id().as_str(), jmicron.name.as_deref()),
        ("357d:7788", Some("JMicron JMS566"))
    );
    assert_eq!(jmicron.driver, Some(UsbDriver::Uas));
    assert_eq!(jmicron.port, "2-1");
    assert!(!jmicron.self_powered && !jmicron.behind_powered_hub);
    assert!(jmicron.powered_by_board());
    assert_eq!(
        uas_quirks::lookup(jmicron.vendor, jmicron.product).map(|k| k.name),
        Some("JMicron JMS566")
    );

    let asmedia = bridge(find(&inv.disks, "sdb"));
    assert_eq!(asmedia.id(), "174c:55aa");
    assert_eq!(asmedia.name.as_deref(), Some("ASMedia ASM1153E"));
    assert_eq!(asmedia.driver, Some(UsbDriver::Uas));
    assert_eq!(asmedia.port, "1-1.4");
    assert!(
        asmedia.powered_by_board(),
        "the VL805's own hub (1-1) calls itself self-powered, but it is the board's"
    );
    assert!(uas_quirks::lookup(asmedia.vendor, asmedia.product).is_none());
    assert_eq!(find(&inv.disks, "sdb").usb_mbit, Some(480));

    let via = bridge(find(&inv.disks, "sdc"));
    assert_eq!(via.id(), "2109:0715");
    assert_eq!(via.name, None, "this bridge has no strings");
    assert_eq!(via.driver, Some(UsbDriver::UsbStorage));
    assert_eq!(via.port, "1-1.3.2");
    assert!(!via.self_powered && via.behind_powered_hub);
    assert!(!via.powered_by_board());
    assert!(uas_quirks::lookup(via.vendor, via.product).is_none());

    assert_eq!(find(&inv.disks, "mmcblk0").usb, None, "not on USB");
}

#[test]
fn two_spinning_disks_on_the_board_s_ports_and_under_voltage_are_warned_about() {
    let board = common::board("pi4-usb-bridges");
    let inv = board.inventory();
    let mut runner = RecordingRunner::default();
    let throttled = power::throttled(&board.host, &mut runner);
    assert_eq!(throttled, Some(Throttled(0x50005)));
    assert!(
        runner.lines.is_empty(),
        "read from sysfs: {:?}",
        runner.lines
    );

    let warnings = power::warnings(&inv, throttled);
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(
            "2 USB hard disks (sda, sdb) draw their power from the board's own USB ports"
        ) && warnings[0].contains("Use a powered hub or disks with their own supply"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].contains("under-voltage now (get_throttled 0x50005)"),
        "{}",
        warnings[1]
    );

    let since_boot = power::warnings(&inv, Some(Throttled(0x50000)));
    assert!(since_boot[1].contains("under-voltage since it booted (get_throttled 0x50000)"));

    let mut one_on_the_board = inv.clone();
    one_on_the_board.disks.retain(|d| d.name != "sdb");
    assert!(
        power::warnings(&one_on_the_board, Some(Throttled(0))).is_empty(),
        "one bus-powered disk, a disk behind a powered hub, no under-voltage"
    );
}

#[test]
fn status_names_each_usb_bridge_its_quirk_and_the_power_warnings() {
    let board = common::writable_copy("pi4-usb-bridges");
    let mut runner = RecordingRunner::default();
    let text = status::collect(&board.host, None, &mut runner).render();
    assert!(
        text.contains(
            "USB disks:\n  sda: 357d:7788 JMicron JMS566, uas, port 2-1, powered by the board; on the UAS problem list (JMicron JMS566), quirk not active\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  sdb: 174c:55aa ASMedia ASM1153E, uas, port 1-1.4, powered by the board\n"),
        "{text}"
    );
    assert!(
        text.contains("  sdc: 2109:0715, usb-storage, port 1-1.3.2, behind a powered hub\n"),
        "{text}"
    );
    assert!(
        text.contains("Power:\n  ! 2 USB hard disks (sda, sdb)"),
        "{text}"
    );
    assert!(
        text.contains("  ! The board is under-voltage now (get_throttled 0x50005)"),
        "{text}"
    );

    std::fs::write(board.host.path(usb::ACTIVE_QUIRKS), "357d:7788:u\n").unwrap();
    std::fs::write(board.host.path(power::GET_THROTTLED), "0\n").unwrap();
    let status = status::collect(&board.host, None, &mut runner);
    let sda = status.usb_disks.iter().find(|u| u.disk == "sda").unwrap();
    assert!(sda.quirk_active);
    let text = status.render();
    assert!(text.contains("(JMicron JMS566), quirk active\n"), "{text}");
    assert!(!text.contains("under-voltage now"), "{text}");
}

#[test]
fn a_missing_device_node_makes_the_disk_unusable_not_blank() {
    let board = common::board("pi5-jmb585");
    std::fs::remove_file(board.node("sdb")).unwrap();
    let inv = board.inventory();
    let sdb = find(&inv.disks, "sdb");
    assert!(
        matches!(&sdb.in_use[..], [InUse::Unreadable { error }] if error.contains("sdb")),
        "{:?}",
        sdb.in_use
    );
}

#[test]
#[ignore = "needs `/` on a block device: scripts/test runs it as root, as CI does"]
fn the_real_host_root_disk_is_the_boot_disk() {
    // On this machine, whatever disk holds `/` must come out as Boot.
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata("/").unwrap().dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys =
        std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).unwrap_or_else(|_| {
            panic!("/ is on {major}:{minor}, not a block device (overlay or network root)")
        });
    let disk_dir = if sys.join("partition").exists() {
        sys.parent().unwrap().to_path_buf()
    } else {
        sys
    };
    let name = disk_dir.file_name().unwrap().to_string_lossy().into_owned();
    let inv =
        nasforge_engine::machine::disks::discover(&nasforge_engine::machine::disks::Host::new("/"))
            .unwrap();
    let disk = inv
        .disks
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("/ is on {name}, a virtual device discovery leaves out"));
    assert!(
        disk.in_use.contains(&InUse::Boot),
        "{name} holds / but is {:?}",
        disk.in_use
    );
}

/// The machine as first boot sees it while a disk enumerates late: every
/// `wait` lets time pass, in which sdd's entry comes (or, if flapping,
/// comes and goes again).
struct LateDisk {
    sys_sdd: std::path::PathBuf,
    target: std::path::PathBuf,
    flapping: bool,
    waits: usize,
    lines: Vec<String>,
}

impl Runner for LateDisk {
    fn apply(&mut self, action: &Action) -> Result<(), RunError> {
        self.lines.push(action.to_string());
        Ok(())
    }

    fn wait(&mut self, _: Duration) {
        self.waits += 1;
        if self.sys_sdd.exists() {
            if self.flapping {
                std::fs::remove_file(&self.sys_sdd).unwrap();
            }
        } else if self.waits == 1 || self.flapping {
            std::os::unix::fs::symlink(&self.target, &self.sys_sdd).unwrap();
        }
    }
}

impl Ask for LateDisk {
    /// SMART is asked of each disk before planning (nothing to say here);
    /// nothing else is.
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
        assert!(
            cmd.to_string().starts_with("smartctl --json -H -A /dev/"),
            "setup queried `{cmd}` while planning"
        );
        Ok(Query::default())
    }
}

fn late_sdd(flapping: bool) -> (common::Board, LateDisk) {
    let board = common::writable_copy("pi5-jmb585");
    let sys_sdd = board.host.path("/sys/block/sdd");
    let target = std::fs::read_link(&sys_sdd).unwrap();
    std::fs::remove_file(&sys_sdd).unwrap();
    let runner = LateDisk {
        sys_sdd,
        target,
        flapping,
        waits: 0,
        lines: vec![],
    };
    (board, runner)
}

const ALL_SATA_RAID5: &str = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = { transport = \"sata\" }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n";

#[test]
fn a_disk_that_appears_late_at_first_boot_is_waited_for_and_listed() {
    let (board, mut runner) = late_sdd(false);
    let recipe = DeviceRecipe::parse(ALL_SATA_RAID5, Path::new("r.toml")).unwrap();
    let mut notes = Vec::new();
    let prepared = setup::prepare(
        &board.host,
        Path::new("r.toml"),
        &recipe,
        &mut runner,
        &mut |n| notes.push(n.to_string()),
    )
    .unwrap();
    let members: Vec<&str> = prepared.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(
        members,
        ["sda", "sdb", "sdc", "sdd"],
        "count = \"all\" got sdd"
    );
    assert_eq!(runner.lines, ["udevadm settle"]);
    assert_eq!(runner.waits, 2, "a change, then two readings that agree");
    assert_eq!(
        notes[0],
        "the disks changed while waiting for them to settle; waiting longer"
    );
    assert_eq!(notes[1], "found 5 disk(s):");
    assert!(
        notes.contains(&"  sdd: WDC WD40EFRX-68N32N0 (WD-WCC7K0000004), 4 TB sata HDD".to_string()),
        "{notes:#?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("  mmcblk0: ")
            && n.ends_with("(never used: it holds the running system's root filesystem)")),
        "the boot disk is listed with the reason it is left alone: {notes:#?}"
    );
}

#[test]
fn disks_that_never_settle_are_waited_for_only_so_long() {
    let (board, mut runner) = late_sdd(true);
    let mut notes = Vec::new();
    setup::settled_inventory(&board.host, &mut runner, &mut |n| notes.push(n.to_string())).unwrap();
    let most = (setup::DISKS_WAIT_AT_MOST.as_secs() / setup::DISKS_STABLE_AFTER.as_secs()) as usize;
    assert_eq!(runner.waits, most);
    assert!(
        notes
            .last()
            .unwrap()
            .contains("still changing after 30 s; planning with the ones found now"),
        "{notes:#?}"
    );
}

#[test]
fn what_udev_probed_on_a_whole_disk_counts_as_data() {
    let board = common::writable_copy("pi5-jmb585");
    let add = |devnum: &str, lines: &str| {
        let path = board.host.path("/run/udev/data").join(devnum);
        let record = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, record + lines).unwrap();
    };
    // On the board, udev's blkid builtin ran at the disk's last event; its
    // zeroed fixture node shows nothing, so only udev can tell.
    add(
        "b8:16",
        "E:ID_FS_VERSION=1.3.00\nE:ID_FS_TYPE=isw_raid_member\nE:ID_FS_USAGE=raid\n",
    );
    add(
        "b8:32",
        "E:ID_FS_LABEL=old_nas\nE:ID_FS_LABEL_ENC=old\\x20nas\nE:ID_FS_UUID=1b4e28ba-2fa1-11d2-883f-0016d3cca427\nE:ID_FS_TYPE=jfs\nE:ID_FS_USAGE=filesystem\n",
    );
    let inv = board.inventory();
    let sdb = find(&inv.disks, "sdb");
    assert_eq!(
        sdb.contents,
        [Signature::Probed {
            blkid_type: "isw_raid_member".into(),
            usage: Some("raid".into())
        }]
    );
    assert_eq!(
        find(&inv.disks, "sdc").contents,
        [Signature::Filesystem {
            fstype: "jfs".into(),
            label: Some("old nas".into()),
            uuid: Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427".into())
        }]
    );
    assert!(find(&inv.disks, "sda").is_blank());

    let recipe = DeviceRecipe::parse(
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = { transport = \"sata\" }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n",
        Path::new("recipe.toml"),
    )
    .unwrap();
    let refusals: Vec<String> = planner::plan(recipe.storage.as_ref().unwrap(), &[], &inv)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    for expected in [
        "array 'data': sdb: holds an Intel RST (IMSM) fake-RAID member (isw_raid_member) and the recipe does not allow erasing it",
        "array 'data': sdc: holds a jfs filesystem labelled 'old nas' and the recipe does not allow erasing it",
    ] {
        assert!(
            refusals.iter().any(|r| r.starts_with(expected)),
            "{refusals:#?}"
        );
    }
}

#[test]
fn bytes_no_probe_recognises_at_either_end_count_as_data() {
    use std::os::unix::fs::FileExt;
    let board = common::board("pi5-jmb585");
    let scribble = |node: &str, from_end: bool| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(board.node(node))
            .unwrap();
        let size = file.metadata().unwrap().len();
        let at = if from_end {
            size - 300 * 1024
        } else {
            300 * 1024
        };
        file.write_all_at(b"\x01 leftover bytes \x7f", at).unwrap();
    };
    scribble("sdb", true);
    scribble("sdc", false);
    // Beyond the first MiB, where nothing is looked for: still blank.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(board.node("sda"))
        .unwrap();
    file.write_all_at(b"\x01", 2 << 20).unwrap();

    let inv = board.inventory();
    assert_eq!(
        find(&inv.disks, "sdb").contents,
        [Signature::Unrecognised {
            first_mib: false,
            last_mib: true
        }]
    );
    assert_eq!(
        find(&inv.disks, "sdc").describe_contents(),
        "data no probe recognises in its first MiB"
    );
    assert!(find(&inv.disks, "sda").is_blank());
    assert!(find(&inv.disks, "sdd").is_blank());
}

#[test]
fn without_util_linux_s_probe_no_disk_counts_as_blank() {
    let board = common::writable_copy("pi5-jmb585");
    let root = board.host.root.clone();
    let recipe = root.join("recipe.toml");
    std::fs::write(
        &recipe,
        "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = { transport = \"sata\" }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n",
    )
    .unwrap();
    // A PATH where wipefs cannot be found: what the disks hold is unknown.
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nasforge-setup"))
        .args(["plan", "--dry-run", "--root"])
        .arg(&root)
        .arg("--recipe")
        .arg(&recipe)
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("4 TB sata HDD (never used: its contents cannot be read (")
            && stderr.contains("dev/sdb: wipefs (util-linux) could not be started: No such file")
            && stderr.contains("but 0 are usable"),
        "{stderr}"
    );
}
