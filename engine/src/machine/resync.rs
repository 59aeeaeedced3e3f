//! Following md's rebuild or reshape to its end.

use super::md::{MdState, md_dir, sync_progress};
use crate::machine::disks::Host;
use std::time::Duration;

/// How often md's progress is read.
pub const POLL: Duration = Duration::from_secs(2);
/// How often a progress line is printed.
pub const SAY_EVERY: Duration = Duration::from_secs(10);
/// md starts a rebuild within a second of `--add`; idle this long with a
/// spare waiting means it will not start by itself.
const START_AT_MOST: Duration = Duration::from_secs(120);
/// Idle reads in a row before the work counts as finished: md is briefly
/// idle between an `--add` and the rebuild it starts.
const IDLE_READS: u32 = 3;

/// Waits until md has no rebuild or reshape of `device` running or
/// pending, telling `say` the progress ("rebuild 45% (about 3 min left)")
/// every [`SAY_EVERY`]; `sleep` lets [`POLL`] pass.
pub fn follow_sync(
    host: &Host,
    device: &str,
    sleep: &mut dyn FnMut(Duration),
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let mut idle = 0;
    let mut idle_for = Duration::ZERO;
    let mut since_said = SAY_EVERY;
    let mut last_what = String::from("rebuild");
    loop {
        let Some(md) = MdState::read(host, device) else {
            return Err(format!(
                "{device} is not assembled: check `cat /proc/mdstat`, then run `sudo nasforge-setup resume`"
            ));
        };
        match sync_progress(&md_dir(host, &md.kernel)) {
            Some(progress) => {
                idle = 0;
                idle_for = Duration::ZERO;
                last_what = progress.what().to_string();
                if since_said >= SAY_EVERY {
                    say(&progress.to_string());
                    since_said = Duration::ZERO;
                }
            }
            None if !md.work_pending() => {
                idle += 1;
                if idle >= IDLE_READS {
                    say(&format!("{last_what} finished"));
                    return Ok(());
                }
            }
            None => {
                idle = 0;
                idle_for += POLL;
                if idle_for >= START_AT_MOST {
                    return Err(format!(
                        "md has not started working on {device} in {} s although it has a member to rebuild or a reshape to finish: check `cat /proc/mdstat` and `dmesg`, then run `sudo nasforge-setup resume`",
                        START_AT_MOST.as_secs()
                    ));
                }
            }
        }
        sleep(POLL);
        since_said += POLL;
    }
}
