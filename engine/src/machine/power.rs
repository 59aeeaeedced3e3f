//! Whether the board's power can carry its disks: the Raspberry Pi
//! firmware's throttled flags, and spinning USB disks fed by the board's own
//! ports. A Pi that browns out drops USB disks out of their arrays, which
//! looks like failing disks to anyone reading mdadm's mail.

use crate::command::{Ask, Cmd};
use crate::machine::disks::{Host, Inventory};
use crate::machine::sysfs::read_trimmed;
use serde::Serialize;
use std::fmt;

/// The firmware driver's copy of the flags, printed as bare hex (`50005`).
/// Newer kernels mark it deprecated in favour of hwmon, which only says
/// "under-voltage now"; this file also keeps "since boot".
pub const GET_THROTTLED: &str = "/sys/devices/platform/soc/soc:firmware/get_throttled";

/// The bits of `vcgencmd get_throttled`, as Raspberry Pi's vcgencmd
/// documentation numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Throttled(pub u32);

impl Throttled {
    const UNDER_VOLTAGE_NOW: u32 = 1 << 0;
    const UNDER_VOLTAGE_SINCE_BOOT: u32 = 1 << 16;

    pub fn under_voltage_now(self) -> bool {
        self.0 & Self::UNDER_VOLTAGE_NOW != 0
    }

    pub fn under_voltage_since_boot(self) -> bool {
        self.0 & Self::UNDER_VOLTAGE_SINCE_BOOT != 0
    }

    /// The sysfs file's form: hex without a prefix.
    pub fn parse_sysfs(text: &str) -> Option<Throttled> {
        u32::from_str_radix(text.trim(), 16).ok().map(Throttled)
    }

    /// vcgencmd's form: `throttled=0x50005`.
    pub fn parse_vcgencmd(stdout: &str) -> Option<Throttled> {
        let hex = stdout.trim().strip_prefix("throttled=")?;
        u32::from_str_radix(hex.trim_start_matches("0x"), 16)
            .ok()
            .map(Throttled)
    }
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The throttled flags from sysfs under the host's root, else from
/// `vcgencmd get_throttled` asked through `ask` (a kernel without the
/// firmware driver's file). None on boards that have neither.
pub fn throttled(host: &Host, ask: &mut dyn Ask) -> Option<Throttled> {
    if let Some(text) = read_trimmed(&host.path(GET_THROTTLED)) {
        return Throttled::parse_sysfs(&text);
    }
    ask.query(&Cmd::new(&["vcgencmd", "get_throttled"]))
        .ok()
        .filter(|q| q.status == 0)
        .and_then(|q| Throttled::parse_vcgencmd(&q.stdout))
}

/// What a person should hear about the board's power: more than one
/// spinning USB disk on the board's own ports, and under-voltage.
pub fn warnings(inventory: &Inventory, throttled: Option<Throttled>) -> Vec<String> {
    let mut out = Vec::new();
    let on_board: Vec<&str> = inventory
        .disks
        .iter()
        .filter(|d| d.rotational && d.usb.as_ref().is_some_and(|u| u.powered_by_board()))
        .map(|d| d.name.as_str())
        .collect();
    if on_board.len() > 1 {
        out.push(format!(
            "{} USB hard disks ({}) draw their power from the board's own USB ports: \
             spinning up together they can brown the board out and drop off. \
             Use a powered hub or disks with their own supply.",
            on_board.len(),
            on_board.join(", ")
        ));
    }
    if let Some(t) = throttled {
        if t.under_voltage_now() {
            out.push(format!(
                "The board is under-voltage now (get_throttled {t}): \
                 USB disks drop off when it is. Use the board's own power supply, \
                 and a powered hub for the disks."
            ));
        } else if t.under_voltage_since_boot() {
            out.push(format!(
                "The board has been under-voltage since it booted (get_throttled {t}): \
                 USB disks drop off when it is. Use the board's own power supply, \
                 and a powered hub for the disks."
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::RecordingRunner;

    #[test]
    fn reads_both_forms_of_the_flags() {
        assert_eq!(Throttled::parse_sysfs("50005\n"), Some(Throttled(0x50005)));
        assert_eq!(
            Throttled::parse_vcgencmd("throttled=0x50000\n"),
            Some(Throttled(0x50000))
        );
        assert_eq!(Throttled::parse_vcgencmd("error=1 error_msg=\"x\""), None);
        let t = Throttled(0x50005);
        assert!(t.under_voltage_now() && t.under_voltage_since_boot());
        let past = Throttled(0x50000);
        assert!(!past.under_voltage_now() && past.under_voltage_since_boot());
        assert_eq!(t.to_string(), "0x50005");
    }

    #[test]
    fn without_the_sysfs_file_vcgencmd_is_asked() {
        let root = tempfile::tempdir().unwrap();
        let host = Host::new(root.path());
        let mut runner = RecordingRunner::default();
        runner.responses.push((
            "vcgencmd get_throttled".into(),
            "throttled=0x10000\n".into(),
        ));
        assert_eq!(throttled(&host, &mut runner), Some(Throttled(0x10000)));
        assert_eq!(runner.lines, ["vcgencmd get_throttled"]);

        let file = host.path(GET_THROTTLED);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "0\n").unwrap();
        let mut runner = RecordingRunner::default();
        assert_eq!(throttled(&host, &mut runner), Some(Throttled(0)));
        assert!(runner.lines.is_empty(), "sysfs first: {:?}", runner.lines);
        assert!(warnings(&Inventory::default(), Some(Throttled(0))).is_empty());
    }
}
