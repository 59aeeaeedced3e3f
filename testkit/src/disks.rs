//! Disks as discovery reports them, for planner tests: a blank USB hard
//! disk, and one holding an ext4 filesystem of someone's files.

use nasforge_engine::machine::disks::{Disk, Inventory, Partition, RotationalSource};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::size::Size;
use nasforge_engine::spec::Transport;

/// A blank USB hard disk behind a 5 Gbit/s bridge, with a by-id link.
pub fn usb(name: &str, size: u64, model: &str) -> Disk {
    Disk {
        name: name.into(),
        major: 8,
        minor: 0,
        size: Size(size),
        logical_block_size: 512,
        physical_block_size: None,
        model: Some(model.into()),
        serial: Some(format!("SN-{name}")),
        wwn: None,
        transport: Some(Transport::Usb),
        rotational: true,
        rotational_from: RotationalSource::Sysfs,
        removable: false,
        controller: None,
        usb_mbit: Some(5000),
        usb: None,
        by_id: Some(format!("/dev/disk/by-id/usb-TEST_{name}")),
        links: Vec::new(),
        partitions: vec![],
        contents: vec![],
        in_use: vec![],
    }
}

/// A machine with these disks and nothing else known about it.
pub fn inventory(disks: Vec<Disk>) -> Inventory {
    Inventory {
        disks,
        ..Inventory::default()
    }
}

pub fn ext4(label: &str, uuid: &str) -> Signature {
    Signature::Filesystem {
        fstype: "ext4".into(),
        label: Some(label.into()),
        uuid: Some(uuid.into()),
    }
}

/// A USB disk of `model` with a GPT and one ext4 partition labelled
/// "photos" filling it.
pub fn photos(name: &str, size: u64, model: &str) -> Disk {
    let mut d = usb(name, size, model);
    d.contents = vec![Signature::PartitionTable {
        scheme: "gpt".into(),
    }];
    d.partitions = vec![Partition {
        name: format!("{name}1"),
        number: 1,
        start: 1 << 20,
        size: Size(size - (2 << 20)),
        contents: vec![ext4("photos", "0b6d3c9e-1111-4222-8333-444455556666")],
    }];
    d
}

/// A recipe's pool over the blank disks of model "Blank*" (the largest
/// holds the parity), joined by the kept disk of model "Elements*".
pub const POOL_RECIPE: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "pool"
level = "pool"
parity = 1
disks = { transport = "usb", model = "Blank*" }
filesystem = "ext4"
mount = "/srv/pool"
keep = ["photos"]
[[storage.disks]]
name = "photos"
match = { model = "Elements*" }
keep = true
mount = "/srv/photos"
"#;
