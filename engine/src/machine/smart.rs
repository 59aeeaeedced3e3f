//! Whether a disk is failing by SMART's own account, before setup builds on
//! it. The rules are smartmontools': the drive's overall verdict
//! (`smartctl -H`, which compares each normalized attribute with the
//! threshold the drive and smartmontools' drive database give it), an
//! attribute failing now, and smartd's default warnings `-C 197 -U 198`
//! (any sector pending reallocation or found uncorrectable offline).

/// What smartctl says of one disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// Failing, in smartctl's words: why.
    Failing(String),
    /// smartctl could not say: not installed, a USB bridge without SMART
    /// passthrough, an SD card, a virtual disk.
    Unknown,
}

/// The verdict of `smartctl --json -H -A` output.
pub fn verdict(json: &str) -> Verdict {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return Verdict::Unknown;
    };
    let passed = v.pointer("/smart_status/passed").and_then(|p| p.as_bool());
    let attributes = v
        .pointer("/ata_smart_attributes/table")
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    let raw = |id: u64| {
        attributes
            .iter()
            .find(|a| a["id"].as_u64() == Some(id))
            .and_then(|a| a.pointer("/raw/value").and_then(|r| r.as_u64()))
    };
    let mut why = Vec::new();
    if passed == Some(false) {
        why.push("its overall health self-assessment FAILED".to_string());
    }
    for a in &attributes {
        if a["when_failed"].as_str() == Some("now") {
            why.push(format!(
                "{} is failing now (normalized {}, threshold {})",
                a["name"].as_str().unwrap_or("an attribute"),
                a["value"],
                a["thresh"]
            ));
        }
    }
    if let Some(n) = raw(197).filter(|n| *n > 0) {
        why.push(format!("{n} sectors pending reallocation"));
    }
    if let Some(n) = raw(198).filter(|n| *n > 0) {
        why.push(format!("{n} sectors uncorrectable offline"));
    }
    if !why.is_empty() {
        if let Some(n) = raw(5).filter(|n| *n > 0) {
            why.push(format!("{n} sectors reallocated"));
        }
        return Verdict::Failing(why.join(", "));
    }
    match passed {
        Some(true) => Verdict::Healthy,
        _ => Verdict::Unknown,
    }
}

#[cfg(test)]
mod tests;
