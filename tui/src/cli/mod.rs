//! The `nasforge-setup` commands beside setup itself, one module each:
//! `alert` (test and send alerts), `apply` (recipe changes, `share` and
//! `user`), `care` (`replace`, `grow`, `resume`: the front end of the
//! engine's care) and `pool` (a pool's mount, parity sync and scrub).

pub mod alert;
pub mod apply;
pub mod care;
pub mod pool;
