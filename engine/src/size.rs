//! Byte counts as people write them in a recipe: "1TB", "500GB", "1.5TiB",
//! "800GiB".
//!
//! Units without an `i` are decimal (1 TB = 10^12 bytes), as printed on a
//! disk's label; units with an `i` are binary (1 TiB = 2^40 bytes), as `lsblk`
//! shows them. Both are accepted because a user copies whichever number is in
//! front of them, and confusing the two costs 9% at the terabyte scale.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

const UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("PB", 1_000_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("PiB", 1 << 50),
];

/// A byte is 10^-15 PB and about 8.9 * 10^-16 PiB, so a 16th decimal already
/// names less than a byte; the cap also keeps the 10^decimals scale in range.
const MAX_DECIMALS: usize = 16;

impl Size {
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// The size in the largest unit that divides it, as a recipe would
    /// write it ("100GiB", "4TB", "1536B").
    pub fn exact(self) -> String {
        UNITS
            .iter()
            .filter(|&&(_, m)| self.0 != 0 && self.0.is_multiple_of(m))
            .max_by_key(|&&(_, m)| m)
            .map(|&(unit, m)| format!("{}{unit}", self.0 / m))
            .unwrap_or_else(|| format!("{}B", self.0))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size `{input}`: {why}; write a number and a unit, e.g. \"1TB\", \"500GB\" (decimal) or \"1.5TiB\", \"800GiB\" (binary)"
)]
pub struct SizeError {
    input: String,
    why: &'static str,
}

impl FromStr for Size {
    type Err = SizeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why| SizeError {
            input: input.to_string(),
            why,
        };
        let s = input.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("the unit is missing"))?;
        let (number, unit) = (&s[..split], s[split..].trim());
        if number.is_empty() {
            return Err(err("the number is missing"));
        }
        let multiplier = UNITS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(unit))
            .map(|&(_, m)| m)
            .ok_or_else(|| err("unknown unit"))?;
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
            return Err(err("the number is malformed"));
        }
        if fraction.len() > MAX_DECIMALS {
            return Err(err("it has more decimals than a byte needs (at most 16)"));
        }
        // Integer arithmetic keeps "1.5TiB" exact instead of rounding through f64.
        let digits = format!("{whole}{fraction}");
        let scale = 10u128.pow(fraction.len() as u32);
        let value: u128 = digits.parse().map_err(|_| err("the number is malformed"))?;
        let bytes = value
            .checked_mul(multiplier as u128)
            .map(|b| b / scale)
            .filter(|&b| b <= u64::MAX as u128)
            .ok_or_else(|| err("it is too large"))?;
        Ok(Size(bytes as u64))
    }
}

impl fmt::Display for Size {
    /// Decimal units with up to one decimal, the way disk vendors label drives.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimal = [
            ("PB", 1e15),
            ("TB", 1e12),
            ("GB", 1e9),
            ("MB", 1e6),
            ("KB", 1e3),
        ];
        let b = self.0 as f64;
        for (unit, scale) in decimal {
            if b >= scale {
                let v = b / scale;
                let text = format!("{v:.1}");
                let text = text.strip_suffix(".0").unwrap_or(&text);
                return write!(f, "{text} {unit}");
            }
        }
        write!(f, "{} B", self.0)
    }
}

impl Serialize for Size {
    /// Exact, so a spec written back out (journal, wizard) means the same bytes.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.exact())
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as \"1TB\", \"500GB\", \"1.5TiB\" or a byte count")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Size, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_and_binary_units() {
        let cases = [
            ("1TB", 1_000_000_000_000),
            ("500GB", 500_000_000_000),
            ("1.5TiB", 1_649_267_441_664),
            ("800GiB", 858_993_459_200),
            ("4 TB", 4_000_000_000_000),
            ("2tb", 2_000_000_000_000),
            ("512B", 512),
            ("0.5KiB", 512),
        ];
        for (text, bytes) in cases {
            assert_eq!(text.parse::<Size>().unwrap(), Size(bytes), "{text}");
        }
    }

    #[test]
    fn rejects_ambiguous_or_malformed_sizes() {
        for bad in [
            "1T",
            "1",
            "TB",
            "1.2.3GB",
            "-1GB",
            "1 XB",
            "99999999999PB",
            "1TIB2",
            &format!("0.{}1MiB", "0".repeat(130)),
            "1.00000000000000001KiB",
        ] {
            let err = bad.parse::<Size>().unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
            assert!(
                err.contains("\"1TB\""),
                "the error shows how to write it: {err}"
            );
        }
    }

    #[test]
    fn serializes_exactly_and_displays_like_a_label() {
        let tib = Size(3 << 39);
        assert_eq!(serde_json::to_string(&tib).unwrap(), "\"1536GiB\"");
        assert_eq!(
            serde_json::to_string(&Size(4_000_000_000_000)).unwrap(),
            "\"4TB\""
        );
        assert_eq!(Size(4_000_787_030_016).to_string(), "4 TB");
        assert_eq!(Size(240_057_409_536).to_string(), "240.1 GB");
        let back: Size =
            serde_json::from_str(&serde_json::to_string(&Size(12345)).unwrap()).unwrap();
        assert_eq!(back, Size(12345));
    }
}
