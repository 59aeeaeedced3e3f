//! nasforge-setup's floor plan, docs/architecture.md's
//! ```` ```floors tui/src/ ```` block, held by nasforge-testkit's `floors`
//! check.

use nasforge_testkit::floors::{file_cycles, floors, violations};
use std::path::Path;

#[test]
fn nasforge_setup_keeps_its_floors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plan = std::fs::read_to_string(dir.join("../docs/architecture.md")).unwrap();
    // main.rs is the command line's crate: it reaches the views through
    // `nasforge_setup::` and owns `cli`.
    let found = violations(&dir.join("src"), &floors(&plan, "tui/src/"), &["main.rs"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn nasforge_setup_s_files_lean_on_their_siblings_one_way_only() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = file_cycles(&dir.join("src"));
    assert!(found.is_empty(), "{}", found.join("\n"));
}
