//! The parsers against text in OpenZFS 2.1's format; where each fixture
//! came from is in engine/tests/data/zfs/README.md.

use super::*;
use crate::machine::disks::Disk;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/zfs")
            .join(name),
    )
    .unwrap()
}

fn report(name: &str) -> PoolReport {
    parse_zpool_status(&fixture(name)).unwrap_or_else(|| panic!("{name} did not parse"))
}

#[test]
fn a_healthy_raidz1_after_a_scrub() {
    let r = report("status-raidz1-healthy.txt");
    assert_eq!((r.pool.as_str(), r.state.as_str()), ("tank", "ONLINE"));
    assert_eq!(r.problem, None);
    assert_eq!(
        r.scan,
        Scan::Finished {
            what: "scrub".into(),
            repaired: "0B".into(),
            seconds: 1,
            errors: 0,
            on: "Sun Nov 29 03:24:05 2026".into(),
        }
    );
    let names: Vec<(&str, usize)> = r.vdevs.iter().map(|v| (v.name.as_str(), v.level)).collect();
    assert_eq!(
        names,
        [
            ("tank", 0),
            ("raidz1-0", 1),
            ("/dev/disk/by-id/wwn-0x50014ee2b0000001-part1", 2),
            ("/dev/disk/by-id/wwn-0x50014ee2b0000002-part1", 2),
            ("/dev/disk/by-id/wwn-0x50014ee2b0000003-part1", 2),
        ]
    );
    assert_eq!(r.disks().len(), 3);
    assert_eq!(r.errors.as_deref(), Some("No known data errors"));
    assert!(problems(&r, &[]).is_empty());
}

#[test]
fn a_missing_disk_is_named_by_its_last_path_and_the_planned_disk() {
    let r = report("status-raidz1-degraded-scrubbing.txt");
    assert_eq!(r.state, "DEGRADED");
    assert_eq!(
        r.problem.as_deref(),
        Some(
            "One or more devices could not be opened.  Sufficient replicas exist for the pool to continue functioning in a degraded state."
        )
    );
    assert_eq!(
        r.scan,
        Scan::Running {
            what: "scrub".into(),
            percent: Some(22.85),
            paused: false,
            since: "Sun Nov 29 03:00:01 2026".into(),
        }
    );
    let missing = r.disks()[1];
    assert_eq!(missing.name, "9876543210987654321");
    assert_eq!(
        missing.path(),
        Some("/dev/disk/by-id/wwn-0x50014ee2b0000002-part1")
    );
    let disk = Disk {
        name: "sdb".into(),
        model: Some("WDC WD40EFRX-68N32N0".into()),
        serial: Some("WD-WCC7K0000002".into()),
        by_id: Some("/dev/disk/by-id/wwn-0x50014ee2b0000002".into()),
        links: Vec::new(),
        ..test_disk()
    };
    assert_eq!(
        problems(&r, &[&disk]),
        [
            "raidz1-0: DEGRADED",
            "the disk that was sdb (WDC WD40EFRX-68N32N0, serial WD-WCC7K0000002): UNAVAIL, was /dev/disk/by-id/wwn-0x50014ee2b0000002-part1"
        ]
    );
    // A pool made elsewhere names the disk by another of its links.
    let elsewhere = Disk {
        by_id: Some("/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000002".into()),
        links: vec![
            "/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K0000002".into(),
            "/dev/disk/by-id/wwn-0x50014ee2b0000002".into(),
        ],
        ..disk
    };
    assert!(
        problems(&r, &[&elsewhere])[1].starts_with("the disk that was sdb (WDC WD40EFRX-68N32N0")
    );
}

#[test]
fn error_counts_and_a_scrub_of_more_than_a_day() {
    let r = report("status-mirrors-checksum-errors.txt");
    assert_eq!(
        r.scan,
        Scan::Finished {
            what: "scrub".into(),
            repaired: "1.50M".into(),
            seconds: 86_400 + 2 * 3600 + 3 * 60 + 4,
            errors: 2,
            on: "Sun Nov  1 04:00:00 2026".into(),
        }
    );
    let counted: Vec<(u64, u64, u64)> = r
        .disks()
        .iter()
        .map(|v| (v.read, v.write, v.cksum))
        .collect();
    assert_eq!(counted, [(0, 0, 0), (0, 0, 12), (0, 0, 0), (3, 0, 0)]);
    assert_eq!(
        r.disks().len(),
        4,
        "mirror-0 and mirror-1 are groups, not disks"
    );
    assert_eq!(
        r.errors.as_deref(),
        Some("2 data errors, use '-v' for a list")
    );
    let found = problems(&r, &[]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].ends_with("ONLINE, 0 read, 0 write, 12 checksum errors"),
        "{found:?}"
    );
}

#[test]
fn a_resilver_and_the_disk_it_rebuilds_onto() {
    let r = report("status-raidz1-resilvering.txt");
    assert_eq!(
        r.scan,
        Scan::Running {
            what: "resilver".into(),
            percent: Some(11.71),
            paused: false,
            since: "Mon Nov 30 10:15:00 2026".into(),
        }
    );
    let new = r
        .disks()
        .into_iter()
        .find(|v| v.note.as_deref() == Some("(resilvering)"))
        .unwrap();
    assert_eq!(new.name, "/dev/disk/by-id/wwn-0x50014ee2b0000009-part1");
    assert_eq!(new.level, 3);
    assert_eq!(
        r.scan.render(),
        "resilver in progress 12% (since Mon Nov 30 10:15:00 2026)"
    );
}

#[test]
fn a_new_stripe_was_never_scrubbed() {
    let r = report("status-stripe-new.txt");
    assert_eq!(r.scan, Scan::None);
    assert_eq!(r.disks().len(), 2);
    assert!(r.disks().iter().all(|d| d.level == 1));
}

#[test]
fn list_output_in_bytes() {
    assert_eq!(
        parse_zpool_list(&fixture("list-tank.txt")),
        [PoolSpace {
            name: "tank".into(),
            size: Size(11_992_103_378_944),
            alloc: Size(1_019_215_872),
            free: Size(11_991_084_163_072),
            health: "ONLINE".into(),
        }]
    );
    let datasets = parse_zfs_list(&fixture("zfs-list-tank.txt"));
    let quotas: Vec<(&str, Option<Size>)> = datasets
        .iter()
        .map(|d| (d.name.as_str(), d.quota))
        .collect();
    assert_eq!(
        quotas,
        [
            ("tank", None),
            ("tank/media", Some(Size(107_374_182_400))),
            ("tank/backup", None)
        ]
    );
    assert_eq!(datasets[1].mountpoint, "/srv/tank/media");
}

fn test_disk() -> Disk {
    serde_json::from_value(serde_json::json!({
        "name": "sdx", "major": 8, "minor": 0, "size": "4TB", "logical_block_size": 512,
        "model": null, "serial": null, "wwn": null, "transport": null, "rotational": true,
        "rotational_from": "sysfs", "removable": false, "controller": null, "usb_mbit": null,
        "by_id": null, "partitions": [], "contents": [], "in_use": []
    }))
    .unwrap()
}

#[test]
fn hot_spares_are_read_apart_from_the_vdevs() {
    let r = report("status-raidz2x2-spare-in-use.txt");
    assert_eq!(r.state, "DEGRADED");
    assert_eq!(
        r.problem.as_deref(),
        Some(
            "One or more devices are faulted in response to persistent errors. Sufficient replicas exist for the pool to continue functioning in a degraded state."
        )
    );
    let rows: Vec<(&str, &str, usize, Option<&str>)> = r
        .spares
        .iter()
        .map(|v| {
            (
                v.name.as_str(),
                v.state.as_str(),
                v.level,
                v.note.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "/dev/disk/by-id/wwn-0x5000c500b0000001-part1",
                "INUSE",
                1,
                Some("currently in use")
            ),
            (
                "/dev/disk/by-id/wwn-0x5000c500b0000002-part1",
                "AVAIL",
                1,
                None
            ),
        ]
    );
    // The spare ZED put in is a disk of raidz2-0 as well, beside the one
    // it stands in for.
    assert_eq!(r.disks().len(), 9);
    assert_eq!(r.every_disk().len(), 11);
    assert_eq!(
        problems(&r, &[]),
        [
            "raidz2-0: DEGRADED",
            "spare-1: DEGRADED",
            "/dev/disk/by-id/wwn-0x50014ee2c0000002-part1: FAULTED, 12 read, 0 write, 0 checksum errors, too many errors"
        ],
        "the spares are not problems of their own"
    );
    assert_eq!(
        spares(&r, &[]),
        [
            "/dev/disk/by-id/wwn-0x5000c500b0000001-part1: in use, standing in for a failed disk",
            "/dev/disk/by-id/wwn-0x5000c500b0000002-part1: available"
        ]
    );
}
