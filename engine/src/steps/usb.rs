//! USB bridges kept off UAS before anything is created: the recipe's
//! `[storage] usb_quirks` and every disk whose bridge is on the UAS problem
//! list (`machine::uas_quirks`) while `uas` drives it. Missing ones go onto
//! the kernel command line the board's boot reads, and the board reboots
//! once; the step is done when the kernel has them.
//!
//! Stateless across that reboot: the step is done when the quirks are
//! active; refused (never a second reboot) when they are written but not
//! active, since then the boot does not read the file nasforge wrote.

use super::{Action, Guard, Step, run};
use crate::machine::disks::{Host, Inventory};
use crate::machine::uas_quirks;
use crate::machine::usb::UsbDriver;
use crate::spec::{Storage, UsbQuirk};
use std::fs;

pub const KEY: &str = "usb-storage.quirks";
const ACTIVE: &str = "/sys/module/usb_storage/parameters/quirks";
const RASPI_EXTRA_CMDLINE: &str = "/etc/default/raspi-extra-cmdline";
const RASPI_FIRMWARE_HOOK: &str = "/etc/kernel/postinst.d/z50-raspi-firmware";
const ARMBIAN_ENV: &str = "/boot/armbianEnv.txt";

/// The quirks setup needs, each with why.
pub fn needed(storage: &Storage, inventory: &Inventory) -> Vec<(UsbQuirk, String)> {
    let mut out: Vec<(UsbQuirk, String)> = storage
        .usb_quirks
        .iter()
        .map(|q| (*q, format!("{q} is named in [storage] usb_quirks")))
        .collect();
    for disk in &inventory.disks {
        let Some(usb) = &disk.usb else { continue };
        let Some(known) = uas_quirks::lookup(usb.vendor, usb.product) else {
            continue;
        };
        if usb.driver != Some(UsbDriver::Uas) || out.iter().any(|(q, _)| *q == known.quirk()) {
            continue;
        }
        out.push((
            known.quirk(),
            format!(
                "{}'s bridge {} ({}) misbehaves under UAS (source: {})",
                disk.name,
                known.name,
                usb.id(),
                known.source
            ),
        ));
    }
    out
}

/// Whether the kernel runs with `entry` (`46f4:0001:u`): usb-storage's
/// parameter once the module is loaded, else the command line.
fn active(host: &Host, entry: &str) -> bool {
    let listed = |text: &str, split: &dyn Fn(&str) -> Vec<String>| {
        split(text).iter().any(|e| e.eq_ignore_ascii_case(entry))
    };
    let commas = |t: &str| t.trim().split(',').map(str::to_string).collect::<Vec<_>>();
    if let Ok(param) = fs::read_to_string(host.path(ACTIVE))
        && listed(&param, &commas)
    {
        return true;
    }
    fs::read_to_string(host.path("/proc/cmdline")).is_ok_and(|line| {
        line.split_whitespace()
            .filter_map(|w| w.strip_prefix(KEY)?.strip_prefix('='))
            .any(|v| listed(v, &commas))
    })
}

/// `words` (one line of kernel arguments) with the quirks merged into its
/// `usb-storage.quirks=` word; None when every one is there.
fn merged(words: &str, entries: &[String]) -> Option<String> {
    let mut parts: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    let at = parts.iter().position(|w| w.starts_with(&format!("{KEY}=")));
    let mut list: Vec<String> = at
        .map(|i| {
            parts[i][KEY.len() + 1..]
                .split(',')
                .filter(|e| !e.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let before = list.len();
    for e in entries {
        let id = &e[..9];
        if !list.iter().any(|l| l.to_ascii_lowercase().starts_with(id)) {
            list.push(e.clone());
        }
    }
    if list.len() == before {
        return None;
    }
    let word = format!("{KEY}={}", list.join(","));
    match at {
        Some(i) => parts[i] = word,
        None => parts.push(word),
    }
    Some(parts.join(" "))
}

/// The files the board's boot reads its kernel arguments from, with their
/// new contents: cmdline.txt on the boot partition (one line), Debian's
/// raspi-extra-cmdline (raspi-firmware rebuilds cmdline.txt from it on
/// every kernel update), Armbian's `extraargs=`.
fn edits(host: &Host, boot_dir: &str, entries: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let cmdline = format!("{boot_dir}/cmdline.txt");
    if let Ok(text) = fs::read_to_string(host.path(&cmdline)) {
        let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
        if let Some(line) = merged(first, entries) {
            out.push((cmdline, format!("{line}\n{rest}")));
        }
    }
    if host.path(RASPI_FIRMWARE_HOOK).exists() {
        let text = fs::read_to_string(host.path(RASPI_EXTRA_CMDLINE)).unwrap_or_default();
        if let Some(line) = merged(text.lines().next().unwrap_or(""), entries) {
            out.push((RASPI_EXTRA_CMDLINE.into(), format!("{line}\n")));
        }
    }
    if let Ok(text) = fs::read_to_string(host.path(ARMBIAN_ENV)) {
        let extra = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("extraargs="))
            .unwrap_or("");
        if let Some(args) = merged(extra, entries) {
            let mut lines: Vec<String> = text
                .lines()
                .filter(|l| !l.starts_with("extraargs="))
                .map(str::to_string)
                .collect();
            lines.push(format!("extraargs={args}"));
            out.push((ARMBIAN_ENV.into(), lines.join("\n") + "\n"));
        }
    }
    out
}

/// The step that puts `needed` into effect, or None when the kernel
/// already runs with all of them.
pub fn step(host: &Host, boot_dir: &str, needed: &[(UsbQuirk, String)]) -> Option<Step> {
    let entries: Vec<String> = needed.iter().map(|(q, _)| q.kernel_entry()).collect();
    if entries.iter().all(|e| active(host, e)) {
        return None;
    }
    let files = edits(host, boot_dir, &entries);
    let mut actions: Vec<Action> = files
        .iter()
        .map(|(path, contents)| Action::WriteFile {
            path: path.clone(),
            contents: contents.clone(),
            mode: 0o644,
        })
        .collect();
    // The reboot is queued and setup waits for it to end this run: the
    // step is never recorded done here, and after the reboot its guard
    // finds the quirks active.
    actions.push(run(&["systemctl", "reboot"]));
    actions.push(run(&["sleep", "600"]));
    let why: Vec<String> = needed.iter().map(|(_, why)| why.clone()).collect();
    Some(Step {
        id: "usb-quirks".into(),
        title: format!(
            "Keep USB bridges off UAS ({KEY}={}), then reboot once before anything is created: {}",
            entries.join(","),
            why.join("; ")
        ),
        guard: Guard::UsbQuirks {
            entries,
            files: files.into_iter().map(|(p, _)| p).collect(),
        },
        actions,
        always: vec![],
    })
}

/// The guard: done when the kernel has every entry; refused when they were
/// written (a reboot already happened) but the kernel still lacks them.
pub(super) fn check(host: &Host, entries: &[String], files: &[String]) -> super::Check {
    let missing: Vec<&String> = entries.iter().filter(|e| !active(host, e)).collect();
    if missing.is_empty() {
        return super::Check::Done(format!("the kernel runs with {KEY}={}", entries.join(",")));
    }
    let written = !files.is_empty()
        && files.iter().all(|f| {
            fs::read_to_string(host.path(f)).is_ok_and(|t| {
                missing
                    .iter()
                    .all(|m| t.to_ascii_lowercase().contains(&m.to_ascii_lowercase()))
            })
        });
    if written {
        let now = fs::read_to_string(host.path(ACTIVE))
            .unwrap_or_else(|_| "(usb-storage not loaded)".into());
        return super::Check::Refuse(format!(
            "{} {} written to {} but after a reboot the kernel still lacks {} ({ACTIVE}: {}); this boot does not read that file. Add `{KEY}={}` to the kernel command line your boot loader uses, reboot, and run setup again",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
            if missing.len() == 1 { "was" } else { "were" },
            files.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
            now.trim(),
            entries.join(",")
        ));
    }
    super::Check::Pending
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::disks::Disk;
    use crate::machine::usb::UsbBridge;

    use crate::machine::fake_host as host;

    fn usb_disk(vendor: u16, product: u16, driver: UsbDriver) -> Disk {
        let mut d: Disk = serde_json::from_value(serde_json::json!({
            "name": "sdb", "major": 8, "minor": 16, "size": 1000000000000u64,
            "logical_block_size": 512, "model": null, "serial": null, "wwn": null,
            "transport": "usb", "rotational": true, "rotational_from": "sysfs",
            "removable": false, "controller": null, "usb_mbit": 5000, "by_id": null,
            "partitions": [], "contents": [], "in_use": []
        }))
        .unwrap();
        d.usb = Some(UsbBridge {
            vendor,
            product,
            name: None,
            driver: Some(driver),
            port: "2-1".into(),
            self_powered: true,
            behind_powered_hub: false,
        });
        d
    }

    fn storage(quirks: &[&str]) -> Storage {
        let text = format!(
            "mode = \"wizard\"\nusb_quirks = [{}]\n",
            quirks
                .iter()
                .map(|q| format!("\"{q}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        toml::from_str(&text).unwrap()
    }

    fn inventory(disks: Vec<Disk>) -> Inventory {
        Inventory {
            disks,
            network: None,
            arrays: vec![],
        }
    }

    const PIOS: &str = "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootfstype=ext4 fsck.repair=yes rootwait\n";

    #[test]
    fn a_listed_bridge_on_uas_is_written_to_cmdline_txt_and_the_board_reboots() {
        let inv = inventory(vec![usb_disk(0x357d, 0x7788, UsbDriver::Uas)]);
        let need = needed(&storage(&[]), &inv);
        assert_eq!(need.len(), 1);
        assert!(
            need[0].1.contains("JMicron JMS566 (357d:7788)"),
            "{}",
            need[0].1
        );
        let (_d, host) = host(&[("/boot/firmware/cmdline.txt", PIOS)]);
        let step = step(&host, "/boot/firmware", &need).unwrap();
        assert!(
            step.title
                .contains("reboot once before anything is created")
        );
        let Action::WriteFile { path, contents, .. } = &step.actions[0] else {
            panic!()
        };
        assert_eq!(path, "/boot/firmware/cmdline.txt");
        assert_eq!(
            contents,
            &PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=357d:7788:u\n")
        );
        assert_eq!(step.actions[1].to_string(), "systemctl reboot");
        assert!(matches!(step.check(&host), crate::steps::Check::Pending));

        // The same bridge on usb-storage, or one not on the list: nothing.
        let calm = inventory(vec![
            usb_disk(0x357d, 0x7788, UsbDriver::UsbStorage),
            usb_disk(0x174c, 0x55aa, UsbDriver::Uas),
        ]);
        assert!(needed(&storage(&[]), &calm).is_empty());
    }

    #[test]
    fn after_the_reboot_the_step_is_done_or_refused_but_never_reboots_twice() {
        let need = needed(&storage(&["152d:0578"]), &inventory(vec![]));
        let (_d, host) = host(&[("/boot/firmware/cmdline.txt", PIOS)]);
        let step = step(&host, "/boot/firmware", &need).unwrap();
        // The board rebooted with the word in cmdline.txt.
        let written = PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=152d:0578:u\n");
        let (_a, active) = host_pair(&written, Some("152d:0578:u\n"));
        assert!(matches!(step.check(&active), crate::steps::Check::Done(_)));
        let (_b, ignored) = host_pair(&written, None);
        match step.check(&ignored) {
            crate::steps::Check::Refuse(why) => {
                assert!(why.contains("this boot does not read that file"), "{why}")
            }
            _ => panic!("a second reboot would follow"),
        }
        // Active from the start (the image builder wrote it): no step.
        assert!(super::step(&active, "/boot/firmware", &need).is_none());
    }

    fn host_pair(cmdline: &str, param: Option<&str>) -> (tempfile::TempDir, Host) {
        let mut files = vec![("/boot/firmware/cmdline.txt", cmdline)];
        if let Some(p) = param {
            files.push((ACTIVE, p));
        }
        host(&files)
    }

    #[test]
    fn existing_quirks_are_kept_and_armbian_and_debian_files_edited() {
        let (_d, host) = host(&[
            (
                "/boot/firmware/cmdline.txt",
                "root=LABEL=RASPIROOT usb-storage.quirks=0bc2:2312:u rootwait\n",
            ),
            (RASPI_FIRMWARE_HOOK, "#!/bin/sh\n"),
            (
                ARMBIAN_ENV,
                "verbosity=1\nextraargs=cma=256M\noverlays=sata1\n",
            ),
        ]);
        let need = needed(&storage(&["152d:0578"]), &inventory(vec![]));
        let step = step(&host, "/boot/firmware", &need).unwrap();
        let writes: Vec<(String, String)> = step
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::WriteFile { path, contents, .. } => Some((path.clone(), contents.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            writes,
            [
                ("/boot/firmware/cmdline.txt".to_string(), "root=LABEL=RASPIROOT usb-storage.quirks=0bc2:2312:u,152d:0578:u rootwait\n".to_string()),
                (RASPI_EXTRA_CMDLINE.to_string(), "usb-storage.quirks=152d:0578:u\n".to_string()),
                (ARMBIAN_ENV.to_string(), "verbosity=1\noverlays=sata1\nextraargs=cma=256M usb-storage.quirks=152d:0578:u\n".to_string()),
            ]
        );
    }
}
