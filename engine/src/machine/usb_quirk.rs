//! A USB bridge by vendor and product id, as `[storage] usb_quirks =
//! ["152d:0578"]` names one to keep it off the `uas` driver with the
//! kernel's `usb-storage.quirks=VID:PID:u`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The kernel parameter, read from the command line by the usb-storage
/// module.
pub const KEY: &str = "usb-storage.quirks";

/// A USB bridge by vendor and product id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsbQuirk {
    pub vendor: u16,
    pub product: u16,
}

impl UsbQuirk {
    /// The entry of `usb-storage.quirks=`: `u` is IGNORE_UAS (the kernel's
    /// admin-guide/kernel-parameters.txt).
    pub fn kernel_entry(&self) -> String {
        format!("{self}:u")
    }
}

impl fmt::Display for UsbQuirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vendor, self.product)
    }
}

impl FromStr for UsbQuirk {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let hex = |part: &str| {
            (part.len() == 4 && part.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| u16::from_str_radix(part, 16).ok())
                .flatten()
        };
        match s.split(':').collect::<Vec<_>>().as_slice() {
            [v, p] => match (hex(v), hex(p)) {
                (Some(vendor), Some(product)) => Ok(UsbQuirk { vendor, product }),
                _ => Err(format!(
                    "`{}` is not a USB id: write the bridge's vendor and product id as `lsusb` prints them, four hex digits each, such as \"152d:0578\"",
                    s.escape_debug()
                )),
            },
            [_, _, flags] => Err(format!(
                "`{}` carries flags (`{}`): write only the vendor and product id, such as \"{}\"; nasforge adds `:u` (do not use UAS) itself",
                s.escape_debug(),
                flags.escape_debug(),
                s.rsplit_once(':').map_or(s, |(id, _)| id).escape_debug()
            )),
            _ => Err(format!(
                "`{}` is not a USB id: write the bridge's vendor and product id as `lsusb` prints them, such as \"152d:0578\"",
                s.escape_debug()
            )),
        }
    }
}

impl Serialize for UsbQuirk {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UsbQuirk {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `VID:PID:flags` as the kernel reads it, if its flags carry `u`.
pub fn ignores_uas(entry: &str) -> Option<UsbQuirk> {
    let (id, flags) = entry.trim().rsplit_once(':')?;
    if flags.contains(['u', 'U']) {
        id.to_ascii_lowercase().parse().ok()
    } else {
        None
    }
}

/// `words` (kernel arguments) with `quirks` in its `usb-storage.quirks=`
/// word: a bridge already listed with other flags gets `u` added, one not
/// listed is appended. None when nothing changes.
pub fn merged(words: &str, quirks: &[UsbQuirk]) -> Option<String> {
    let mut parts: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    // The kernel takes the last one when a parameter repeats.
    let at = parts
        .iter()
        .rposition(|w| w.starts_with(&format!("{KEY}=")));
    let mut list: Vec<String> = at
        .map(|i| {
            parts[i][KEY.len() + 1..]
                .split(',')
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let before = list.clone();
    for q in quirks {
        let id = format!("{q}:");
        match list
            .iter_mut()
            .find(|e| e.to_ascii_lowercase().starts_with(&id))
        {
            Some(e) if ignores_uas(e).is_none() => e.push('u'),
            Some(_) => {}
            None => list.push(q.kernel_entry()),
        }
    }
    if list == before {
        return None;
    }
    let word = format!("{KEY}={}", list.join(","));
    match at {
        Some(i) => parts[i] = word,
        None => parts.push(word),
    }
    Some(parts.join(" "))
}

/// `text` with its first line merged; the other lines kept as they are.
pub fn merged_first_line(text: &str, quirks: &[UsbQuirk]) -> Option<String> {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    merged(first, quirks).map(|line| format!("{line}\n{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lsusb_ids_and_refuses_the_rest() {
        let q: UsbQuirk = "152d:0578".parse().unwrap();
        assert_eq!(q.kernel_entry(), "152d:0578:u");
        assert_eq!(
            "174C:55AA".parse::<UsbQuirk>().unwrap().to_string(),
            "174c:55aa"
        );
        let flags = "152d:0578:u".parse::<UsbQuirk>().unwrap_err();
        assert!(flags.contains("\"152d:0578\""), "{flags}");
        for bad in ["152d", "152d:578", "zz2d:0578", "152d:0578:u:x", ""] {
            assert!(bad.parse::<UsbQuirk>().is_err(), "{bad}");
        }
    }
}
