//! udev's database files (`/run/udev/data/b<major>:<minor>`), read directly:
//! libudev bindings are awkward to cross-compile, and the format is a few
//! prefixed lines (`E:KEY=value` properties, `S:` symlinks under /dev).

use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub properties: BTreeMap<String, String>,
    /// Symlinks relative to /dev, e.g. `disk/by-id/wwn-0x5000c500a1b2c3d4`.
    pub links: Vec<String>,
}

impl Record {
    pub fn parse(text: &str) -> Record {
        let mut record = Record::default();
        for line in text.lines() {
            if let Some(prop) = line.strip_prefix("E:") {
                if let Some((k, v)) = prop.split_once('=') {
                    record.properties.insert(k.to_string(), v.to_string());
                }
            } else if let Some(link) = line.strip_prefix("S:") {
                record.links.push(link.to_string());
            }
        }
        record
    }

    /// The record for a block device, or an empty one when udev has none
    /// (no udev running, or not processed yet).
    pub fn read(udev_data: &Path, major: u32, minor: u32) -> Record {
        std::fs::read_to_string(udev_data.join(format!("b{major}:{minor}")))
            .map(|t| Record::parse(&t))
            .unwrap_or_default()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.properties
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A property udev stores `\x20`-escaped (ID_MODEL_ENC, ID_FS_LABEL_ENC),
    /// decoded and trimmed.
    pub fn decoded(&self, key: &str) -> Option<String> {
        let raw = self.get(key)?;
        let mut bytes = Vec::with_capacity(raw.len());
        let mut rest = raw.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            if b == b'\\'
                && tail.len() >= 3
                && tail[0] == b'x'
                && let Ok(v) =
                    u8::from_str_radix(std::str::from_utf8(&tail[1..3]).unwrap_or("zz"), 16)
            {
                bytes.push(v);
                rest = &tail[3..];
                continue;
            }
            bytes.push(b);
            rest = tail;
        }
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        (!text.is_empty()).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_properties_links_and_escapes() {
        let r = Record::parse(
            "S:disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1234567\nS:disk/by-id/wwn-0x50014ee2b1234567\nI:123\nE:ID_MODEL_ENC=WDC\\x20WD40EFRX-68N32N0\\x20\\x20\nE:ID_BUS=ata\nE:ID_SERIAL_SHORT=\n",
        );
        assert_eq!(r.links.len(), 2);
        assert_eq!(
            r.decoded("ID_MODEL_ENC").as_deref(),
            Some("WDC WD40EFRX-68N32N0")
        );
        assert_eq!(r.get("ID_BUS"), Some("ata"));
        assert_eq!(
            r.get("ID_SERIAL_SHORT"),
            None,
            "empty values count as absent"
        );
    }
}
