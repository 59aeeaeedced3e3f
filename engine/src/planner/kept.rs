//! Which disk each `[[storage.disks]]` entry keeps, and the filesystem on
//! it that gets mounted as it is; or refusals that say why not.

use super::Refusal;
use crate::machine::disks::{Disk, InUse, Inventory};
use crate::machine::signature::Signature;
use crate::matching;
use crate::spec::{KeptDisk, KeptFilesystem};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptPlan {
    pub spec: KeptDisk,
    pub disk: Disk,
    /// The kernel name holding the filesystem: the disk or one partition.
    pub device: String,
    pub filesystem: KeptFilesystem,
    pub label: Option<String>,
    pub uuid: String,
    /// The type fstab and mount take (`ntfs3` or `ntfs-3g` for ntfs), once
    /// setup has checked what the board can mount (`machine::filesystems`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_type: Option<String>,
}

fn refuse(spec: &KeptDisk, disk: Option<&str>, reason: String) -> Refusal {
    Refusal {
        array: spec.name.clone(),
        kept: true,
        disk: disk.map(str::to_string),
        reason,
        at: None,
    }
}

/// The one disk `spec` matches among those not `taken`, and its filesystem.
pub(super) fn plan_kept(
    index: usize,
    spec: &KeptDisk,
    inventory: &Inventory,
    taken: &[String],
) -> Result<KeptPlan, Refusal> {
    let at = format!("storage.disks[{index}]");
    let matched: Vec<&Disk> = inventory
        .disks
        .iter()
        .filter(|d| !taken.contains(&d.name) && matching::mismatch(&spec.disk, d).is_none())
        .collect();
    let disk = match matched.as_slice() {
        [one] => *one,
        [] => {
            return Err(refuse(
                spec,
                None,
                format!(
                    "no disk matches {at}.match; `nasforge-setup status` lists the disks with their model, serial and size to match on"
                ),
            ));
        }
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|d| format!("{} ({})", d.name, d.summary()))
                .collect();
            return Err(refuse(
                spec,
                None,
                format!(
                    "{at}.match fits {} disks ({}); a kept disk is one disk, so match it by something only it has, such as its serial",
                    several.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    let mount_here = |u: &InUse| matches!(u, InUse::Mounted { at, .. } if *at == spec.mount);
    if let Some(why) = disk.in_use.iter().find(|u| !mount_here(u)) {
        return Err(refuse(
            spec,
            Some(&disk.name),
            format!(
                "it is in use ({why}); a disk the system uses or that is mounted elsewhere is not taken over"
            ),
        ));
    }
    let filesystems: Vec<(String, &Signature)> = disk
        .all_contents()
        .into_iter()
        .filter(|(on, s)| {
            matches!(s, Signature::Filesystem { .. })
                && spec.partition.is_none_or(|n| {
                    disk.partitions
                        .iter()
                        .any(|p| p.number == n && p.name == *on)
                })
        })
        .collect();
    let (device, signature) = match filesystems.as_slice() {
        [one] => one.clone(),
        [] => {
            let what = match spec.partition {
                Some(n) => format!("partition {n} holds no filesystem"),
                None => "it holds no filesystem nasforge can keep".to_string(),
            };
            let holds = disk.describe_contents();
            return Err(refuse(
                spec,
                Some(&disk.name),
                format!(
                    "{what} (it holds: {}); a kept disk is mounted as it is, so it needs an ext4, xfs, btrfs, exfat or ntfs filesystem",
                    if holds.is_empty() { "nothing" } else { &holds }
                ),
            ));
        }
        several => {
            let list: Vec<String> = several.iter().map(|(on, s)| format!("{on}: {s}")).collect();
            return Err(refuse(
                spec,
                Some(&disk.name),
                format!(
                    "it holds {} filesystems ({}); say which with {at}.partition = N",
                    several.len(),
                    list.join("; ")
                ),
            ));
        }
    };
    let Signature::Filesystem {
        fstype,
        label,
        uuid,
    } = signature
    else {
        unreachable!("filtered to filesystems")
    };
    let Some(filesystem) = KeptFilesystem::from_fstype(fstype) else {
        return Err(refuse(
            spec,
            Some(&device),
            format!("it holds {signature}; nasforge keeps ext4, xfs, btrfs, exfat and ntfs disks"),
        ));
    };
    if let Some(want) = spec.filesystem
        && want != filesystem
    {
        return Err(refuse(
            spec,
            Some(&device),
            format!(
                "{at}.filesystem says {want}, but it holds {signature}; is this the disk you meant?"
            ),
        ));
    }
    let Some(uuid) = uuid.clone() else {
        return Err(refuse(
            spec,
            Some(&device),
            format!(
                "its {fstype} filesystem has no UUID to mount it by, which fstab needs to find it whatever its device name"
            ),
        ));
    };
    Ok(KeptPlan {
        spec: spec.clone(),
        disk: disk.clone(),
        device,
        filesystem,
        label: label.clone(),
        uuid,
        mount_type: None,
    })
}

impl KeptPlan {
    /// The type fstab and mount take: what setup found the board can mount,
    /// else the kernel's own driver.
    pub fn mount_type(&self) -> String {
        self.mount_type
            .clone()
            .unwrap_or_else(|| match self.filesystem {
                KeptFilesystem::Ntfs => "ntfs3".into(),
                other => other.to_string(),
            })
    }
}
