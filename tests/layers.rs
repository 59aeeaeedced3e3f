//! The builder's floor plan, docs/architecture.md's ```` ```floors src/ ````
//! block, held by nasforge-testkit's `floors` check.

use nasforge_testkit::floors::{file_cycles, floors, violations};
use std::path::Path;

#[test]
fn the_builder_keeps_its_floors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plan = std::fs::read_to_string(dir.join("docs/architecture.md")).unwrap();
    // main.rs is its own crate: it reaches the library through `nasforge::`.
    let found = violations(&dir.join("src"), &floors(&plan, "src/"), &["main.rs"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_builder_s_files_lean_on_their_siblings_one_way_only() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = file_cycles(&dir.join("src"));
    assert!(found.is_empty(), "{}", found.join("\n"));
}
