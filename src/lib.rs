//! nasforge: turns a stock Raspberry Pi OS, Armbian or Debian image into a
//! NAS image. The library is the builder; `src/main.rs` is its command line,
//! and `cli` words the reports some of its commands print.
//!
//! Pure parts (recipe, board data, config.txt/cmdline/armbianEnv editing,
//! kernel capability rules) sit beside the effectful edges (io, fetch,
//! image, output), so most behaviour is testable without a disk.

pub mod alerts;
pub mod board;
pub mod boot;
pub mod build;
pub mod capability;
pub mod cli;
pub mod debian;
pub mod diag;
pub mod distro;
pub mod emulate;
pub mod fetch;
pub mod firstboot;
pub mod flash;
pub mod image;
pub mod inspect;
pub mod io;
pub mod kernel;
pub mod manifest;
pub mod output;
pub mod packages;
pub mod recipe;
pub mod root_uuid;
pub mod rootfs;
pub mod section;
pub mod size;
pub mod system;
pub mod zfs;
