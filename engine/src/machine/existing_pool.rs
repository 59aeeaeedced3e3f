//! ZFS pools another machine made, found on the disks as they are: what
//! `zpool import` lists without importing anything (it reads the labels
//! through libblkid, in read-only SPA mode), each member traced back to
//! its disk. Whether a pool can be adopted, and under which recipe entry,
//! is the planner's to say.

use crate::command::{Ask, Cmd};
use crate::machine::printable;
use crate::machine::zfs_report::{ImportListing, Vdev};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One importable pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingPool {
    pub name: String,
    /// The pool's GUID in decimal, as `zpool import` lists it.
    pub id: String,
    /// zpool's word for its health: ONLINE, DEGRADED, UNAVAIL, FAULTED.
    pub state: String,
    /// zpool's `status:` and `action:` paragraphs, as it wrote them.
    pub status: Option<String>,
    pub action: Option<String>,
    /// The layout of its data vdevs: `mirror`, `raidz1`… or `stripe` for
    /// disks with no redundancy; `mixed` when they differ.
    pub layout: String,
    pub vdevs: usize,
    /// Its disks as zpool lists them, with the kernel name of the disk
    /// each is on when it could be traced (None: missing, or not found).
    pub members: Vec<PoolDisk>,
    /// Log, cache and special vdevs and spares, by heading.
    pub other: Vec<String>,
    /// What a read-only look inside showed ([`probe`]); None when it was
    /// not looked at (zpool would not import it anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed: Option<Probed>,
    /// zpool's words when the read-only import for that look failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// What a read-only import shows of a pool before it is adopted: whether an
/// operating system boots from it, and where each dataset would mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probed {
    /// `zpool get bootfs`: the dataset a system boots from, set on the
    /// root pools of Proxmox and of ZFS-on-root installs.
    pub bootfs: Option<String>,
    pub datasets: Vec<Dataset>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dataset {
    /// Under the pool's own name.
    pub name: String,
    pub mountpoint: String,
    /// Set on the dataset itself (or received with it), not inherited: it
    /// stays where it is when the pool's top is mounted elsewhere.
    pub own_mountpoint: bool,
    /// `on`, `off` or `noauto`: `zfs mount -a` mounts only `on`.
    pub canmount: String,
    /// `off`, or the cipher of a dataset whose key must be loaded first.
    pub encryption: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolDisk {
    /// zpool's name for it: a `/dev/disk/by-id` link's name, or a GUID
    /// when the disk is missing.
    pub name: String,
    pub state: String,
    pub disk: Option<String>,
}

/// The listing: every pool on the disks that is not imported here. By
/// `/dev/disk/by-id`, the names adopted pools keep in the cache file.
pub fn list_cmd() -> Cmd {
    Cmd::new(&["zpool", "import", "-d", "/dev/disk/by-id"])
}

/// A vdev's type from its config name: `raidz1-0` → raidz1, `mirror-1` →
/// mirror; None for a disk.
fn group_type(name: &str) -> Option<&str> {
    let (kind, n) = name.rsplit_once('-')?;
    (n.bytes().all(|b| b.is_ascii_digit())
        && (kind == "mirror" || kind.starts_with("raidz") || kind.starts_with("draid")))
    .then_some(kind)
}

impl ExistingPool {
    /// From one entry of the listing; `disk_of` traces a member's name to
    /// the kernel name of its disk.
    pub fn from_listing(listing: &ImportListing, disk_of: &dyn Fn(&str) -> Option<String>) -> Self {
        let top: Vec<&Vdev> = listing.vdevs.iter().filter(|v| v.level == 1).collect();
        let mut kinds: Vec<&str> = top
            .iter()
            .map(|v| group_type(&v.name).unwrap_or("stripe"))
            .collect();
        kinds.dedup();
        let layout = match kinds[..] {
            [one] => one.to_string(),
            [] => "empty".to_string(),
            _ => "mixed".to_string(),
        };
        let members = listing
            .vdevs
            .iter()
            .filter(|v| v.level > 0 && group_type(&v.name).is_none())
            .map(|v| PoolDisk {
                name: v.name.clone(),
                state: v.state.clone(),
                disk: disk_of(&v.name),
            })
            .collect();
        ExistingPool {
            name: listing.pool.clone(),
            id: listing.id.clone(),
            state: listing.state.clone(),
            status: listing.status.clone(),
            action: listing.action.clone(),
            layout,
            vdevs: top.len(),
            members,
            other: listing.other.iter().map(|(h, _)| h.clone()).collect(),
            probed: None,
            unreadable: None,
        }
    }

    /// The in-core name it has while [`probe`] looks at it: its own may be
    /// taken here, by this board's pool of the same name.
    fn probe_name(&self) -> String {
        format!("nasforge-probe-{}", self.id)
    }

    /// Read-only, under the probe's name (`-t`: the disks keep theirs),
    /// nothing mounted, into no cache file, so no boot imports it.
    pub fn probe_import(&self) -> Cmd {
        let mut argv = vec![
            "zpool",
            "import",
            "-N",
            "-o",
            "readonly=on",
            "-o",
            "cachefile=none",
            "-d",
            "/dev/disk/by-id",
        ];
        if self.needs_force() {
            argv.push("-f");
        }
        let name = self.probe_name();
        argv.extend(["-t", &self.id, &name]);
        Cmd::new(&argv)
    }

    /// Its filesystems (no snapshots or volumes), a line per property.
    pub fn datasets_cmd(&self) -> Cmd {
        Cmd::new(&[
            "zfs",
            "get",
            "-H",
            "-r",
            "-t",
            "filesystem",
            "-o",
            "name,property,value,source",
            "mountpoint,canmount,encryption",
            &self.probe_name(),
        ])
    }

    pub fn bootfs_cmd(&self) -> Cmd {
        Cmd::new(&[
            "zpool",
            "get",
            "-H",
            "-o",
            "value",
            "bootfs",
            &self.probe_name(),
        ])
    }

    pub fn probe_export(&self) -> Cmd {
        Cmd::new(&["zpool", "export", &self.probe_name()])
    }

    /// A name zfs printed under the probe's name, under the pool's own.
    fn own_name(&self, probed: &str) -> Option<String> {
        let probe = self.probe_name();
        match probed.strip_prefix(probe.as_str()) {
            Some("") => Some(self.name.clone()),
            Some(rest) if rest.starts_with('/') => Some(format!("{}{rest}", self.name)),
            _ => None,
        }
    }

    /// `zfs get -H -o name,property,value,source` of [`Self::datasets_cmd`].
    pub fn parse_datasets(&self, text: &str) -> Vec<Dataset> {
        let mut datasets: Vec<Dataset> = Vec::new();
        for line in text.lines() {
            let [name, property, value, source] = line.split('\t').collect::<Vec<_>>()[..] else {
                continue;
            };
            let Some(name) = self.own_name(name) else {
                continue;
            };
            let at = match datasets.iter().position(|d| d.name == name) {
                Some(i) => i,
                None => {
                    datasets.push(Dataset {
                        name,
                        mountpoint: String::new(),
                        own_mountpoint: false,
                        canmount: String::new(),
                        encryption: String::new(),
                    });
                    datasets.len() - 1
                }
            };
            let d = &mut datasets[at];
            match property {
                "mountpoint" => {
                    d.mountpoint = value.to_string();
                    d.own_mountpoint = matches!(source, "local" | "received");
                }
                "canmount" => d.canmount = value.to_string(),
                "encryption" => d.encryption = value.to_string(),
                _ => {}
            }
        }
        datasets
    }

    /// `zpool get -H -o value bootfs`: `-` when none is set.
    pub fn parse_bootfs(&self, text: &str) -> Option<String> {
        let value = text.trim();
        (!value.is_empty() && value != "-").then(|| self.own_name(value).unwrap_or(value.into()))
    }

    /// The pool was last used by another system and not exported there:
    /// zpool imports it only when forced (`-f`), which its action says.
    pub fn needs_force(&self) -> bool {
        self.action.as_deref().is_some_and(|a| a.contains("'-f'"))
    }

    /// Why zpool would not import it as it is, in zpool's words, if not.
    pub fn unimportable(&self) -> Option<String> {
        let readable = matches!(self.state.as_str(), "ONLINE" | "DEGRADED");
        let said = || {
            [&self.status, &self.action]
                .into_iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !readable {
            return Some(format!("zpool lists it {}: {}", self.state, said()));
        }
        let action = self.action.as_deref().unwrap_or_default();
        (action.contains("cannot be imported") || action.contains("read-only mode"))
            .then(|| format!("zpool says: {}", said()))
    }

    /// The disks it is on, by kernel name.
    pub fn disks(&self) -> impl Iterator<Item = &str> {
        self.members.iter().filter_map(|m| m.disk.as_deref())
    }
}

/// Looks inside an importable pool before anything adopts it: imported
/// read-only under a name of its own, its datasets and bootfs read, and
/// exported again, whatever was read. A read-only pool writes nothing to
/// its disks, so the machine and the disks are left as they were found.
/// zpool's words when it cannot be done.
pub fn probe(pool: &ExistingPool, ask: &mut dyn Ask) -> Result<Probed, String> {
    said(ask, &pool.probe_import())?;
    let datasets = said(ask, &pool.datasets_cmd());
    let bootfs = said(ask, &pool.bootfs_cmd());
    said(ask, &pool.probe_export()).map_err(|why| {
        format!(
            "it stays imported read-only as {}: {why}",
            pool.probe_name()
        )
    })?;
    Ok(Probed {
        bootfs: pool.parse_bootfs(&bootfs?),
        datasets: pool.parse_datasets(&datasets?),
    })
}

/// A command's output, or what it said on failing.
pub(super) fn said(ask: &mut dyn Ask, cmd: &Cmd) -> Result<String, String> {
    let answer = ask.query(cmd).map_err(|e| e.to_string())?;
    if answer.status == 0 {
        Ok(answer.stdout)
    } else {
        Err(format!("`{cmd}` said: {}", answer.stderr.trim()))
    }
}

impl fmt::Display for ExistingPool {
    /// "pool 'oldtank' (id 1234…), mirror, ONLINE: sdb, sdc"
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disks: Vec<String> = self
            .members
            .iter()
            .map(|m| match &m.disk {
                Some(d) if m.state == "ONLINE" => d.clone(),
                Some(d) => format!("{d} {}", m.state),
                None => format!("{} {}", printable(&m.name), m.state),
            })
            .collect();
        write!(
            f,
            "ZFS pool '{}' (id {}), {}{}, {}: {}",
            printable(&self.name),
            self.id,
            self.layout,
            if self.vdevs > 1 {
                format!(" in {} vdevs", self.vdevs)
            } else {
                String::new()
            },
            self.state,
            disks.join(", ")
        )?;
        if self.needs_force() {
            write!(f, "; last used by another system")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::zfs_report::parse_zpool_import;

    /// As zpool 2.x's `show_import` prints a mirror last used elsewhere
    /// and a raidz1 missing a disk.
    const LISTING: &str = "   pool: oldtank
     id: 5871402329107765531
  state: ONLINE
 status: The pool was last accessed by another system.
 action: The pool can be imported using its name or numeric identifier and
\tthe '-f' flag.
   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY
 config:

\toldtank                      ONLINE
\t  mirror-0                   ONLINE
\t    ata-QEMU_HARDDISK_old-zfs0  ONLINE
\t    ata-QEMU_HARDDISK_old-zfs1  ONLINE

   pool: backup
     id: 900
  state: DEGRADED
 status: One or more devices are missing from the system.
 action: The pool can be imported despite missing or damaged devices.  The
\tfault tolerance of the pool may be compromised if imported.
 config:

\tbackup                       DEGRADED
\t  raidz1-0                   DEGRADED
\t    ata-A                    ONLINE
\t    12345678901234567890     UNAVAIL
\t    ata-C                    ONLINE
\tlogs
\t  ata-D                      ONLINE
";

    fn found() -> Vec<ExistingPool> {
        let disk_of = |name: &str| match name {
            "ata-QEMU_HARDDISK_old-zfs0" => Some("sdx".to_string()),
            "ata-QEMU_HARDDISK_old-zfs1" => Some("sdy".to_string()),
            "ata-A" => Some("sda".to_string()),
            "ata-C" => Some("sdc".to_string()),
            _ => None,
        };
        parse_zpool_import(LISTING)
            .iter()
            .map(|l| ExistingPool::from_listing(l, &disk_of))
            .collect()
    }

    #[test]
    fn reads_pools_their_layout_and_disks_from_the_listing() {
        let pools = found();
        assert_eq!(pools.len(), 2);
        let old = &pools[0];
        assert_eq!(
            (old.name.as_str(), old.id.as_str(), old.layout.as_str()),
            ("oldtank", "5871402329107765531", "mirror")
        );
        assert_eq!(old.disks().collect::<Vec<_>>(), ["sdx", "sdy"]);
        assert!(old.needs_force() && old.unimportable().is_none());
        assert_eq!(
            old.to_string(),
            "ZFS pool 'oldtank' (id 5871402329107765531), mirror, ONLINE: sdx, sdy; last used by another system"
        );
        let backup = &pools[1];
        assert_eq!(backup.layout, "raidz1");
        assert_eq!(backup.other, ["logs"]);
        assert_eq!(backup.members.len(), 3, "{:?}", backup.members);
        assert!(!backup.needs_force() && backup.unimportable().is_none());
        assert!(
            backup
                .to_string()
                .ends_with("DEGRADED: sda, 12345678901234567890 UNAVAIL, sdc"),
            "{backup}"
        );
    }

    #[test]
    fn a_pool_zpool_cannot_open_says_why_in_its_words() {
        let listing = parse_zpool_import(
            "   pool: gone\n     id: 7\n  state: UNAVAIL\n status: One or more devices are missing from the system.\n action: The pool cannot be imported. Attach the missing\n\tdevices and try again.\n config:\n\n\tgone    UNAVAIL  insufficient replicas\n\t  sdq   UNAVAIL\n",
        );
        let pool = ExistingPool::from_listing(&listing[0], &|_| None);
        assert_eq!(pool.layout, "stripe");
        let why = pool.unimportable().unwrap();
        assert!(
            why.starts_with("zpool lists it UNAVAIL: One or more devices")
                && why.contains("Attach the missing devices and try again."),
            "{why}"
        );
        let features = parse_zpool_import(
            "   pool: new\n     id: 8\n  state: ONLINE\n status: The pool uses the following feature(s) not supported on this system:\n\tcom.klarasystems:vdev_zaps_v2\n action: The pool can only be accessed in read-only mode on this system. It\n\tcannot be accessed in read-write mode because it uses the following\n\tfeature(s) not supported on this system:\n config:\n\n\tnew     ONLINE\n\t  sdr   ONLINE\n",
        );
        let pool = ExistingPool::from_listing(&features[0], &|_| None);
        assert!(pool.unimportable().unwrap().contains("read-only mode"));
    }

    #[test]
    fn a_look_inside_reads_datasets_under_the_pools_own_name() {
        let pool = &found()[0];
        assert_eq!(
            pool.probe_import().to_string(),
            "zpool import -N -o readonly=on -o cachefile=none -d /dev/disk/by-id -f -t 5871402329107765531 nasforge-probe-5871402329107765531"
        );
        // As zfs 2.x prints `get -H -o name,property,value,source`.
        let text = "nasforge-probe-5871402329107765531\tmountpoint\t/oldtank\tdefault
nasforge-probe-5871402329107765531\tcanmount\ton\tdefault
nasforge-probe-5871402329107765531\tencryption\toff\tdefault
nasforge-probe-5871402329107765531/home\tmountpoint\t/home\tlocal
nasforge-probe-5871402329107765531/home\tcanmount\ton\tdefault
nasforge-probe-5871402329107765531/home\tencryption\toff\tdefault
nasforge-probe-5871402329107765531/vault\tmountpoint\t/oldtank/vault\tdefault
nasforge-probe-5871402329107765531/vault\tcanmount\ton\tdefault
nasforge-probe-5871402329107765531/vault\tencryption\taes-256-gcm\t-
";
        let datasets = pool.parse_datasets(text);
        assert_eq!(
            datasets,
            [
                Dataset {
                    name: "oldtank".into(),
                    mountpoint: "/oldtank".into(),
                    own_mountpoint: false,
                    canmount: "on".into(),
                    encryption: "off".into(),
                },
                Dataset {
                    name: "oldtank/home".into(),
                    mountpoint: "/home".into(),
                    own_mountpoint: true,
                    canmount: "on".into(),
                    encryption: "off".into(),
                },
                Dataset {
                    name: "oldtank/vault".into(),
                    mountpoint: "/oldtank/vault".into(),
                    own_mountpoint: false,
                    canmount: "on".into(),
                    encryption: "aes-256-gcm".into(),
                },
            ]
        );
        assert_eq!(pool.parse_bootfs("-\n"), None);
        assert_eq!(
            pool.parse_bootfs("nasforge-probe-5871402329107765531/ROOT/pve-1\n")
                .as_deref(),
            Some("oldtank/ROOT/pve-1")
        );
    }
}
