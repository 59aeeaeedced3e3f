//! Times as the board's messages write them: md's estimates in minutes and
//! hours, and UTC dates, without a date library.

/// "1 min", "2 h 05 min": how long md expects a resync to take.
pub fn minutes_text(minutes: f32) -> String {
    let whole = minutes.ceil().max(1.0) as u64;
    if whole < 60 {
        format!("{whole} min")
    } else {
        format!("{} h {:02} min", whole / 60, whole % 60)
    }
}

/// "2026-11-29 22:30 UTC", without a date library.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_md_estimates_in_minutes_and_hours() {
        assert_eq!(minutes_text(0.5), "1 min");
        assert_eq!(minutes_text(59.2), "1 h 00 min");
        assert_eq!(minutes_text(412.0), "6 h 52 min");
    }

    #[test]
    fn formats_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_251_200), "2024-03-01 00:00 UTC");
        assert_eq!(utc(1_798_761_599), "2026-12-31 23:59 UTC");
    }
}
