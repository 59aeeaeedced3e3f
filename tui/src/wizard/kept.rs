//! Disks kept as they are: a disk that already holds someone's files is
//! shared with them, never partitioned or formatted. Which filesystem of a
//! disk can be kept, the rule that finds that one disk again, and the
//! `[[storage.disks]]` entry and share it becomes. Pure.

use nasforge_engine::machine::disks::{Disk, Inventory};
use nasforge_engine::machine::signature::Signature;
use nasforge_engine::matching;
use nasforge_engine::spec::{self, Count, DiskMatch, KeptDisk, KeptFilesystem, Share, Smb};

/// A disk marked "share as it is", as it was found when it was marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Kernel name of the disk.
    pub disk: String,
    /// Kernel name of what holds the filesystem: the disk or a partition.
    pub device: String,
    pub partition: Option<u32>,
    /// The filesystem as the probe names it ("ext4", "exfat").
    pub fstype: String,
    pub label: Option<String>,
    pub filesystem: KeptFilesystem,
    /// The rule that finds this disk and no other.
    pub pin: DiskMatch,
}

impl Kept {
    /// "ext4 'photos'", or "ext4" without a label.
    pub fn filesystem_words(&self) -> String {
        match &self.label {
            Some(label) => format!("{} '{label}'", self.fstype),
            None => self.fstype.clone(),
        }
    }

    /// "ext4 'photos' on sdd"
    pub fn describe(&self) -> String {
        format!("{} on {}", self.filesystem_words(), self.device)
    }
}

pub const KEEPABLE: &str = "ext4, xfs, btrfs, exfat and ntfs";

/// What of `disk` can be shared as it is, or why nothing can. The one
/// filesystem setup can mount is taken, so a Mac's exFAT disk with its
/// small EFI partition beside it can be kept.
pub fn keep(disk: &Disk, inventory: &Inventory) -> Result<Kept, String> {
    if !disk.in_use.is_empty() {
        let why: Vec<String> = disk.in_use.iter().map(ToString::to_string).collect();
        return Err(format!("the system uses it: {}", why.join(", ")));
    }
    let contents = disk.all_contents();
    // Mounting a member of an array, a pool or an encrypted volume on its
    // own would bypass the layer that owns it.
    if let Some((on, layer)) = contents.iter().find(|(_, s)| {
        matches!(
            s,
            Signature::MdMember { .. }
                | Signature::ZfsMember
                | Signature::LvmMember
                | Signature::Luks
        )
    }) {
        return Err(format!(
            "{on} holds {layer}: only a plain filesystem can be shared as it is"
        ));
    }
    let filesystems: Vec<(&String, &str, Option<&String>, Option<&String>)> = contents
        .iter()
        .filter_map(|(on, s)| match s {
            Signature::Filesystem {
                fstype,
                label,
                uuid,
            } => Some((on, fstype.as_str(), label.as_ref(), uuid.as_ref())),
            _ => None,
        })
        .collect();
    if filesystems.is_empty() {
        return Err(if disk.is_blank() {
            "it is empty, so there is nothing to keep".to_string()
        } else {
            format!("it holds {}, but no filesystem", disk.describe_contents())
        });
    }
    let keepable: Vec<_> = filesystems
        .iter()
        .filter_map(|f| KeptFilesystem::from_fstype(f.1).map(|k| (f, k)))
        .collect();
    let ((on, fstype, label, uuid), filesystem) = match keepable.as_slice() {
        [one] => *one,
        [] => {
            let found: Vec<&str> = filesystems.iter().map(|f| f.1).collect();
            return Err(format!(
                "it holds {}; only {KEEPABLE} can be kept",
                found.join(", ")
            ));
        }
        several => {
            let found: Vec<String> = several
                .iter()
                .map(|((on, fstype, ..), _)| format!("{fstype} on {on}"))
                .collect();
            return Err(format!(
                "it holds {} filesystems ({}); the wizard keeps a disk with one, a recipe can keep one partition of it ([[storage.disks]] partition = N)",
                several.len(),
                found.join(", ")
            ));
        }
    };
    if uuid.is_none() {
        return Err(format!(
            "its {fstype} filesystem has no UUID to mount it by; give it one (for ext4: tune2fs -U random /dev/{on})"
        ));
    }
    let partition = disk
        .partitions
        .iter()
        .find(|p| p.name == **on)
        .map(|p| p.number);
    Ok(Kept {
        disk: disk.name.clone(),
        device: (*on).clone(),
        partition,
        fstype: fstype.to_string(),
        label: label.cloned(),
        filesystem,
        pin: pin(disk, inventory)?,
    })
}

/// The rule that finds `disk` and no other disk of `inventory`: its
/// serial, else its WWN, else its model and exact size. Some USB bridges
/// give every disk behind them one serial; a rule that finds two disks
/// could mount the wrong one's files.
pub fn pin(disk: &Disk, inventory: &Inventory) -> Result<DiskMatch, String> {
    let literal = |v: &str| Some(spec::glob::any_of(&[v]));
    let one = DiskMatch {
        count: Count::Exactly(1),
        ..DiskMatch::default()
    };
    let mut rules = Vec::new();
    if let Some(serial) = &disk.serial {
        rules.push(DiskMatch {
            serial: literal(serial),
            ..one.clone()
        });
    }
    if let Some(wwn) = &disk.wwn {
        rules.push(DiskMatch {
            wwn: literal(wwn),
            ..one.clone()
        });
    }
    if let Some(model) = &disk.model {
        rules.push(DiskMatch {
            model: literal(model),
            min_size: Some(disk.size),
            max_size: Some(disk.size),
            ..one.clone()
        });
    }
    rules
        .into_iter()
        .find(|rule| {
            inventory
                .disks
                .iter()
                .filter(|d| matching::mismatch(rule, d).is_none())
                .count()
                == 1
        })
        .ok_or_else(|| {
            "neither its serial, its WWN nor its model and size tell it from the other disks, so setup could not be sure to find it again".to_string()
        })
}

/// `text` in the characters a name allows (letters, digits, '-', '_'; no
/// leading '-'), at most 32 of them; None when nothing is left.
pub fn clean_name(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .skip_while(|c| *c == '-')
        .take(32)
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The `[[storage.disks]]` entries: each named after its filesystem's
/// label, else its disk, unique beside the array (`array`: its name and
/// mount point) and each other, mounted at /srv/<name>. Names are compared
/// without case: they are share names too, and Samba ignores case.
pub fn entries(kept: &[&Kept], array: Option<(&str, &str)>) -> Vec<KeptDisk> {
    let mut used: Vec<String> = array
        .iter()
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect();
    let array_mount = array.map(|(_, mount)| mount.trim_end_matches('/'));
    kept.iter()
        .map(|k| {
            let base = k
                .label
                .as_deref()
                .and_then(clean_name)
                .unwrap_or_else(|| k.disk.clone());
            let free = |name: &String| {
                !used.contains(&name.to_ascii_lowercase())
                    && array_mount != Some(format!("/srv/{name}").as_str())
            };
            let name = std::iter::once(base.clone())
                .chain((2..).map(|n| {
                    let suffix = format!("-{n}");
                    let room = 32 - suffix.len();
                    format!("{}{suffix}", &base[..base.len().min(room)])
                }))
                .find(free)
                .expect("the suffixes never run out");
            used.push(name.to_ascii_lowercase());
            KeptDisk {
                mount: format!("/srv/{name}"),
                name,
                disk: k.pin.clone(),
                partition: k.partition,
                filesystem: Some(k.filesystem),
                keep: true,
            }
        })
        .collect()
}

/// A kept disk's share: guests read its files without a password and
/// nobody writes, so files that were someone's before this NAS stay as
/// they were until a person decides otherwise.
pub fn share(disk: &KeptDisk) -> Share {
    Share {
        quota: None,
        name: disk.name.clone(),
        path: disk.mount.clone(),
        smb: Some(Smb {
            users: Vec::new(),
            timemachine: false,
            timemachine_max_size: None,
            readonly: true,
            guest: true,
        }),
        nfs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(disk: &str, label: Option<&str>) -> Kept {
        Kept {
            disk: disk.into(),
            device: disk.into(),
            partition: None,
            fstype: "ext4".into(),
            label: label.map(str::to_string),
            filesystem: KeptFilesystem::Ext4,
            pin: DiskMatch::default(),
        }
    }

    fn names(entries: &[KeptDisk]) -> Vec<(&str, &str)> {
        entries
            .iter()
            .map(|e| (e.name.as_str(), e.mount.as_str()))
            .collect()
    }

    #[test]
    fn names_come_from_the_label_else_the_disk() {
        let (a, b, c) = (
            kept("sdb", Some("Family Photos!")),
            kept("sdc", None),
            kept("sdd", Some("---")),
        );
        assert_eq!(
            names(&entries(&[&a, &b, &c], None)),
            [
                ("FamilyPhotos", "/srv/FamilyPhotos"),
                ("sdc", "/srv/sdc"),
                ("sdd", "/srv/sdd")
            ]
        );
    }

    #[test]
    fn names_stay_unique_beside_the_array_and_each_other() {
        let (a, b, c) = (
            kept("sdb", Some("data")),
            kept("sdc", Some("Media")),
            kept("sdd", Some("media")),
        );
        let long = kept("sde", Some(&"x".repeat(40)));
        let longer = kept("sdf", Some(&"x".repeat(33)));
        let shown = entries(&[&a, &b, &c, &long, &longer], Some(("data", "/srv/data")));
        assert_eq!(
            names(&shown[..3]),
            [
                ("data-2", "/srv/data-2"),
                ("Media", "/srv/Media"),
                ("media-2", "/srv/media-2")
            ]
        );
        assert_eq!(shown[3].name, "x".repeat(32));
        assert_eq!(shown[4].name, format!("{}-2", "x".repeat(30)));
        // An array named otherwise but mounted where the disk would go.
        let photos = kept("sdb", Some("photos"));
        assert_eq!(
            names(&entries(&[&photos], Some(("tank", "/srv/photos/")))),
            [("photos-2", "/srv/photos-2")]
        );
    }

    #[test]
    fn clean_names_hold_only_what_a_name_allows() {
        assert_eq!(clean_name("my disk"), Some("mydisk".into()));
        assert_eq!(clean_name("--a-b"), Some("a-b".into()));
        assert_eq!(clean_name("Fotos 2024 (alt)"), Some("Fotos2024alt".into()));
        assert_eq!(clean_name("ÄÖÜ"), None);
        assert_eq!(clean_name(&"y".repeat(50)).map(|n| n.len()), Some(32));
    }
}
