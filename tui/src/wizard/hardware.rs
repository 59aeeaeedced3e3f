//! What the welcome screen says about the machine: the board, the kernel,
//! the storage controllers (SATA, SAS HBAs) or why there is none, and the
//! address shares will be reached at. Read under the host's root like
//! discovery.

use nasforge_engine::machine::controllers;
use nasforge_engine::machine::disks::{Host, Inventory};
use nasforge_engine::machine::hardware::{self, Controller, SAS_DRIVERS};
use std::fmt;
use std::fs;
use std::net::Ipv4Addr;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hardware {
    pub board: Option<String>,
    pub kernel: Option<String>,
    pub controllers: Vec<StorageController>,
    /// Why disks behind a SATA card or HBA cannot be seen; empty when all
    /// is well.
    pub problems: Vec<String>,
    /// The first IPv4 address that is not loopback.
    pub address: Option<Ipv4Addr>,
    /// The network that address is on, as NFS client rules write it
    /// ("192.168.1.0/24").
    pub network: Option<String>,
}

/// A PCI controller disks hang off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageController {
    pub pci: String,
    pub name: String,
    pub bus: Bus,
    /// The driver bound to it, if any.
    pub driver: Option<String>,
    /// The kernel module that takes it: ahci, or the HBA's own driver.
    pub module: String,
    /// "PCIe Gen 3 (8.0 GT/s) x1"
    pub link: Option<String>,
    pub disks: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bus {
    Sata,
    Sas,
}

impl fmt::Display for Bus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bus::Sata => "SATA",
            Bus::Sas => "SAS",
        })
    }
}

pub fn collect(host: &Host, inventory: &Inventory) -> Hardware {
    let board = board_model(host);
    let controllers = storage_controllers(host, inventory);
    let problems = problems(host, board.as_deref(), &controllers);
    let fib = fs::read_to_string(host.path("/proc/net/fib_trie")).unwrap_or_default();
    let (address, network) = address(&fib);
    Hardware {
        kernel: read_text(&host.path("/proc/sys/kernel/osrelease")),
        board,
        controllers,
        problems,
        address,
        network,
    }
}

fn read_text(path: &Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_string()
        })
        .filter(|s| !s.is_empty())
}

/// The device tree's model on ARM boards, DMI's product name elsewhere.
fn board_model(host: &Host) -> Option<String> {
    [
        "/proc/device-tree/model",
        "/sys/firmware/devicetree/base/model",
        "/sys/class/dmi/id/product_name",
    ]
    .iter()
    .find_map(|p| read_text(&host.path(p)))
}

/// SATA controllers by their PCI class, SAS HBAs by their driver or, with
/// none bound, by the table of known chips: an HBA's class says SCSI or
/// RAID, which covers much that holds no disks.
fn storage_controllers(host: &Host, inventory: &Inventory) -> Vec<StorageController> {
    let Ok(entries) = fs::read_dir(host.path("/sys/bus/pci/devices")) else {
        return Vec::new();
    };
    let mut found: Vec<StorageController> = entries
        .flatten()
        .filter_map(|entry| {
            let dir = entry.path();
            let read = Controller::read(&dir)?;
            let known = controllers::lookup(read.vendor, read.device);
            let driver = hardware::pci_driver(&dir);
            let sas_driver = driver
                .as_deref()
                .filter(|d| SAS_DRIVERS.contains(d))
                .or(known.as_ref().and_then(|k| k.sas_driver));
            // PCI class 01 06: mass storage, SATA (AHCI is programming interface 01).
            let (bus, module) = match sas_driver {
                Some(module) => (Bus::Sas, module.to_string()),
                None if hardware::pci_class(&dir)? >> 8 == 0x0106 => {
                    (Bus::Sata, "ahci".to_string())
                }
                None => return None,
            };
            let link = read
                .link_mts
                .zip(read.link_width)
                .map(|(mts, width)| nasforge_engine::planner::pcie_link(mts, width));
            let pci = read.pci.clone();
            Some(StorageController {
                name: read.label(),
                bus,
                driver,
                module,
                link,
                disks: inventory
                    .disks
                    .iter()
                    .filter(|d| d.controller.as_ref().is_some_and(|c| c.pci == pci))
                    .count(),
                pci,
            })
        })
        .collect();
    found.sort_by(|a, b| a.pci.cmp(&b.pci));
    found
}

fn problems(host: &Host, board: Option<&str>, found: &[StorageController]) -> Vec<String> {
    let mut out = Vec::new();
    for c in found.iter().filter(|c| c.driver.is_none()) {
        let module = &c.module;
        let why = if host.path("/sys/module").join(module).exists() {
            format!(
                "the {module} driver is loaded but did not take it (see `dmesg | grep -i {module}`)"
            )
        } else {
            format!(
                "no {module} module is loaded: the kernel needs {} (try `sudo modprobe {module}`)",
                config_symbol(module)
            )
        };
        out.push(format!(
            "{} at {} has no driver, so its disks are invisible: {why}",
            c.name, c.pci
        ));
    }
    if !found.is_empty() {
        return out;
    }
    let pi5 = board.is_some_and(|b| b.contains("Raspberry Pi 5 Model"));
    let config = nasforge_engine::machine::boot_dir(host).join("config.txt");
    if pi5 && !pcie_connector_enabled(&fs::read_to_string(&config).unwrap_or_default()) {
        out.push(format!(
            "dtparam=pciex1 is missing from {}, so the Pi 5's PCIe connector is off: add it (and dtparam=pciex1_gen=3 for a JMB585 or ASM1166) and reboot",
            shown(host, &config)
        ));
    } else if let Some(bridge) = silent_pcie_host(host) {
        out.push(format!(
            "the PCIe controller {bridge} found no device: the link is down (check the ribbon cable, the HAT's power, and that the card is seated)"
        ));
    } else {
        out.push(
            "no SATA controller or SAS HBA was found on PCIe; disks on USB or NVMe are still listed".into(),
        );
    }
    out
}

/// The kernel option that builds `module`.
fn config_symbol(module: &str) -> &'static str {
    match module {
        "mpt3sas" => "CONFIG_SCSI_MPT3SAS",
        "megaraid_sas" => "CONFIG_MEGARAID_SAS",
        "mptsas" => "CONFIG_FUSION_SAS",
        _ => "CONFIG_SATA_AHCI",
    }
}

/// A path under the host's root as the board names it.
fn shown(host: &Host, path: &Path) -> String {
    let rel = path.strip_prefix(&host.root).unwrap_or(path);
    format!("/{}", rel.to_string_lossy().trim_start_matches('/'))
}

/// Whether config.txt turns on the Pi 5's external PCIe connector
/// (`dtparam=pciex1`, or its alias `nvme`).
fn pcie_connector_enabled(config: &str) -> bool {
    config
        .lines()
        .filter_map(|l| l.trim().strip_prefix("dtparam="))
        .flat_map(|params| params.split(','))
        .any(|param| {
            let (name, value) = param.split_once('=').unwrap_or((param, "on"));
            matches!(name.trim(), "pciex1" | "nvme") && value.trim() != "off"
        })
}

/// A platform PCIe host controller (`*.pcie`) with no PCI bus under it:
/// the controller probed but no device answered, so the link is down.
fn silent_pcie_host(host: &Host) -> Option<String> {
    let mut dirs = vec![(host.path("/sys/devices/platform"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.ends_with(".pcie") {
                let has_bus = fs::read_dir(&path).is_ok_and(|children| {
                    children
                        .flatten()
                        .any(|c| c.file_name().to_string_lossy().starts_with("pci"))
                });
                if !has_bus {
                    return Some(name);
                }
            } else if depth < 2 && path.is_dir() && !path.is_symlink() {
                dirs.push((path, depth + 1));
            }
        }
    }
    None
}

/// The first local IPv4 address in /proc/net/fib_trie that is not
/// loopback, and the longest-prefix network holding it.
fn address(fib_trie: &str) -> (Option<Ipv4Addr>, Option<String>) {
    let mut locals = Vec::new();
    let mut networks = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let line = line.trim();
        if let Some(addr) = line.strip_prefix("|-- ") {
            last = addr.trim().parse().ok();
        } else if let (Some(addr), Some(rest)) = (last, line.strip_prefix('/')) {
            let mut words = rest.split_whitespace();
            let prefix: u8 = words.next().and_then(|p| p.parse().ok()).unwrap_or(32);
            let words: Vec<&str> = words.collect();
            if addr.is_loopback() {
                continue;
            }
            if words == ["host", "LOCAL"] {
                locals.push(addr);
            } else if words == ["link", "UNICAST"] && prefix < 32 {
                networks.push((addr, prefix));
            }
        }
    }
    let Some(&local) = locals.first() else {
        return (None, None);
    };
    let network = networks
        .iter()
        .filter(|(net, prefix)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*prefix)).unwrap_or(0);
            u32::from(local) & mask == u32::from(*net) & mask
        })
        .max_by_key(|(_, prefix)| *prefix)
        .map(|(net, prefix)| format!("{net}/{prefix}"));
    (Some(local), network)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        |-- 127.0.0.1
           /32 host LOCAL
     +-- 192.168.1.0/24 2 0 2
        |-- 192.168.1.0
           /24 link UNICAST
        |-- 192.168.1.23
           /32 host LOCAL
        |-- 192.168.1.255
           /32 link BROADCAST
";

    #[test]
    fn finds_the_address_and_its_network_in_fib_trie() {
        let (addr, net) = address(FIB_TRIE);
        assert_eq!(addr, Some(Ipv4Addr::new(192, 168, 1, 23)));
        assert_eq!(net.as_deref(), Some("192.168.1.0/24"));
        assert_eq!(
            address("Main:\n  |-- 127.0.0.1\n     /32 host LOCAL\n"),
            (None, None)
        );
    }

    #[test]
    fn reads_whether_config_txt_enables_the_pi5_connector() {
        assert!(pcie_connector_enabled(
            "[all]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n"
        ));
        assert!(pcie_connector_enabled("dtparam=audio=on,nvme\n"));
        assert!(!pcie_connector_enabled("dtparam=pciex1_gen=3\n"));
        assert!(!pcie_connector_enabled("#dtparam=pciex1\n"));
        assert!(!pcie_connector_enabled("dtparam=pciex1=off\n"));
    }

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let host = Host::new(dir.path());
        (dir, host)
    }

    fn reasons(files: &[(&str, &str)]) -> Vec<String> {
        let (_dir, host) = tree(files);
        collect(&host, &Inventory::default()).problems
    }

    #[test]
    fn says_why_no_sata_controller_is_seen() {
        let pi5 = ("proc/device-tree/model", "Raspberry Pi 5 Model B Rev 1.0\0");
        let off = reasons(&[pi5, ("boot/firmware/config.txt", "dtparam=audio=on\n")]);
        assert!(
            off[0].starts_with("dtparam=pciex1 is missing from /boot/firmware/config.txt"),
            "{off:?}"
        );

        let down = reasons(&[
            pi5,
            ("boot/firmware/config.txt", "dtparam=pciex1\n"),
            (
                "sys/devices/platform/axi/1000110000.pcie/driver_override",
                "",
            ),
        ]);
        assert!(
            down[0].contains("1000110000.pcie found no device"),
            "{down:?}"
        );

        let pci = "sys/bus/pci/devices/0000:01:00.0";
        let no_driver = reasons(&[
            (&format!("{pci}/class"), "0x010601\n"),
            (&format!("{pci}/vendor"), "0x1b4b\n"),
            (&format!("{pci}/device"), "0x9215\n"),
        ]);
        assert_eq!(no_driver.len(), 1, "{no_driver:?}");
        assert!(
            no_driver[0].starts_with("Marvell 88SE9215 at 0000:01:00.0 has no driver")
                && no_driver[0].contains("no ahci module is loaded"),
            "{no_driver:?}"
        );
    }

    #[test]
    fn a_sas_hba_is_listed_by_its_driver_and_without_one_says_which_it_needs() {
        let hba = "sys/bus/pci/devices/0000:01:00.0";
        let (_dir, host) = tree(&[
            (&format!("{hba}/class"), "0x010700\n"),
            (&format!("{hba}/vendor"), "0x1000\n"),
            (&format!("{hba}/device"), "0x0072\n"),
        ]);
        let hw = collect(&host, &Inventory::default());
        let c = &hw.controllers[0];
        assert_eq!(
            (
                c.name.as_str(),
                c.bus,
                c.driver.as_deref(),
                c.module.as_str()
            ),
            ("LSI SAS2008", Bus::Sas, None, "mpt3sas")
        );
        assert_eq!(
            hw.problems,
            [
                "LSI SAS2008 at 0000:01:00.0 has no driver, so its disks are invisible: no mpt3sas module is loaded: the kernel needs CONFIG_SCSI_MPT3SAS (try `sudo modprobe mpt3sas`)"
            ]
        );

        // An HBA the table does not know is still one when its driver says so.
        let unknown = [
            ("sys/devices/pci0000:00/0000:02:00.0/class", "0x010700\n"),
            ("sys/devices/pci0000:00/0000:02:00.0/vendor", "0x1000\n"),
            ("sys/devices/pci0000:00/0000:02:00.0/device", "0x00ac\n"),
            ("sys/bus/pci/drivers/mpt3sas/bind", ""),
        ];
        let (dir, host) = tree(&unknown);
        let root = dir.path();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:02:00.0",
            root.join("sys/bus/pci/devices/0000:02:00.0"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../../bus/pci/drivers/mpt3sas",
            root.join("sys/devices/pci0000:00/0000:02:00.0/driver"),
        )
        .unwrap();
        let hw = collect(&host, &Inventory::default());
        let c = &hw.controllers[0];
        assert_eq!(
            (c.name.as_str(), c.bus, c.driver.as_deref()),
            ("LSI/Broadcom", Bus::Sas, Some("mpt3sas"))
        );
        assert!(hw.problems.is_empty(), "{:?}", hw.problems);

        // A SCSI controller that is no SAS HBA is not listed.
        let (_dir, host) = tree(&[
            (&format!("{hba}/class"), "0x010000\n"),
            (&format!("{hba}/vendor"), "0x1af4\n"),
            (&format!("{hba}/device"), "0x1048\n"),
        ]);
        assert_eq!(collect(&host, &Inventory::default()).controllers, []);
    }
}
