//! md arrays another machine made, found on the disks as they are: each
//! member's superblock read with `mdadm --examine --export` (which reads
//! and writes nothing), grouped by the array's UUID. Nothing is assembled
//! here; whether an array can be adopted, and under which recipe entry, is
//! the planner's to say.

use crate::command::Cmd;
use crate::machine::printable;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One md array found on the disks, from its members' superblocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingMd {
    /// md's array UUID as mdadm prints it (`3f1c…:…:…:…`).
    pub uuid: String,
    /// The name in the superblock, `<homehost>:<name>` for metadata 1.x
    /// (`openmediavault:0`, `DiskStation:2`); none for metadata 0.90.
    pub name: Option<String>,
    /// md's word for the level: `raid1`, `raid5`, `raid6`, `raid10`, `raid0`.
    pub level: String,
    /// How many members the array has when whole (`raid_disks`).
    pub raid_devices: usize,
    /// The usable size mdadm works out from the superblock, in its words.
    pub size: Option<String>,
    /// Its members on this machine, newest superblock first.
    pub members: Vec<ExistingMember>,
    /// What a read-only look inside found ([`super::md_contents::probe`]):
    /// libblkid's name for it (`ext4`, `LVM2_member`), empty when libblkid
    /// knows nothing there; None when it was not looked at (md would not
    /// run it anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<String>,
    /// mdadm's or blkid's words when that look failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingMember {
    /// Kernel name of the device holding the superblock: the whole disk
    /// (`sdb`, as OpenMediaVault makes them) or a partition (`sdb5`, as a
    /// Synology does).
    pub device: String,
    /// Kernel name of the disk it is on.
    pub disk: String,
    /// md's UUID of this member.
    pub dev_uuid: Option<String>,
    /// How many times md updated this superblock: a member behind the
    /// newest was out of the array when it last ran.
    pub events: u64,
    /// A hot spare: it holds no data of the array.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spare: bool,
}

/// What `mdadm --examine --export` says of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Examined {
    pub uuid: String,
    pub name: Option<String>,
    pub level: String,
    pub raid_devices: usize,
    pub size: Option<String>,
    pub dev_uuid: Option<String>,
    pub events: u64,
    /// Set from the long `--examine` (see [`is_spare`]); the export has no
    /// role.
    pub spare: bool,
}

/// Whether mdadm's long `--examine` calls the device a spare: metadata
/// 1.x says `Device Role : spare`, 0.90 lists the device itself on its
/// `this` line with `spare` (super1.c `examine_super1`, super0.c
/// `examine_super0`).
pub fn is_spare(long: &str) -> bool {
    long.lines().any(|l| {
        let l = l.trim();
        l.strip_prefix("Device Role :")
            .is_some_and(|r| r.trim() == "spare")
            || (l.starts_with("this ") && l.split_whitespace().any(|w| w == "spare"))
    })
}

/// Parses `mdadm --examine --export` (super1.c `export_examine_super1`,
/// super0.c for 0.90): `KEY=value` lines. None for a device with no md
/// superblock mdadm can read, or one of a container (IMSM, DDF fake RAID),
/// which is the firmware's, not an array nasforge can adopt.
pub fn parse_examine(text: &str) -> Option<Examined> {
    let fields: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let level = fields.get("MD_LEVEL")?;
    if *level == "container" {
        return None;
    }
    Some(Examined {
        uuid: fields.get("MD_UUID")?.to_string(),
        name: fields
            .get("MD_NAME")
            .filter(|n| !n.is_empty())
            .map(|n| n.to_string()),
        level: level.to_string(),
        raid_devices: fields.get("MD_DEVICES")?.parse().ok()?,
        size: fields.get("MD_ARRAY_SIZE").map(|s| s.to_string()),
        dev_uuid: fields.get("MD_DEV_UUID").map(|s| s.to_string()),
        events: fields
            .get("MD_EVENTS")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
        spare: false,
    })
}

/// The command that reads one device's superblock.
pub fn examine_cmd(device: &str) -> Cmd {
    Cmd::new(&["mdadm", "--examine", "--export", &format!("/dev/{device}")])
}

/// The same in mdadm's long form, which alone says whether it is a spare.
pub fn examine_long_cmd(device: &str) -> Cmd {
    Cmd::new(&["mdadm", "--examine", &format!("/dev/{device}")])
}

/// How an array is assembled to be looked into, or adopted: read-only
/// ("no writes will be allowed to the array, and no resync, recovery, or
/// reshape will be started", mdadm.8), `--run` when a member is missing.
pub fn assemble_readonly(device: &str, uuid: &str, devices: &[String], run: bool) -> Cmd {
    let uuid = format!("--uuid={uuid}");
    let mut argv = vec!["mdadm", "--assemble", device, "--readonly", &uuid];
    if run {
        argv.push("--run");
    }
    argv.extend(devices.iter().map(String::as_str));
    Cmd::new(&argv)
}

/// What is on an array, by libblkid's probe of the device itself (`-p`:
/// not udev's cache, which has not seen it yet). blkid exits 2 when it
/// finds nothing.
pub fn probe_type(device: &str) -> Cmd {
    Cmd::new(&["blkid", "-p", "-o", "value", "-s", "TYPE", device])
}

/// Members grouped into arrays by UUID, in the order their first member
/// was found; the newest superblock says what the array is.
pub fn group(examined: Vec<(String, String, Examined)>) -> Vec<ExistingMd> {
    let mut arrays: Vec<(ExistingMd, u64)> = Vec::new();
    for (device, disk, e) in examined {
        let member = ExistingMember {
            device,
            disk,
            dev_uuid: e.dev_uuid.clone(),
            events: e.events,
            spare: e.spare,
        };
        match arrays.iter_mut().find(|(a, _)| a.uuid == e.uuid) {
            Some((array, newest)) => {
                if e.events > *newest {
                    *newest = e.events;
                    array.name = e.name;
                    array.level = e.level;
                    array.raid_devices = e.raid_devices;
                    array.size = e.size;
                }
                array.members.push(member);
            }
            None => arrays.push((
                ExistingMd {
                    uuid: e.uuid,
                    name: e.name,
                    level: e.level,
                    raid_devices: e.raid_devices,
                    size: e.size,
                    members: vec![member],
                    holds: None,
                    unreadable: None,
                },
                e.events,
            )),
        }
    }
    arrays
        .into_iter()
        .map(|(mut a, _)| {
            a.members.sort_by_key(|m| std::cmp::Reverse(m.events));
            a
        })
        .collect()
}

impl ExistingMd {
    /// "system" or "swap" when the array is laid out as a Synology's DSM
    /// keeps its own system and swap: a raid1 with 0.90 superblocks (no
    /// name) over partition 1, or partition 2, of every disk, its files
    /// being on arrays of partitions 5 and up (and LVM over those). Another
    /// Linux system may keep its /boot and swap so too. Either way it is an
    /// operating system's, not files to adopt and serve.
    pub fn system_array(&self) -> Option<&'static str> {
        if self.name.is_some() || self.level != "raid1" || self.members.is_empty() {
            return None;
        }
        let number = |m: &ExistingMember| {
            let rest = m.device.strip_prefix(m.disk.as_str())?;
            rest.strip_prefix('p').unwrap_or(rest).parse::<u32>().ok()
        };
        let first = number(&self.members[0])?;
        if !self.members.iter().all(|m| number(m) == Some(first)) {
            return None;
        }
        match first {
            1 => Some("system"),
            2 => Some("swap"),
            _ => None,
        }
    }

    /// The name without the home host: `media` of `oldnas:media`, what a
    /// recipe calls it.
    pub fn short_name(&self) -> Option<&str> {
        self.name
            .as_deref()
            .map(|n| n.rsplit_once(':').map_or(n, |(_, short)| short))
    }

    /// Whether a member's superblock is recent enough for md to take it:
    /// at most one event behind the newest, the margin mdadm's Assemble.c
    /// and the kernel allow (a crash between two members' updates).
    fn is_current(&self, m: &ExistingMember) -> bool {
        let newest = self.members.first().map_or(0, |m| m.events);
        m.events + 1 >= newest
    }

    /// The members holding data whose superblock md takes: the ones it
    /// assembles into the array's slots.
    pub fn current(&self) -> impl Iterator<Item = &ExistingMember> {
        self.members
            .iter()
            .filter(|m| !m.spare && self.is_current(m))
    }

    /// Hot spares md takes beside them.
    pub fn spares(&self) -> impl Iterator<Item = &ExistingMember> {
        self.members
            .iter()
            .filter(|m| m.spare && self.is_current(m))
    }

    /// Members left behind: their superblock is older than the rest.
    pub fn stale(&self) -> impl Iterator<Item = &ExistingMember> {
        self.members.iter().filter(|m| !self.is_current(m))
    }

    /// Every device md assembles: the current members and the spares.
    pub fn assembled(&self) -> impl Iterator<Item = &ExistingMember> {
        self.members.iter().filter(|m| self.is_current(m))
    }

    /// How many of its members are not here, or are too old to count.
    pub fn missing(&self) -> usize {
        self.raid_devices.saturating_sub(self.current().count())
    }

    /// How many members md can lose at this level and still run.
    pub fn survives(&self) -> usize {
        match self.level.as_str() {
            "raid1" => self.raid_devices.saturating_sub(1),
            "raid4" | "raid5" => 1,
            "raid6" => 2,
            // The near-2 layout every tool makes by default: one of each
            // pair; which ones is not known from the count alone.
            "raid10" => 1,
            _ => 0,
        }
    }

    /// Why md would not run it as it is found, if it would not.
    pub fn unstartable(&self) -> Option<String> {
        let missing = self.missing();
        (missing > self.survives()).then(|| {
            format!(
                "{} of its {} members are here ({} missing); {} runs with at most {} missing, and nasforge never forces an array to start",
                self.current().count(),
                self.raid_devices,
                missing,
                self.level,
                self.survives()
            )
        })
    }
}

impl fmt::Display for ExistingMd {
    /// "raid5 'openmediavault:0' (UUID 3f1c…), 3 of 3 members: sdb, sdc, sdd"
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" '{}'", printable(n)))
            .unwrap_or_default();
        let current: Vec<&str> = self.current().map(|m| m.device.as_str()).collect();
        write!(
            f,
            "{}{name} (UUID {}), {} of {} members: {}",
            self.level,
            self.uuid,
            current.len(),
            self.raid_devices,
            current.join(", ")
        )?;
        let spares: Vec<&str> = self.spares().map(|m| m.device.as_str()).collect();
        if !spares.is_empty() {
            write!(f, "; hot spare(s): {}", spares.join(", "))?;
        }
        let stale: Vec<&str> = self.stale().map(|m| m.device.as_str()).collect();
        if !stale.is_empty() {
            write!(f, "; left behind: {}", stale.join(", "))?;
        }
        if let Some(size) = &self.size {
            write!(f, "; {size}")?;
        }
        match self.holds.as_deref() {
            Some("") => write!(f, "; holds no filesystem libblkid knows")?,
            Some(fstype) => write!(f, "; holds {}", printable(fstype))?,
            None => {}
        }
        if let Some(role) = self.system_array() {
            write!(
                f,
                "; laid out as a Synology's DSM keeps its {role} (or another Linux system's), not files"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines super1.c's `export_examine_super1` prints, for a member of
    /// a raid5 OpenMediaVault made (`omv-mkraid` names it after its host).
    const OMV_MEMBER: &str = "MD_LEVEL=raid5\nMD_DEVICES=3\nMD_NAME=openmediavault:0\nMD_ARRAY_SIZE=2.14 GB\nMD_UUID=3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708\nMD_UPDATE_TIME=1796380000\nMD_DEV_UUID=0a0b0c0d:0e0f1011:12131415:16171819\nMD_EVENTS=18\n";

    fn member(device: &str, events: u64, uuid: &str) -> (String, String, Examined) {
        let text = OMV_MEMBER
            .replace("MD_EVENTS=18", &format!("MD_EVENTS={events}"))
            .replace("3f1c2a4b", uuid);
        (
            device.to_string(),
            device.trim_end_matches(char::is_numeric).to_string(),
            parse_examine(&text).unwrap(),
        )
    }

    #[test]
    fn a_member_superblock_is_read_from_mdadms_export() {
        let e = parse_examine(OMV_MEMBER).unwrap();
        assert_eq!(e.uuid, "3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708");
        assert_eq!(e.name.as_deref(), Some("openmediavault:0"));
        assert_eq!(
            (e.level.as_str(), e.raid_devices, e.events),
            ("raid5", 3, 18)
        );
        assert_eq!(e.size.as_deref(), Some("2.14 GB"));
    }

    #[test]
    fn nothing_mdadm_cannot_read_and_no_fake_raid_container_counts() {
        assert_eq!(parse_examine(""), None);
        assert_eq!(
            parse_examine("MD_METADATA=imsm\nMD_LEVEL=container\nMD_UUID=a:b:c:d\nMD_DEVICES=2\n"),
            None
        );
    }

    #[test]
    fn a_raid1_of_every_disks_first_or_second_partition_with_no_name_is_a_systems() {
        let super0 = "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_UUID=a1b2c3d4:e5f60718:293a4b5c:6d7e8f90\nMD_UPDATE_TIME=1796380000\nMD_EVENTS=40\n";
        let on = |devices: &[(&str, &str)], text: &str| {
            group(
                devices
                    .iter()
                    .map(|(d, disk)| {
                        (
                            d.to_string(),
                            disk.to_string(),
                            parse_examine(text).unwrap(),
                        )
                    })
                    .collect(),
            )
            .remove(0)
        };
        let system = on(&[("sda1", "sda"), ("sdb1", "sdb")], super0);
        assert_eq!(system.system_array(), Some("system"));
        assert!(
            system
                .to_string()
                .ends_with("; laid out as a Synology's DSM keeps its system (or another Linux system's), not files"),
            "{system}"
        );
        let nvme = on(
            &[("nvme0n1p2", "nvme0n1"), ("nvme1n1p2", "nvme1n1")],
            super0,
        );
        assert_eq!(nvme.system_array(), Some("swap"));
        for not in [
            on(&[("sda5", "sda"), ("sdb5", "sdb")], super0),
            on(&[("sda1", "sda"), ("sdb2", "sdb")], super0),
            on(&[("sda", "sda"), ("sdb", "sdb")], super0),
            on(
                &[("sda1", "sda"), ("sdb1", "sdb")],
                &super0.replace("raid1", "raid5"),
            ),
            on(&[("sda1", "sda"), ("sdb1", "sdb")], OMV_MEMBER),
        ] {
            assert_eq!(not.system_array(), None, "{not}");
        }
    }

    #[test]
    fn members_group_by_uuid_and_one_left_behind_is_stale() {
        let arrays = group(vec![
            member("sdb", 18, "3f1c2a4b"),
            member("sdc", 12, "3f1c2a4b"),
            member("sdd5", 7, "aaaaaaaa"),
            member("sde", 18, "3f1c2a4b"),
        ]);
        assert_eq!(arrays.len(), 2);
        let omv = &arrays[0];
        assert_eq!(omv.short_name(), Some("0"));
        let current: Vec<&str> = omv.current().map(|m| m.device.as_str()).collect();
        assert_eq!(current, ["sdb", "sde"]);
        assert_eq!(omv.missing(), 1);
        assert_eq!(omv.unstartable(), None);
        assert_eq!(
            omv.to_string(),
            "raid5 'openmediavault:0' (UUID 3f1c2a4b:5d6e7f80:91a2b3c4:d5e6f708), 2 of 3 members: sdb, sde; left behind: sdc; 2.14 GB"
        );
        let other = &arrays[1];
        assert_eq!(other.members[0].disk, "sdd");
        assert_eq!(
            other.unstartable().unwrap(),
            "1 of its 3 members are here (2 missing); raid5 runs with at most 1 missing, and nasforge never forces an array to start"
        );
    }

    #[test]
    fn one_event_behind_is_current_as_md_takes_it_and_a_spare_fills_no_slot() {
        let mut arrays = group(vec![
            member("sdb", 18, "3f1c2a4b"),
            member("sdc", 17, "3f1c2a4b"),
            member("sdd", 18, "3f1c2a4b"),
        ]);
        let a = &mut arrays[0];
        assert_eq!((a.missing(), a.stale().count()), (0, 0));
        a.members
            .iter_mut()
            .find(|m| m.device == "sdd")
            .unwrap()
            .spare = true;
        assert_eq!(a.missing(), 1);
        assert_eq!(a.assembled().count(), 3);
        assert!(
            a.to_string()
                .contains("2 of 3 members: sdb, sdc; hot spare(s): sdd")
        );
    }

    #[test]
    fn the_long_examine_says_which_device_is_a_spare() {
        assert!(is_spare(
            "    Array UUID : a:b:c:d\n   Device Role : spare\n   Array State : AA. ('A' == active)\n"
        ));
        assert!(!is_spare("   Device Role : Active device 2\n"));
        assert!(is_spare(
            "      Number   Major   Minor   RaidDevice State\nthis     3       8       48        3      spare   /dev/sdd\n"
        ));
        assert!(!is_spare(
            "this     0       8       16        0      active sync   /dev/sdb\n"
        ));
    }

    #[test]
    fn a_name_from_the_disk_cannot_fake_a_line() {
        let mut a = group(vec![member("sdb", 1, "3f1c2a4b")]).remove(0);
        a.name = Some("evil\nok: fine".into());
        assert!(!a.to_string().contains('\n'));
    }
}
