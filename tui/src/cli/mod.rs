//! The `nasforge-setup` commands beside setup itself, one module each:
//! `alert` (test and send alerts), `apply` (recipe changes, `share` and
//! `user`), and `care` (`replace`, `grow`, `resume`: the front end of the
//! engine's care).

pub mod alert;
pub mod apply;
pub mod care;
