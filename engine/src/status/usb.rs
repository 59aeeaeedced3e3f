//! USB disks and the board's power as status shows them: each USB disk's
//! bridge, whether that bridge is one known to fail under UAS and whether
//! usb-storage keeps it off UAS now, and the power warnings.

use crate::machine::disks::{Host, Inventory};
use crate::machine::power::{self, Throttled};
use crate::machine::uas_quirks;
use crate::machine::usb::{self, UsbBridge};
use crate::runner::Runner;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsbDiskStatus {
    pub disk: String,
    /// `357d:7788`, as lsusb writes it.
    pub id: String,
    pub bridge: UsbBridge,
    /// The entry's name when the bridge is on nasforge's UAS problem list.
    pub uas_problem: Option<String>,
    /// usb-storage keeps this bridge off UAS now (`:u` among its quirks).
    pub quirk_active: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerStatus {
    /// The Raspberry Pi firmware's flags; None on boards without them.
    pub throttled: Option<Throttled>,
    pub warnings: Vec<String>,
}

/// The USB disks of `inventory`, and the power warnings for it.
pub fn read(
    host: &Host,
    inventory: &Inventory,
    runner: &mut dyn Runner,
) -> (Vec<UsbDiskStatus>, PowerStatus) {
    let active = usb::active_quirks(host);
    let disks = inventory
        .disks
        .iter()
        .filter_map(|d| {
            let bridge = d.usb.clone()?;
            let known = uas_quirks::lookup(bridge.vendor, bridge.product);
            Some(UsbDiskStatus {
                disk: d.name.clone(),
                id: bridge.id(),
                uas_problem: known.map(|k| k.name.to_string()),
                quirk_active: active
                    .iter()
                    .any(|q| (q.vendor, q.product) == (bridge.vendor, bridge.product)),
                bridge,
            })
        })
        .collect();
    let throttled = power::throttled(host, runner);
    let power = PowerStatus {
        throttled,
        warnings: power::warnings(inventory, throttled),
    };
    (disks, power)
}

impl UsbDiskStatus {
    /// "sda: 357d:7788 JMicron JMS566, uas, port 2-1, powered by the board;
    /// on the UAS problem list (JMicron JMS566), quirk not active"
    pub fn render(&self) -> String {
        let b = &self.bridge;
        let name = b.name.as_ref().map(|n| format!(" {n}")).unwrap_or_default();
        let driver = b
            .driver
            .map_or("no driver bound".to_string(), |d| d.to_string());
        let power = if b.self_powered {
            "own supply"
        } else if b.behind_powered_hub {
            "behind a powered hub"
        } else {
            "powered by the board"
        };
        let mut out = format!(
            "  {}: {}{name}, {driver}, port {}, {power}",
            self.disk, self.id, b.port
        );
        if let Some(problem) = &self.uas_problem {
            let state = if self.quirk_active {
                "quirk active"
            } else {
                "quirk not active"
            };
            out += &format!("; on the UAS problem list ({problem}), {state}");
        }
        out + "\n"
    }
}

impl PowerStatus {
    /// The warnings, or the reading when it is clean; nothing on a board
    /// that has no flags and no warnings.
    pub fn lines(&self) -> Vec<String> {
        if !self.warnings.is_empty() {
            return self.warnings.iter().map(|w| format!("  ! {w}\n")).collect();
        }
        self.throttled
            .map(|t| format!("  no under-voltage reported (get_throttled {t})\n"))
            .into_iter()
            .collect()
    }
}
