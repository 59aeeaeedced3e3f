//! nasforge-setup: the board's first-boot tool. The [`wizard`] builds a
//! storage spec on screen and hands it to the engine
//! ([`nasforge_engine`]), which plans and builds it exactly as the
//! unattended path does; `src/main.rs` is the `nasforge-setup` command line.

pub mod recipe_shares;
pub mod wizard;
