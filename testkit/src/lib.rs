//! Test helpers shared by the workspace's crates: the engine's fake boards
//! (`board`, `finished` for a board whose setup finished, and `care` for
//! an array already set up), disks as discovery reports them, the
//! property tests' inputs, a child fed its stdin, an old NAS's disks
//! (`old_nas`), and the floors check.

pub mod board;
pub mod care;
pub mod disks;
pub mod finished;
pub mod floors;
pub mod mounts;
pub mod old_nas;
pub mod proptest_support;
pub mod stdin;
