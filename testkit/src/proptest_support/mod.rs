//! For the workstation's and the board's property tests: both parse recipes
//! and GPTs, with the same case counts.

pub mod gpt;

use proptest::test_runner::Config as ProptestConfig;

/// `cases` unless PROPTEST_CASES asks for a longer run.
pub fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = None;
    config
}

/// The shipped recipes, as real inputs to mutate.
pub const RECIPES: [&str; 4] = [
    include_str!("../../../recipes/cm4-marvell9215-raid10.toml"),
    include_str!("../../../recipes/pi4-debian-raid5.toml"),
    include_str!("../../../recipes/pi5-penta-sata-raid5.toml"),
    include_str!("../../../recipes/rock5b-asm1166-raid5.toml"),
];
