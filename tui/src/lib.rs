//! nasforge-setup: the board's first-boot tool and its care afterwards.
//! The [`wizard`] builds a storage spec on screen and hands it to the
//! engine ([`nasforge_engine`]), which plans and builds it exactly as the
//! unattended path does; the [`manage`] view is what the same command
//! opens once setup has finished; both draw with the pieces in [`ui`].
//! `src/main.rs` and `src/cli/` are the `nasforge-setup` command line.

pub mod manage;
pub mod recipe_shares;
pub mod ui;
pub mod wizard;
