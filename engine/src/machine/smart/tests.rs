use super::*;

/// Real smartctl output: see engine/tests/data/smartctl/README.md.
const FAILING: &str = include_str!("../../../tests/data/smartctl/hitachi-failing.json");
const QEMU_ATA: &str = include_str!("../../../tests/data/smartctl/qemu-ata-selftests.json");

#[test]
fn a_real_failing_disk_is_failing_with_smartctl_s_reasons() {
    assert_eq!(
        verdict(FAILING),
        Verdict::Failing(
            "its overall health self-assessment FAILED, Reallocated_Sector_Ct is failing now (normalized 1, threshold 5), 8 sectors pending reallocation, 1975 sectors reallocated".into()
        )
    );
}

#[test]
fn qemu_s_healthy_disk_is_healthy() {
    assert_eq!(verdict(QEMU_ATA), Verdict::Healthy);
}

/// smartd's default `-C 197`: a pending sector is a warning even when the
/// drive still calls itself healthy.
#[test]
fn a_pending_sector_fails_a_disk_that_passes_overall() {
    let mut v: serde_json::Value = serde_json::from_str(FAILING).unwrap();
    v["smart_status"]["passed"] = true.into();
    for a in v["ata_smart_attributes"]["table"].as_array_mut().unwrap() {
        a["when_failed"] = "".into();
    }
    assert_eq!(
        verdict(&v.to_string()),
        Verdict::Failing("8 sectors pending reallocation, 1975 sectors reallocated".into())
    );
}

#[test]
fn no_answer_is_unknown_not_healthy() {
    for out in ["", "not json", r#"{"smartctl":{"exit_status":2}}"#] {
        assert_eq!(verdict(out), Verdict::Unknown, "{out}");
    }
}
