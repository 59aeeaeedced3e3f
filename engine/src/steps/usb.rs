//! USB bridges kept off UAS before anything is created: the recipe's
//! `[storage] usb_quirks` and every disk whose bridge is on the UAS problem
//! list (`machine::uas_quirks`) while `uas` drives it. Missing ones go onto
//! the kernel command line the board's boot reads (cmdline.txt, Debian's
//! raspi-extra-cmdline, Armbian's `extraargs=`), and the board reboots
//! once: the step ends with `Action::Reboot`, so the executor records the
//! reboot in the journal, stops, and after the reboot finds the step done
//! when the kernel has the quirks, or refuses it (never a second reboot).

use super::{Action, Check, Guard, Step};
use crate::machine::armbian_env::ArmbianEnv;
use crate::machine::disks::{Host, Inventory};
use crate::machine::uas_quirks;
use crate::machine::usb::{self, UsbDriver};
use crate::machine::usb_quirk::{KEY, ignores_uas, merged_first_line};
use crate::spec::{Storage, UsbQuirk};
use std::fs;

const CMDLINE: &str = "/proc/cmdline";
const RASPI_EXTRA_CMDLINE: &str = "/etc/default/raspi-extra-cmdline";
/// Debian's raspi-firmware hook, which rebuilds cmdline.txt from
/// raspi-extra-cmdline on every kernel or initramfs update.
const RASPI_FIRMWARE_HOOK: &str = "/etc/kernel/postinst.d/z50-raspi-firmware";
const ARMBIAN_ENV: &str = "/boot/armbianEnv.txt";

/// A quirk setup puts into effect, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    pub quirk: UsbQuirk,
    pub why: String,
    /// Named in `[storage] usb_quirks` (else found on the problem list).
    pub named_in_recipe: bool,
}

/// The quirks setup needs: the recipe's, then those of bridges on the
/// problem list that `uas` drives now.
pub fn needed(storage: &Storage, inventory: &Inventory) -> Vec<Needed> {
    let mut out: Vec<Needed> = storage
        .usb_quirks
        .iter()
        .map(|q| Needed {
            quirk: *q,
            why: format!("{q} is named in [storage] usb_quirks"),
            named_in_recipe: true,
        })
        .collect();
    for disk in &inventory.disks {
        let Some(bridge) = &disk.usb else { continue };
        let Some(known) = uas_quirks::lookup(bridge.vendor, bridge.product) else {
            continue;
        };
        if bridge.driver != Some(UsbDriver::Uas) || out.iter().any(|n| n.quirk == known.quirk()) {
            continue;
        }
        out.push(Needed {
            quirk: known.quirk(),
            why: format!(
                "{}'s bridge {} ({}) is driven by uas and misbehaves under it (source: {})",
                disk.name,
                known.name,
                bridge.id(),
                known.source
            ),
            named_in_recipe: false,
        });
    }
    out
}

/// The bridges the kernel keeps off UAS: usb-storage's `quirks` parameter
/// once the module is loaded, and the command line it will read when it is.
pub fn active(host: &Host) -> Vec<UsbQuirk> {
    let mut found = usb::active_quirks(host);
    let cmdline = fs::read_to_string(host.path(CMDLINE)).unwrap_or_default();
    for word in cmdline.split_whitespace() {
        let Some(list) = word.strip_prefix(KEY).and_then(|w| w.strip_prefix('=')) else {
            continue;
        };
        found.extend(list.split(',').filter_map(ignores_uas));
    }
    found
}

/// The files the board's boot reads its kernel arguments from, with their
/// new contents, and those already carrying every quirk.
struct Edits {
    writes: Vec<(String, String)>,
    carrying: Vec<String>,
}

fn edits(host: &Host, boot_dir: &str, quirks: &[UsbQuirk]) -> Edits {
    let mut edits = Edits {
        writes: Vec::new(),
        carrying: Vec::new(),
    };
    let mut edit = |path: String, new: Option<String>| match new {
        Some(text) => edits.writes.push((path, text)),
        None => edits.carrying.push(path),
    };
    let cmdline = format!("{boot_dir}/cmdline.txt");
    if let Ok(text) = fs::read_to_string(host.path(&cmdline)) {
        edit(cmdline, merged_first_line(&text, quirks));
    }
    if host.path(RASPI_FIRMWARE_HOOK).exists() {
        let text = fs::read_to_string(host.path(RASPI_EXTRA_CMDLINE)).unwrap_or_default();
        edit(RASPI_EXTRA_CMDLINE.into(), merged_first_line(&text, quirks));
    }
    if let Ok(text) = fs::read_to_string(host.path(ARMBIAN_ENV)) {
        edit(ARMBIAN_ENV.into(), armbian_env(&text, quirks));
    }
    edits
}

/// Whether the file at `path`, holding `text`, has every quirk.
fn carries(path: &str, text: &str, quirks: &[UsbQuirk]) -> bool {
    if path == ARMBIAN_ENV {
        armbian_env(text, quirks).is_none()
    } else {
        merged_first_line(text, quirks).is_none()
    }
}

/// armbianEnv.txt with the quirks in its `extraargs=` line, or None when
/// it has them all.
fn armbian_env(text: &str, quirks: &[UsbQuirk]) -> Option<String> {
    let mut env = ArmbianEnv::parse(text);
    env.add_usb_quirks(quirks)?;
    Some(env.render().to_string())
}

/// Why the quirks cannot be put into effect by this step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cannot {
    pub why: String,
    /// A quirk the recipe names is among them (setup stops); else they are
    /// only from the problem list (setup goes on with a warning).
    pub named_in_recipe: bool,
}

/// The step that puts the missing quirks of `needed` into effect, or None
/// when the kernel already runs with all of them.
pub fn step(host: &Host, boot_dir: &str, needed: &[Needed]) -> Result<Option<Step>, Cannot> {
    let on = active(host);
    let missing: Vec<&Needed> = needed.iter().filter(|n| !on.contains(&n.quirk)).collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let quirks: Vec<UsbQuirk> = missing.iter().map(|n| n.quirk).collect();
    let entries = entries(&quirks);
    let cannot = |why: String| Cannot {
        why,
        named_in_recipe: missing.iter().any(|n| n.named_in_recipe),
    };
    let edits = edits(host, boot_dir, &quirks);
    if edits.writes.is_empty() && edits.carrying.is_empty() {
        return Err(cannot(format!(
            "cannot keep USB bridges off UAS: this board has no {boot_dir}/cmdline.txt or {ARMBIAN_ENV} to put `{KEY}={entries}` in. Add it to the kernel command line your boot loader uses and reboot, then run setup again"
        )));
    }
    if edits.writes.is_empty() {
        return Err(cannot(format!(
            "{} already carr{} `{KEY}={entries}`, but the running kernel does not have it ({}), so this boot does not read {}: a reboot would not help. Add it to the kernel command line your boot loader uses and reboot, then run setup again",
            edits.carrying.join(" and "),
            if edits.carrying.len() == 1 {
                "ies"
            } else {
                "y"
            },
            kernel_says(host),
            if edits.carrying.len() == 1 {
                "it"
            } else {
                "them"
            },
        )));
    }
    let mut actions: Vec<Action> = edits
        .writes
        .iter()
        .map(|(path, contents)| Action::WriteFile {
            path: path.clone(),
            contents: contents.clone(),
            mode: 0o644,
        })
        .collect();
    actions.push(Action::Reboot);
    let why: Vec<&str> = missing.iter().map(|n| n.why.as_str()).collect();
    Ok(Some(Step {
        id: "usb-quirks".into(),
        title: format!(
            "Keep USB bridges off UAS: {KEY}={entries} on the kernel command line, then reboot once before anything is created ({})",
            why.join("; ")
        ),
        guard: Guard::UsbQuirks {
            quirks,
            files: edits.writes.into_iter().map(|(p, _)| p).collect(),
        },
        actions,
        always: vec![],
    }))
}

fn entries(quirks: &[UsbQuirk]) -> String {
    quirks
        .iter()
        .map(UsbQuirk::kernel_entry)
        .collect::<Vec<_>>()
        .join(",")
}

/// The guard: done when the kernel runs with every quirk.
pub(super) fn check(host: &Host, quirks: &[UsbQuirk]) -> Check {
    let on = active(host);
    if quirks.iter().all(|q| on.contains(q)) {
        Check::Done(format!("the kernel runs with {KEY}={}", entries(quirks)))
    } else {
        Check::Pending
    }
}

/// What the kernel says about its quirks: usb-storage's parameter and the
/// command line's word.
fn kernel_says(host: &Host) -> String {
    let param = fs::read_to_string(host.path(usb::ACTIVE_QUIRKS))
        .map(|t| format!("{} is \"{}\"", usb::ACTIVE_QUIRKS, t.trim()))
        .unwrap_or_else(|_| {
            format!(
                "{} is not there (usb-storage not loaded)",
                usb::ACTIVE_QUIRKS
            )
        });
    let cmdline = fs::read_to_string(host.path(CMDLINE)).unwrap_or_default();
    let word = cmdline
        .split_whitespace()
        .rfind(|w| w.starts_with(&format!("{KEY}=")))
        .map_or_else(
            || format!("{CMDLINE} has no {KEY}="),
            |w| format!("{CMDLINE} has {w}"),
        );
    format!("{param}; {word}")
}

/// After the reboot, with a quirk still missing: what was written where,
/// what the kernel says, and what to do.
pub(super) fn not_in_effect(host: &Host, quirks: &[UsbQuirk], files: &[String]) -> String {
    let on = active(host);
    let missing: Vec<UsbQuirk> = quirks.iter().filter(|q| !on.contains(q)).copied().collect();
    let files_now: Vec<String> = files
        .iter()
        .map(|f| match fs::read_to_string(host.path(f)) {
            Ok(text) if carries(f, &text, &missing) => format!("{f} (which still has it)"),
            Ok(_) => format!("{f} (which no longer has it: something rewrote it)"),
            Err(e) => format!("{f} (unreadable now: {e})"),
        })
        .collect();
    format!(
        "nasforge wrote {KEY}={} to {}, but {}. The board's boot does not take its kernel command line from there: add the word to the command line your boot loader uses, reboot, and run setup again",
        entries(&missing),
        files_now.join(" and "),
        kernel_says(host)
    )
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
            zfs: Default::default(),
            failing: Default::default(),
            existing: Vec::new(),
            existing_pools: Vec::new(),
        }
    }

    fn writes(step: &Step) -> Vec<(String, String)> {
        step.actions
            .iter()
            .filter_map(|a| match a {
                Action::WriteFile { path, contents, .. } => Some((path.clone(), contents.clone())),
                _ => None,
            })
            .collect()
    }

    const PIOS: &str = "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootfstype=ext4 fsck.repair=yes rootwait\n";

    #[test]
    fn a_listed_bridge_on_uas_is_written_to_cmdline_txt_and_the_step_ends_with_a_reboot() {
        let inv = inventory(vec![usb_disk(0x357d, 0x7788, UsbDriver::Uas)]);
        let need = needed(&storage(&[]), &inv);
        assert_eq!(need.len(), 1);
        assert!(
            need[0]
                .why
                .starts_with("sdb's bridge JMicron JMS566 (357d:7788) is driven by uas")
                && need[0].why.contains("unusual_uas.h"),
            "{}",
            need[0].why
        );
        let (_d, host) = host(&[("/boot/firmware/cmdline.txt", PIOS)]);
        let step = step(&host, "/boot/firmware", &need).unwrap().unwrap();
        assert!(
            step.title
                .contains("reboot once before anything is created")
        );
        assert!(step.title.contains("JMicron JMS566"), "{}", step.title);
        assert_eq!(
            writes(&step),
            [(
                "/boot/firmware/cmdline.txt".to_string(),
                PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=357d:7788:u\n")
            )]
        );
        assert!(step.reboots());
        assert_eq!(step.actions.last().unwrap().to_string(), "systemctl reboot");
        assert_eq!(step.check(&host), Check::Pending);

        // The same bridge on usb-storage, or one not on the list: nothing.
        let calm = inventory(vec![
            usb_disk(0x357d, 0x7788, UsbDriver::UsbStorage),
            usb_disk(0x174c, 0x55aa, UsbDriver::Uas),
        ]);
        assert!(needed(&storage(&[]), &calm).is_empty());
    }

    #[test]
    fn active_from_the_module_or_the_command_line_and_only_with_u() {
        let need = needed(&storage(&["152d:0578"]), &inventory(vec![]));
        for (file, text) in [
            (usb::ACTIVE_QUIRKS, "0bc2:2312:r,152D:0578:u\n"),
            (
                CMDLINE,
                "root=/dev/vda2 usb-storage.quirks=152d:0578:ut rw\n",
            ),
        ] {
            let (_d, host) = host(&[("/boot/firmware/cmdline.txt", PIOS), (file, text)]);
            assert_eq!(step(&host, "/boot/firmware", &need), Ok(None), "{file}");
        }
        let (_d, host) = host(&[
            ("/boot/firmware/cmdline.txt", PIOS),
            (usb::ACTIVE_QUIRKS, "152d:0578:r\n"),
        ]);
        assert!(step(&host, "/boot/firmware", &need).unwrap().is_some());
    }

    #[test]
    fn an_existing_quirks_word_is_merged_and_debian_and_armbian_files_edited() {
        let (_d, host) = host(&[
            (
                "/boot/firmware/cmdline.txt",
                "root=LABEL=RASPIROOT usb-storage.quirks=0bc2:2312:u,174c:55aa:r rootwait\n",
            ),
            (RASPI_FIRMWARE_HOOK, "#!/bin/sh\n"),
            (
                ARMBIAN_ENV,
                "verbosity=1\nextraargs=cma=256M\noverlays=sata1\n",
            ),
        ]);
        let need = needed(&storage(&["152d:0578", "174c:55aa"]), &inventory(vec![]));
        let step = step(&host, "/boot/firmware", &need).unwrap().unwrap();
        assert_eq!(
            writes(&step),
            [
                (
                    "/boot/firmware/cmdline.txt".to_string(),
                    "root=LABEL=RASPIROOT usb-storage.quirks=0bc2:2312:u,174c:55aa:ru,152d:0578:u rootwait\n".to_string()
                ),
                (
                    RASPI_EXTRA_CMDLINE.to_string(),
                    "usb-storage.quirks=152d:0578:u,174c:55aa:u\n".to_string()
                ),
                (
                    ARMBIAN_ENV.to_string(),
                    "verbosity=1\nextraargs=cma=256M usb-storage.quirks=152d:0578:u,174c:55aa:u\noverlays=sata1\n".to_string()
                ),
            ]
        );
    }

    #[test]
    fn armbian_without_extraargs_gets_the_line() {
        let (_d, host) = host(&[(ARMBIAN_ENV, "verbosity=1\nrootdev=UUID=abcd\n")]);
        let need = needed(&storage(&["152d:0578"]), &inventory(vec![]));
        let step = step(&host, "/boot", &need).unwrap().unwrap();
        assert_eq!(
            writes(&step),
            [(
                ARMBIAN_ENV.to_string(),
                "verbosity=1\nrootdev=UUID=abcd\nextraargs=usb-storage.quirks=152d:0578:u\n"
                    .to_string()
            )]
        );
    }

    #[test]
    fn no_command_line_to_write_or_one_the_boot_does_not_read_is_said_not_rebooted_for() {
        let recipe = needed(&storage(&["152d:0578"]), &inventory(vec![]));
        let (_d, bare) = host(&[]);
        let cannot = step(&bare, "/boot", &recipe).unwrap_err();
        assert!(cannot.named_in_recipe);
        assert!(
            cannot
                .why
                .contains("no /boot/cmdline.txt or /boot/armbianEnv.txt"),
            "{}",
            cannot.why
        );

        let written = PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=152d:0578:u\n");
        let (_d, ignored) = host(&[("/boot/firmware/cmdline.txt", &written)]);
        let cannot = step(&ignored, "/boot/firmware", &recipe).unwrap_err();
        assert!(
            cannot.why.starts_with("/boot/firmware/cmdline.txt already carries `usb-storage.quirks=152d:0578:u`, but the running kernel does not have it (/sys/module/usb_storage/parameters/quirks is not there (usb-storage not loaded); /proc/cmdline has no usb-storage.quirks=)"),
            "{}",
            cannot.why
        );

        let listed = needed(
            &storage(&[]),
            &inventory(vec![usb_disk(0x357d, 0x7788, UsbDriver::Uas)]),
        );
        assert!(!step(&bare, "/boot", &listed).unwrap_err().named_in_recipe);
    }

    #[test]
    fn after_a_reboot_without_the_quirk_the_text_names_the_file_and_what_sys_says() {
        let written = PIOS.replace("rootwait\n", "rootwait usb-storage.quirks=152d:0578:u\n");
        let (_d, host) = host(&[
            ("/boot/firmware/cmdline.txt", &written),
            (usb::ACTIVE_QUIRKS, "\n"),
            (CMDLINE, "root=/dev/mmcblk0p2 rw\n"),
        ]);
        let quirk: UsbQuirk = "152d:0578".parse().unwrap();
        let text = not_in_effect(&host, &[quirk], &["/boot/firmware/cmdline.txt".into()]);
        assert_eq!(
            text,
            "nasforge wrote usb-storage.quirks=152d:0578:u to /boot/firmware/cmdline.txt (which still has it), but /sys/module/usb_storage/parameters/quirks is \"\"; /proc/cmdline has no usb-storage.quirks=. The board's boot does not take its kernel command line from there: add the word to the command line your boot loader uses, reboot, and run setup again"
        );
    }
}
