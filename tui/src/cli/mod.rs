//! The `nasforge-setup` commands beside setup itself, one module each:
//! `alert` (test and send alerts), `apply` (recipe changes, `share` and
//! `user`), `care` (`replace`, `grow`, `resume`: the front end of the
//! engine's care) and `pool` (a pool's mount, parity sync and scrub).

pub mod alert;
pub mod apply;
pub mod care;
pub mod pool;

use nasforge_engine::executor::Event;

/// How setup, `apply` and care tell the console what the executor does.
pub fn print_step(event: Event) {
    match event {
        Event::Starting { index, total, step } => {
            eprintln!("nasforge-setup: [{}/{total}] {}", index + 1, step.title)
        }
        Event::AlreadyDone { reason, .. } => eprintln!("nasforge-setup:   already done: {reason}"),
        Event::Finished { .. } => {}
        Event::Reassembled { device } => eprintln!(
            "nasforge-setup:   {device} assembled again from its members: made before the last boot ended, not yet in mdadm.conf"
        ),
    }
}
