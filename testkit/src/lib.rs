//! Test helpers shared by the workspace's crates.

pub mod floors;
