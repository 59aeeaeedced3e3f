//! Reading the machine: block devices from sysfs and udev's database, what a
//! disk already holds, which storage controller or USB bridge it hangs off,
//! how the running system uses it (mounts, swap, holders, the root
//! filesystem), and whether the board's power can carry its USB disks.

pub mod controllers;
pub mod disks;
pub mod filesystems;
pub mod hardware;
pub mod mounts;
pub mod power;
pub mod signature;
pub mod sysfs;
pub mod uas_quirks;
pub mod udev;
pub mod usb;
