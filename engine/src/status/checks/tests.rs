use super::*;

/// Real smartctl output: see engine/tests/data/smartctl/README.md.
const QEMU_ATA: &str = include_str!("../../../tests/data/smartctl/qemu-ata-selftests.json");

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_newest_self_test_of_real_smartctl_output_is_the_extended_one() {
    let log = last_self_test(&json(QEMU_ATA)).unwrap();
    assert_eq!(
        log,
        SelfTestLog::Last(SelfTest {
            kind: "extended".into(),
            result: "Completed without error".into(),
            passed: Some(true),
            hours: Some(4660),
        })
    );
    assert_eq!(
        log.render(),
        "last self-test: extended, passed at 4660 hours"
    );
}

#[test]
fn a_failed_an_empty_and_a_missing_self_test_log_read_as_such() {
    let failed = json(
        r#"{"ata_smart_self_test_log":{"standard":{"revision":1,"table":[{"type":{"value":1,"string":"Short offline"},"status":{"value":121,"string":"Completed: read failure","remaining_percent":90,"passed":false},"lifetime_hours":31022}],"count":1}}}"#,
    );
    assert_eq!(
        last_self_test(&failed).unwrap().render(),
        "last self-test: short, FAILED (Completed: read failure) at 31022 hours"
    );
    let empty = json(r#"{"ata_smart_self_test_log":{"standard":{"revision":1,"count":0}}}"#);
    assert_eq!(last_self_test(&empty), Some(SelfTestLog::Empty));
    assert_eq!(SelfTestLog::Empty.render(), "last self-test: none yet");
    assert_eq!(
        last_self_test(&json(r#"{"smart_status":{"passed":true}}"#)),
        None
    );
}

/// A fake /sys/block/<md>/md with the given attributes.
fn md_tree(attrs: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("sys/block/md127/md");
    std::fs::create_dir_all(&md).unwrap();
    for (name, value) in attrs {
        std::fs::write(md.join(name), format!("{value}\n")).unwrap();
    }
    let host = Host::new(dir.path());
    (dir, host)
}

#[test]
fn a_finished_check_reports_its_mismatches() {
    let (_dir, host) = md_tree(&[
        ("sync_action", "idle"),
        ("last_sync_action", "check"),
        ("mismatch_cnt", "0"),
        ("sync_completed", "none"),
    ]);
    let scrub = read_scrub(&host, "md127").unwrap();
    assert_eq!(scrub.render(), "last scrub: check, 0 mismatches");

    let (_dir, host) = md_tree(&[
        ("sync_action", "idle"),
        ("last_sync_action", "repair"),
        ("mismatch_cnt", "128"),
    ]);
    assert_eq!(
        read_scrub(&host, "md127").unwrap().render(),
        "last scrub: repair, 128 sectors MISMATCHED"
    );
}

#[test]
fn a_running_check_shows_its_progress() {
    let (_dir, host) = md_tree(&[
        ("sync_action", "check"),
        ("last_sync_action", "resync"),
        ("mismatch_cnt", "0"),
        ("sync_completed", "3125 / 7812"),
    ]);
    assert_eq!(
        read_scrub(&host, "md127").unwrap().render(),
        "last scrub: check running 40%"
    );
}

#[test]
fn an_array_only_resynced_since_boot_was_never_scrubbed() {
    // Before Linux 6.11 md starts last_sync_action at "none", from 6.11 at
    // "idle"; the initial resync is no scrub either.
    for last in ["none", "idle", "resync", "recover"] {
        let (_dir, host) = md_tree(&[("sync_action", "idle"), ("last_sync_action", last)]);
        assert_eq!(read_scrub(&host, "md127"), Some(Scrub::Never), "{last}");
    }
    assert_eq!(Scrub::Never.render(), "last scrub: never since boot");
    let (_dir, host) = md_tree(&[]);
    assert_eq!(read_scrub(&host, "md127"), None, "raid0 has no sync_action");
}
