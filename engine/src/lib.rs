//! nasforge-engine: what runs on the board, without a user interface. It
//! discovers disks, plans arrays from the recipe's `[storage]` section, and
//! builds them with mdadm, mkfs, fstab, Samba and NFS, journalling every step
//! so a power cut resumes where it stopped. The workstation builder uses the
//! same recipe sections to check a recipe before it writes an image.
//!
//! The pure core ([`spec`], [`matching`], [`planner`], [`steps`]) turns a
//! spec and a list of disks into data; the edges ([`machine`], [`runner`],
//! [`journal`], [`status`]) read and change the machine. RAID, partitions
//! and fstab are in [`storage`]; Samba, NFS and the network announcement in
//! [`shares`].

pub mod alerts;
pub mod apply;
pub mod atomic_file;
pub mod care;
pub mod clock;
pub mod command;
pub mod executor;
pub mod image_files;
pub mod journal;
pub mod machine;
pub mod managed;
pub mod matching;
pub mod operation;
pub mod paths;
pub mod planner;
pub mod runner;
pub mod setup;
pub mod share_dir;
pub mod shares;
pub mod size;
pub mod spec;
pub mod status;
pub mod steps;
pub mod storage;
