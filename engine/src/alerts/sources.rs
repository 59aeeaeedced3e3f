//! Events from the monitors: mdadm's `PROGRAM` arguments and smartd's
//! `-M exec` environment, each turned into an [`Event`] (or None for the
//! notices that need no one's attention, which are only logged).

use super::{Event, Kind};

/// mdadm's monitor runs `PROGRAM EVENT MD-DEVICE [COMPONENT]` (mdadm(8),
/// "MONITOR MODE").
pub fn from_mdadm(args: &[String], host: &str) -> Option<Event> {
    let event = args.first()?.as_str();
    let array = args.get(1).map_or("an array", String::as_str);
    let member = args.get(2).map(String::as_str);
    let (kind, subject, message) = match event {
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
                "md marked {} of {array} as failed{}. Run `sudo nasforge-setup replace` to replace it.",
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
}
