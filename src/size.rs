//! Byte sizes as people write them in recipes and on the command line:
//! `512MiB`, `2GiB`, `1.5G`, `1TB`, or a plain number of bytes.
//! Binary units (KiB, MiB, GiB, TiB) and their one-letter forms (K, M, G, T)
//! are powers of 1024, as in `truncate -s`; decimal units (kB, MB, GB, TB) are
//! powers of 1000, as on a disk's label.

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let num: f64 = num.parse().map_err(|_| format!("`{s}` is not a size; write e.g. 512MiB, 2GiB or 1TB"))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "K" | "KiB" => 1 << 10,
            "M" | "MiB" => 1 << 20,
            "G" | "GiB" => 1 << 30,
            "T" | "TiB" => 1 << 40,
            "kB" | "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            other => return Err(format!("unknown size unit `{other}` in `{s}`; use KiB, MiB, GiB, TiB (or K, M, G, T), or kB, MB, GB, TB")),
        };
        let bytes = num * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("size `{s}` is out of range"));
        }
        Ok(Size(bytes.round() as u64))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(b) => Ok(Size(b)),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human(self.0))
    }
}

/// `1.5 GiB`-style rendering for messages and reports.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[i]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_decimal_and_plain() {
        assert_eq!("512MiB".parse::<Size>().unwrap().0, 512 << 20);
        assert_eq!("2G".parse::<Size>().unwrap().0, 2 << 30);
        assert_eq!("1.5GiB".parse::<Size>().unwrap().0, 3 << 29);
        assert_eq!("1TB".parse::<Size>().unwrap().0, 1_000_000_000_000);
        assert_eq!("4096".parse::<Size>().unwrap().0, 4096);
    }

    #[test]
    fn rejects_unknown_units_with_the_choices() {
        let e = "3 parsecs".parse::<Size>().unwrap_err();
        assert!(e.contains("unknown size unit `parsecs`") && e.contains("GiB"), "{e}");
        assert!("GiB".parse::<Size>().is_err());
    }

    #[test]
    fn renders_human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 29), "1.5 GiB");
    }
}
