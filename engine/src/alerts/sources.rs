//! Events from the monitors: mdadm's `PROGRAM` arguments, smartd's
//! `-M exec` environment and ZED's zedlet environment, each turned into an
//! [`Event`] (or None for the notices that need no one's attention, which
//! are only logged).

use super::{Event, Kind};
use crate::machine::zfs_report::{Scan, parse_zpool_status};

/// `/dev/md/system`, as mdadm.conf names it.
pub fn is_system_mirror(array: &str) -> bool {
    array.trim_start_matches("/dev/md/") == crate::spec::SYSTEM_MIRROR_NAME
}

/// mdadm's monitor runs `PROGRAM EVENT MD-DEVICE [COMPONENT]` (mdadm(8),
/// "MONITOR MODE").
pub fn from_mdadm(args: &[String], host: &str) -> Option<Event> {
    let event = args.first()?.as_str();
    let array = args.get(1).map_or("an array", String::as_str);
    let member = args.get(2).map(String::as_str);
    let (kind, subject, message) = match event {
        "DegradedArray" | "Fail" if is_system_mirror(array) => (
            Kind::Degraded,
            format!("the system's mirror {array} lost a disk"),
            format!(
                "{array}, the RAID1 the system runs from, is running on one SSD{}: the PC still boots from it, but one more failure stops it. Put a new SSD in and add it as the README's \"The system on two SSDs\" says, and do not reboot until `sudo nasforge-setup status` calls {array} healthy.",
                member.map(|m| format!(" ({m} failed)")).unwrap_or_default()
            ),
        ),
        "DegradedArray" => (
            Kind::Degraded,
            format!("{array} is degraded"),
            format!(
                "{array} is running without one or more of its members: one more failure may lose data. Run `sudo nasforge-setup` or `sudo nasforge-setup replace` to put a disk in."
            ),
        ),
        "Fail" | "FailSpare" => (
            Kind::MemberFailed,
            format!("{} of {array} failed", member.unwrap_or("a member")),
            format!(
                "md marked {} of {array} as failed{}. If the disk only dropped out (a USB bridge that reset, a loose cable or power lead) and comes back, md takes it back on its own and copies only what changed while it was away; otherwise run `sudo nasforge-setup replace` to replace it.",
                member.unwrap_or("a member"),
                if event == "FailSpare" {
                    " while it was being rebuilt onto"
                } else {
                    ""
                }
            ),
        ),
        "DeviceDisappeared" => (
            Kind::Degraded,
            format!("{array} disappeared"),
            format!(
                "{array} is no longer there: too many members may be missing to run it. Check the disks and cables, then `sudo nasforge-setup status`."
            ),
        ),
        "SparesMissing" => (
            Kind::Degraded,
            format!("{array} has fewer spares than it should"),
            format!("{array} is missing a spare disk mdadm.conf lists for it."),
        ),
        "RebuildStarted" => (
            Kind::RebuildStarted,
            format!("{array} is rebuilding"),
            format!(
                "md started rebuilding {array}; `sudo nasforge-setup status` shows how far it got."
            ),
        ),
        "RebuildFinished" => (
            Kind::RebuildFinished,
            format!("{array} finished rebuilding"),
            format!(
                "md finished rebuilding (or checking) {array}; `sudo nasforge-setup status` says whether it is healthy."
            ),
        ),
        "SpareActive" => (
            Kind::RebuildFinished,
            format!("{} is active in {array}", member.unwrap_or("a disk")),
            format!(
                "{} was rebuilt and now works as a member of {array}.",
                member.unwrap_or("a disk")
            ),
        ),
        "TestMessage" => (
            Kind::Test,
            format!("mdadm test for {array}"),
            format!("mdadm's monitor sent a test message for {array}."),
        ),
        // NewArray, MoveSpare, Rebuild20/40/60/80: progress, logged only.
        _ => return None,
    };
    Some(Event::new(kind, host, &subject, &message))
}

/// smartd's warning, from the environment it sets for `-M exec`
/// (smartd.conf(5): SMARTD_FAILTYPE, SMARTD_DEVICE, SMARTD_MESSAGE, ...).
pub fn from_smartd(env: &dyn Fn(&str) -> Option<String>, host: &str) -> Option<Event> {
    let failtype = env("SMARTD_FAILTYPE")?;
    let device = env("SMARTD_DEVICESTRING")
        .or_else(|| env("SMARTD_DEVICE"))
        .unwrap_or_else(|| "a disk".into());
    let summary = env("SMARTD_MESSAGE").unwrap_or_default();
    let full = env("SMARTD_FULLMESSAGE").unwrap_or_else(|| summary.clone());
    let (kind, subject) = match failtype.as_str() {
        "Health" | "FailedHealthCheck" | "FailedOpenDevice" => (
            Kind::SmartFailure,
            format!("{device} reports it is failing"),
        ),
        "Temperature" => (Kind::Temperature, format!("{device} is too hot")),
        "EmailTest" => (Kind::Test, format!("smartd test for {device}")),
        // Usage, SelfTest, ErrorCount, CurrentPendingSector,
        // OfflineUncorrectableSector, FailedReadSmart*: errors that come
        // before a failure.
        _ => (Kind::SmartPrefail, format!("{device} reports {failtype}")),
    };
    let message = if full.trim().is_empty() {
        format!("smartd reported {failtype} for {device}.")
    } else {
        full
    };
    Some(Event::new(kind, host, &subject, &message))
}

/// Whether the ZED event in `subclass` is judged with the pool's
/// `zpool status -P -p` (a finished scrub is news only when it found
/// something).
pub fn zed_needs_status(subclass: &str) -> bool {
    matches!(subclass, "scrub_finish" | "resilver_finish")
}

/// ZED's event, from the environment it gives a zedlet (zed(8), the
/// zedlets of OpenZFS 2.1: ZEVENT_SUBCLASS, ZEVENT_POOL, ZEVENT_VDEV_PATH,
/// ZEVENT_VDEV_STATE_STR); `status` is the pool's `zpool status -P -p`
/// for the events [`zed_needs_status`] names.
pub fn from_zed(
    env: &dyn Fn(&str) -> Option<String>,
    status: Option<&str>,
    host: &str,
) -> Option<Event> {
    let subclass = env("ZEVENT_SUBCLASS")
        .or_else(|| env("ZEVENT_CLASS").and_then(|c| c.rsplit('.').next().map(str::to_string)))?;
    let pool = env("ZEVENT_POOL").unwrap_or_else(|| "a pool".into());
    let disk = env("ZEVENT_VDEV_PATH").unwrap_or_else(|| "a disk".into());
    let look = format!("`sudo zpool status -v {pool}` shows the pool's disks and errors.");
    let replace = format!(
        "To replace the disk: `sudo zpool replace {pool} {disk} /dev/disk/by-id/NEW-DISK`."
    );
    let (kind, subject, message) = match subclass.as_str() {
        "statechange" => {
            let state = env("ZEVENT_VDEV_STATE_STR")?;
            let why = match state.as_str() {
                "FAULTED" => "has too many I/O errors, and ZFS stopped using it",
                "DEGRADED" => "has too many checksum errors, and ZFS trusts it no more",
                "REMOVED" => "was removed",
                "UNAVAIL" => "cannot be opened",
                // ONLINE, OFFLINE: a disk back, or taken out on purpose.
                _ => return None,
            };
            let kind = if state == "DEGRADED" {
                Kind::Degraded
            } else {
                Kind::MemberFailed
            };
            (
                kind,
                format!("{disk} of pool {pool} is {state}"),
                format!(
                    "{disk} {why}: pool {pool} runs without it, and one more failure may lose data. {look} {replace}"
                ),
            )
        }
        "resilver_start" => (
            Kind::RebuildStarted,
            format!("pool {pool} is resilvering"),
            format!("ZFS started rebuilding pool {pool} onto a disk. {look}"),
        ),
        "resilver_finish" => {
            let found = status.and_then(scan_errors);
            (
                Kind::RebuildFinished,
                format!("pool {pool} finished resilvering"),
                format!(
                    "ZFS finished rebuilding pool {pool}{}. {look}",
                    found.map(|e| format!(", {e}")).unwrap_or_default()
                ),
            )
        }
        "scrub_finish" => {
            let found = status.and_then(scan_errors)?;
            (
                Kind::DataErrors,
                format!("the scrub of pool {pool} found errors"),
                format!("The monthly scrub of pool {pool} finished: {found}. {look}"),
            )
        }
        "checksum" | "io" | "data" => {
            let what = match subclass.as_str() {
                "checksum" => format!("{disk} returned data that failed its checksum"),
                "io" => format!("{disk} failed to read or write"),
                _ => "ZFS found data it cannot repair".to_string(),
            };
            (
                Kind::DataErrors,
                format!("{subclass} errors in pool {pool}"),
                format!(
                    "{what} (pool {pool}). ZFS repairs what a second copy or parity covers; errors that keep coming mean a failing disk or cable. {look}"
                ),
            )
        }
        _ => return None,
    };
    Some(Event::new(kind, host, &subject, &message))
}

/// What a finished scan or the pool's state says went wrong, in words;
/// None when the pool is healthy and the scan found nothing.
fn scan_errors(status: &str) -> Option<String> {
    let report = parse_zpool_status(status)?;
    let mut found = Vec::new();
    if let Scan::Finished {
        repaired, errors, ..
    } = &report.scan
    {
        if *errors > 0 {
            found.push(format!("{errors} errors it could not repair"));
        }
        if repaired != "0B" {
            found.push(format!("{repaired} repaired"));
        }
    }
    if report.state != "ONLINE" {
        found.push(format!("the pool is {}", report.state));
    }
    if let Some(e) = report
        .errors
        .as_deref()
        .filter(|e| *e != "No known data errors")
    {
        found.push(e.to_string());
    }
    (!found.is_empty()).then(|| found.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mdadm(args: &[&str]) -> Option<Event> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        from_mdadm(&args, "nas")
    }

    #[test]
    fn mdadm_events_map_to_kinds() {
        let cases = [
            (&["DegradedArray", "/dev/md/data"][..], Some(Kind::Degraded)),
            (
                &["Fail", "/dev/md/data", "/dev/sdb1"][..],
                Some(Kind::MemberFailed),
            ),
            (
                &["FailSpare", "/dev/md/data", "/dev/sdd1"][..],
                Some(Kind::MemberFailed),
            ),
            (
                &["RebuildStarted", "/dev/md/data"][..],
                Some(Kind::RebuildStarted),
            ),
            (
                &["RebuildFinished", "/dev/md/data"][..],
                Some(Kind::RebuildFinished),
            ),
            (
                &["SpareActive", "/dev/md/data", "/dev/sdd1"][..],
                Some(Kind::RebuildFinished),
            ),
            (
                &["DeviceDisappeared", "/dev/md/data"][..],
                Some(Kind::Degraded),
            ),
            (&["TestMessage", "/dev/md/data"][..], Some(Kind::Test)),
            (&["Rebuild40", "/dev/md/data"][..], None),
            (&["NewArray", "/dev/md/data"][..], None),
            (&[][..], None),
        ];
        for (args, want) in cases {
            assert_eq!(mdadm(args).map(|e| e.kind), want, "{args:?}");
        }
        let e = mdadm(&["Fail", "/dev/md/system", "/dev/nvme0n1p2"]).unwrap();
        assert_eq!(e.kind, Kind::Degraded);
        assert_eq!(e.subject, "the system's mirror /dev/md/system lost a disk");
        assert!(
            e.message
                .contains("running on one SSD (/dev/nvme0n1p2 failed)")
                && e.message.contains("The system on two SSDs"),
            "{}",
            e.message
        );
        let e = mdadm(&["Fail", "/dev/md/data", "/dev/sdb1"]).unwrap();
        assert_eq!(e.subject, "/dev/sdb1 of /dev/md/data failed");
        assert!(
            e.message.contains("nasforge-setup replace"),
            "{}",
            e.message
        );
    }

    #[test]
    fn smartd_environment_maps_to_kinds() {
        let run = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            from_smartd(
                &|name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
                "nas",
            )
        };
        let e = run(&[
            ("SMARTD_FAILTYPE", "Health"),
            ("SMARTD_DEVICE", "/dev/sda"),
            ("SMARTD_DEVICESTRING", "/dev/sda [SAT]"),
            (
                "SMARTD_MESSAGE",
                "FAILED SMART self-check. BACK UP DATA NOW!",
            ),
        ])
        .unwrap();
        assert_eq!(e.kind, Kind::SmartFailure);
        assert_eq!(e.subject, "/dev/sda [SAT] reports it is failing");
        assert_eq!(e.message, "FAILED SMART self-check. BACK UP DATA NOW!");
        for (failtype, kind) in [
            ("Temperature", Kind::Temperature),
            ("CurrentPendingSector", Kind::SmartPrefail),
            ("OfflineUncorrectableSector", Kind::SmartPrefail),
            ("FailedOpenDevice", Kind::SmartFailure),
            ("EmailTest", Kind::Test),
        ] {
            let e = run(&[("SMARTD_FAILTYPE", failtype), ("SMARTD_DEVICE", "/dev/sdb")]).unwrap();
            assert_eq!(e.kind, kind, "{failtype}");
            assert!(
                e.message.contains(failtype) || kind != Kind::SmartPrefail,
                "{}",
                e.message
            );
        }
        assert!(run(&[("SMARTD_DEVICE", "/dev/sdb")]).is_none());
    }

    fn zed(vars: &[(&str, &str)], status: Option<&str>) -> Option<Event> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_zed(
            &|name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            status,
            "nas",
        )
    }

    fn zfs_fixture(name: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/zfs")
                .join(name),
        )
        .unwrap()
    }

    const DISK: &str = "/dev/disk/by-id/wwn-0x50014ee2b0000002-part1";

    #[test]
    fn zed_state_changes_map_to_degraded_and_failed_members() {
        for (state, kind) in [
            ("FAULTED", Some(Kind::MemberFailed)),
            ("UNAVAIL", Some(Kind::MemberFailed)),
            ("REMOVED", Some(Kind::MemberFailed)),
            ("DEGRADED", Some(Kind::Degraded)),
            ("ONLINE", None),
            ("OFFLINE", None),
        ] {
            let e = zed(
                &[
                    ("ZEVENT_CLASS", "resource.fs.zfs.statechange"),
                    ("ZEVENT_SUBCLASS", "statechange"),
                    ("ZEVENT_POOL", "tank"),
                    ("ZEVENT_VDEV_PATH", DISK),
                    ("ZEVENT_VDEV_STATE_STR", state),
                ],
                None,
            );
            assert_eq!(e.as_ref().map(|e| e.kind), kind, "{state}");
            if let Some(e) = e {
                assert_eq!(e.subject, format!("{DISK} of pool tank is {state}"));
                assert!(
                    e.message.contains(&format!(
                        "zpool replace tank {DISK} /dev/disk/by-id/NEW-DISK"
                    )),
                    "{}",
                    e.message
                );
            }
        }
    }

    #[test]
    fn zed_resilvers_and_errors() {
        let kind = |vars: &[(&str, &str)], status: Option<&str>| zed(vars, status).map(|e| e.kind);
        let pool = ("ZEVENT_POOL", "tank");
        assert_eq!(
            kind(&[("ZEVENT_SUBCLASS", "resilver_start"), pool], None),
            Some(Kind::RebuildStarted)
        );
        let healthy = zfs_fixture("status-raidz1-healthy.txt");
        let e = zed(
            &[("ZEVENT_SUBCLASS", "resilver_finish"), pool],
            Some(&healthy),
        )
        .unwrap();
        assert_eq!(e.kind, Kind::RebuildFinished);
        assert_eq!(e.subject, "pool tank finished resilvering");
        for class in ["checksum", "io", "data"] {
            assert_eq!(
                kind(
                    &[("ZEVENT_SUBCLASS", class), pool, ("ZEVENT_VDEV_PATH", DISK)],
                    None
                ),
                Some(Kind::DataErrors),
                "{class}"
            );
        }
        // Only the class, as ZED also sets it: ereport.fs.zfs.checksum.
        assert_eq!(
            kind(&[("ZEVENT_CLASS", "ereport.fs.zfs.checksum"), pool], None),
            Some(Kind::DataErrors)
        );
        for routine in ["history_event", "config_sync", "pool_import", "scrub_start"] {
            assert_eq!(
                kind(&[("ZEVENT_SUBCLASS", routine), pool], None),
                None,
                "{routine}"
            );
        }
        assert_eq!(kind(&[pool], None), None);
    }

    #[test]
    fn a_scrub_that_found_nothing_is_only_logged() {
        let scrub = [("ZEVENT_SUBCLASS", "scrub_finish"), ("ZEVENT_POOL", "tank")];
        let healthy = zfs_fixture("status-raidz1-healthy.txt");
        assert!(zed(&scrub, Some(&healthy)).is_none());
        let bad = zfs_fixture("status-mirrors-checksum-errors.txt");
        let e = zed(&scrub, Some(&bad)).unwrap();
        assert_eq!(e.kind, Kind::DataErrors);
        assert!(
            e.message.contains(
                "2 errors it could not repair; 1.50M repaired; 2 data errors, use '-v' for a list"
            ),
            "{}",
            e.message
        );
        assert!(zed_needs_status("scrub_finish") && !zed_needs_status("checksum"));
    }
}
