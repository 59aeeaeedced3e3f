//! USB bridges that misbehave under UAS and are better driven by
//! `usb-storage`: each entry names where it comes from.
//!
//! The kernel keeps its own list (drivers/usb/storage/unusual_uas.h) and
//! applies it by itself; an entry is here too because an image's kernel may
//! predate it, and `usb-storage.quirks=VID:PID:u` on the command line does
//! the same on any kernel. Raspberry Pi's forum post on UAS trouble with
//! the Pi 4 (forums.raspberrypi.com viewtopic.php?t=245931) gives the
//! workaround, not a list of ids: bridges it is about are added here only
//! once their ids are published with a source.

use super::usb_quirk::UsbQuirk;

/// A bridge known to misbehave under UAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownBridge {
    pub vendor: u16,
    pub product: u16,
    pub name: &'static str,
    /// Where the entry comes from.
    pub source: &'static str,
}

impl KnownBridge {
    pub fn quirk(&self) -> UsbQuirk {
        UsbQuirk {
            vendor: self.vendor,
            product: self.product,
        }
    }
}

/// Linux mainline drivers/usb/storage/unusual_uas.h, the entries flagged
/// US_FL_IGNORE_UAS (read at the mirror github.com/Kingxukai/linux, commit
/// 0291023e7330da28f2f7453c87c2ab7082d8360f); 174c:5106 is from the same
/// file in github.com/raspberrypi/linux (commit
/// 25cae8d8eff5b78016ef1ad0c47b4a384ad2c8f3), which mainline later moved
/// into uas.c's own ASM1051 check.
const UNUSUAL_UAS: &str = "Linux drivers/usb/storage/unusual_uas.h (US_FL_IGNORE_UAS)";

pub const KNOWN: &[KnownBridge] = &[
    KnownBridge {
        vendor: 0x0781,
        product: 0x55e8,
        name: "SanDisk",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x090c,
        product: 0x2000,
        name: "Hiksemi External HDD",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x0b05,
        product: 0x1932,
        name: "ASUS External HDD",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x174c,
        product: 0x5106,
        name: "ASMedia ASM1051",
        source: "Linux drivers/usb/storage/unusual_uas.h (US_FL_IGNORE_UAS; \"Most ASM1051 based devices have issues with uas\"), as in raspberrypi/linux",
    },
    KnownBridge {
        vendor: 0x17ef,
        product: 0x3899,
        name: "Thinkplus External HDD",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x2537,
        product: 0x1068,
        name: "Norelsys NS1068X",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x357d,
        product: 0x7788,
        name: "JMicron JMS566",
        source: UNUSUAL_UAS,
    },
    KnownBridge {
        vendor: 0x4971,
        product: 0x1012,
        name: "Hitachi External HDD",
        source: UNUSUAL_UAS,
    },
];

pub fn lookup(vendor: u16, product: u16) -> Option<&'static KnownBridge> {
    KNOWN
        .iter()
        .find(|k| k.vendor == vendor && k.product == product)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_without_duplicates() {
        let ids: Vec<(u16, u16)> = KNOWN.iter().map(|k| (k.vendor, k.product)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            ids, sorted,
            "keep the table sorted by vendor, then product, as the kernel's is"
        );
        assert_eq!(lookup(0x357d, 0x7788).unwrap().name, "JMicron JMS566");
        assert!(lookup(0x174c, 0x55aa).is_none());
    }
}
