//! nasforge-setup: the on-board storage engine. It discovers disks, plans
//! arrays from the recipe's `[storage]` section, and builds them with
//! mdadm, mkfs, fstab, Samba and NFS, journalling every step so a power cut
//! resumes where it stopped.
//!
//! The pure core ([`spec`], [`matching`], [`planner`], [`steps`]) turns a
//! spec and a list of disks into data; the edges ([`disks`], [`runner`],
//! [`journal`], [`status`]) read and change the machine. The [`wizard`]
//! builds the same spec on screen and hands it to the same core.

pub mod atomic_file;
pub mod avahi;
pub mod controllers;
pub mod disks;
pub mod executor;
pub mod fstab;
pub mod image_files;
pub mod journal;
pub mod managed;
pub mod matching;
pub mod mdadm;
pub mod nfs;
pub mod partition;
pub mod planner;
pub mod runner;
pub mod samba;
pub mod setup;
pub mod signature;
pub mod size;
pub mod smbpasswd;
pub mod spec;
pub mod status;
pub mod steps;
pub mod sysfs;
pub mod udev;
pub mod wizard;
