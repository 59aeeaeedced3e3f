//! An old NAS's md array or ZFS pool, adopted as it is: the array a disk
//! belongs to, as setup found it on the disks (superblocks and labels, a
//! pool looked into read-only), and the `import = true` entry it becomes,
//! so the planner and the adopt step are the ones a recipe's import uses.
//! Pure.

use super::choices::{FILESYSTEMS, LEVELS, ZFS_LEVELS};
use nasforge_engine::machine::disks::Inventory;
use nasforge_engine::machine::existing::ExistingMd;
use nasforge_engine::spec::{Array, Filesystem, Level};

/// The array or pool the person chose to adopt, as it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    /// md's array UUID, or the pool's numeric id: what `uuid = "…"` takes,
    /// so the run adopts this one even if another shares its name.
    pub uuid: String,
    /// A pool's own name, which it keeps; None for an md array, which is
    /// named after its mount point here as a new one would be.
    pub pool: Option<String>,
    pub level: Level,
    /// What it holds: zfs for a pool; for an md array the filesystem a
    /// read-only look found, None when it holds nothing setup can mount
    /// (the planner says what).
    pub filesystem: Option<Filesystem>,
    /// Kernel names of the disks holding it, in the order found.
    pub disks: Vec<String>,
    /// As setup's log says it: "raid5 'openmediavault:0' (UUID …), 3 of 3
    /// members: sdb, sdc, sdd".
    pub words: String,
}

impl Adopted {
    pub fn is_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// The recipe entry that adopts it: nothing erased, partitioned or
    /// formatted; an md array is named `name` here, as a new one would be.
    /// Without a filesystem found, ext4 is said, which the planner refuses
    /// naming what the array holds.
    pub fn array(&self, mount: &str, name: &str) -> Array {
        Array {
            name: self.pool.clone().unwrap_or_else(|| name.to_string()),
            level: self.level,
            disk_match: None,
            filesystem: self.filesystem.unwrap_or(Filesystem::Ext4),
            mount: mount.to_string(),
            wipe: false,
            spares: 0,
            vdevs: None,
            parity: None,
            keep: Vec::new(),
            import: true,
            uuid: Some(self.uuid.clone()),
        }
    }
}

/// nasforge's level for md's or zpool's word for it.
fn level(word: &str) -> Option<Level> {
    LEVELS
        .iter()
        .chain(&ZFS_LEVELS)
        .copied()
        .find(|l| l.to_string() == word)
}

/// The array or pool holding `disk`, when another machine made one there:
/// None when the disk holds neither, else it or why it cannot be adopted.
/// The planner says the rest (too few members, a pool zpool would not
/// import, a dataset that would mount over the system's folders).
pub fn of_disk(disk: &str, inventory: &Inventory) -> Option<Result<Adopted, String>> {
    let arrays: Vec<&ExistingMd> = inventory
        .existing
        .iter()
        .filter(|e| e.members.iter().any(|m| m.disk == disk))
        .collect();
    // A Synology's disk holds its system's and swap's arrays before its
    // files': the files' are the ones a person means.
    if let Some(md) = arrays.iter().find(|e| e.system_array().is_none()) {
        let mut disks: Vec<String> = Vec::new();
        for m in &md.members {
            if !disks.contains(&m.disk) {
                disks.push(m.disk.clone());
            }
        }
        return Some(match level(&md.level).filter(|l| !l.is_zfs()) {
            Some(level) => Ok(Adopted {
                uuid: md.uuid.clone(),
                pool: None,
                level,
                filesystem: FILESYSTEMS
                    .into_iter()
                    .find(|f| md.holds.as_deref() == Some(&f.to_string())),
                disks,
                words: md.to_string(),
            }),
            None => Err(format!(
                "it holds a member of {md}: nasforge adopts raid0, raid1, raid5, raid6 and raid10, not {}",
                md.level
            )),
        });
    }
    if let Some(md) = arrays.first() {
        return Some(Err(format!(
            "it holds a member of {md}: an operating system's arrays are not adopted"
        )));
    }
    let pool = inventory
        .existing_pools
        .iter()
        .find(|p| p.disks().any(|d| d == disk))?;
    Some(match level(&pool.layout).filter(|l| l.is_zfs()) {
        Some(level) => Ok(Adopted {
            uuid: pool.id.clone(),
            pool: Some(pool.name.clone()),
            level,
            filesystem: Some(Filesystem::Zfs),
            disks: pool.disks().map(str::to_string).collect(),
            words: pool.to_string(),
        }),
        None => Err(format!(
            "it holds {pool}: nasforge adopts a pool of mirrors, raidz or plain disks, one kind throughout, not {}",
            pool.layout
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nasforge_testkit::old_nas::{SYNOLOGY_DATA, synology_arrays};

    #[test]
    fn on_a_synologys_disk_i_means_the_files_array_never_the_systems() {
        let mut inventory = Inventory {
            existing: synology_arrays(),
            ..Default::default()
        };
        let adopted = of_disk("sdb", &inventory).unwrap().unwrap();
        assert_eq!(adopted.uuid, SYNOLOGY_DATA);
        assert_eq!(adopted.disks, ["sda", "sdb"]);
        inventory.existing.retain(|e| e.system_array().is_some());
        let why = of_disk("sda", &inventory).unwrap().unwrap_err();
        assert!(
            why.ends_with("an operating system's arrays are not adopted")
                && why.contains("laid out as a Synology's DSM keeps its system"),
            "{why}"
        );
    }

    #[test]
    fn md_and_zpool_words_are_the_levels_a_recipe_names() {
        for (word, l) in [
            ("raid5", Level::Raid5),
            ("raid10", Level::Raid10),
            ("raidz2", Level::Raidz2),
            ("mirror", Level::Mirror),
            ("stripe", Level::Stripe),
        ] {
            assert_eq!(level(word), Some(l));
        }
        for unknown in ["raid4", "mixed", "draid1", "linear"] {
            assert_eq!(level(unknown), None, "{unknown}");
        }
    }
}
