//! Where disks become storage: the GPT partition on each member, the md RAID
//! arrays (mdadm and mdadm.conf), and the fstab lines that mount them; or a
//! ZFS pool and its datasets (zpool, zfs); or a pool of disks of any size
//! (mergerfs and SnapRAID).

pub mod fstab;
pub mod mdadm;
pub mod partition;
pub mod pool;
pub mod spindown;
pub mod zpool;
