//! Byte sizes. Parsing is the device library's (`nasforge_engine::size`), so a
//! recipe means the same bytes on the workstation and on the board: `512MiB`,
//! `2GiB` are binary, `1TB`, `500GB` decimal.

pub use nasforge_engine::size::Size;

/// `1.5 GiB`-style rendering for messages and reports.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 29), "1.5 GiB");
    }
}
