//! What nasforge asks of a kernel, by name: the vocabulary the boards'
//! data, recipes and the kernel checks share.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// libata + AHCI: a PCIe SATA card (JMB585, ASM1166, Marvell 9215) shows its disks.
    Sata,
    /// A SAS HBA's driver: LSI/Broadcom SAS2008/2308/3008 in IT mode
    /// (`mpt3sas`), MegaRAID cards (`megaraid_sas`), or the older SAS1068
    /// family (`mptsas`, also what qemu's `mptsas1068` needs).
    Sas,
    /// md with RAID 0/1/10/4/5/6.
    Md,
    /// The kernel NFS server.
    Nfsd,
    /// USB Attached SCSI, for USB disk enclosures.
    Uas,
    /// OpenZFS: out of tree, so no stock kernel has it; nasforge builds the
    /// modules for the kernel the board boots (`crate::zfs`).
    Zfs,
}

impl Capability {
    /// What every kernel of a single-board computer is checked for; a
    /// board's own list (`BoardInfo::capabilities`) adds `sas` on a PC, and
    /// ZFS is checked only when a recipe asks.
    pub const ALL: [Capability; 4] = [
        Capability::Sata,
        Capability::Md,
        Capability::Nfsd,
        Capability::Uas,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::Sata => "sata",
            Capability::Md => "md",
            Capability::Nfsd => "nfsd",
            Capability::Uas => "uas",
            Capability::Sas => "sas",
            Capability::Zfs => "zfs",
        }
    }

    /// Every inner list is a set of alternatives, any one of which will do.
    pub fn modules(self) -> Vec<Vec<&'static str>> {
        match self {
            Capability::Sata => vec![vec!["libata"], vec!["ahci"]],
            Capability::Md => vec![
                vec!["md_mod"],
                vec!["raid0"],
                vec!["raid1"],
                vec!["raid10"],
                vec!["raid456"],
            ],
            Capability::Nfsd => vec![vec!["nfsd"]],
            Capability::Uas => vec![vec!["uas"]],
            Capability::Sas => vec![vec!["mpt3sas", "megaraid_sas", "mptsas"]],
            Capability::Zfs => vec![vec!["zfs"]],
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
