//! Reading the machine: block devices from sysfs and udev's database, what a
//! disk already holds, and which storage controller it hangs off.

pub mod controllers;
pub mod disks;
pub mod signature;
pub mod sysfs;
pub mod udev;
