//! The crate graph docs/architecture.md draws: the workstation builder
//! depends on the board's engine and never on the wizard's terminal stack,
//! so a change that pulls ratatui or crossterm into `nasforge` fails here
//! rather than in a review of Cargo.lock.

use std::collections::BTreeSet;
use std::process::Command;

/// The crate names in `package`'s normal (non-dev, non-build) dependency tree.
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "-p", package])
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_builder_carries_the_engine_but_not_the_wizard() {
    let builder = normal_dependencies("nasforge");
    assert!(builder.contains("nasforge-engine"), "{builder:?}");
    for ui in ["nasforge-setup", "ratatui", "crossterm", "tui-input"] {
        assert!(
            !builder.contains(ui),
            "the builder's dependency tree gained `{ui}`: the wizard's crates belong to tui/ only (see docs/architecture.md)"
        );
    }
}

#[test]
fn the_engine_carries_no_user_interface() {
    let engine = normal_dependencies("nasforge-engine");
    for ui in ["ratatui", "crossterm", "tui-input", "clap", "indicatif"] {
        assert!(
            !engine.contains(ui),
            "nasforge-engine's dependency tree gained `{ui}`: the engine has no user interface (see docs/architecture.md)"
        );
    }
    // The same reading finds the wizard's stack where it belongs, so an empty
    // or misread tree cannot pass the checks above.
    let setup = normal_dependencies("nasforge-setup");
    assert!(
        setup.contains("ratatui") && setup.contains("nasforge-engine"),
        "{setup:?}"
    );
}
