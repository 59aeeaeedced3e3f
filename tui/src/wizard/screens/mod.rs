//! One module per screen, in the order the wizard walks them. Each has its
//! state (when it has any), `key` (its part of the update), `draw`, and
//! `help` (the keys it shows in the help bar).

pub mod alerts;
pub mod disks;
pub mod done;
pub mod layout;
pub mod progress;
pub mod review;
pub mod shares;
pub mod welcome;

pub use crate::ui::Help;
