//! Following ZFS's resilver onto a new disk to its end, as `resync` follows
//! md's rebuild. `zpool replace` returns once the resilver has started;
//! the old disk stays in a `replacing-N` vdev until the new one holds
//! everything, then ZFS detaches it. So the replace is done when no
//! `replacing-` vdev is left and no resilver runs.

use super::md::percent_text;
use super::resync::{POLL, SAY_EVERY};
use super::zfs_report::{Scan, parse_zpool_status};
use std::time::Duration;

/// ZFS starts the resilver as `zpool replace` returns; a replacing vdev
/// idle this long means it will not start by itself.
const START_AT_MOST: Duration = Duration::from_secs(120);

/// Waits until `pool` has no replace left, telling `say` the resilver's
/// progress ("resilvering 45%") every [`SAY_EVERY`]. `status` gives what
/// `zpool status -P -p POOL` prints; `sleep` lets [`POLL`] pass.
pub fn follow_resilver(
    pool: &str,
    status: &mut dyn FnMut() -> Result<String, String>,
    sleep: &mut dyn FnMut(Duration),
    say: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let mut since_said = SAY_EVERY;
    let mut idle_for = Duration::ZERO;
    loop {
        let text = status()?;
        let Some(report) = parse_zpool_status(&text) else {
            return Err(format!(
                "the pool '{pool}' is not imported: check `sudo zpool import`, then run `sudo nasforge-setup resume`"
            ));
        };
        let replacing = report
            .vdevs
            .iter()
            .any(|v| v.name.starts_with("replacing-"));
        match &report.scan {
            Scan::Running { what, percent, .. } if what == "resilver" => {
                idle_for = Duration::ZERO;
                if since_said >= SAY_EVERY {
                    say(&match percent {
                        Some(p) => format!("resilvering {}", percent_text(*p)),
                        None => "resilvering".to_string(),
                    });
                    since_said = Duration::ZERO;
                }
            }
            Scan::Finished { what, errors, .. } if !replacing => {
                say(&if what == "resilver" && *errors > 0 {
                    format!(
                        "resilver finished with {errors} error(s): see `sudo zpool status -v {pool}`"
                    )
                } else {
                    "resilver finished".to_string()
                });
                return Ok(());
            }
            _ if !replacing => {
                say("resilver finished");
                return Ok(());
            }
            _ => {
                idle_for += POLL;
                if idle_for >= START_AT_MOST {
                    return Err(format!(
                        "ZFS has not resilvered '{pool}' in {} s although a disk is being replaced: check `sudo zpool status -v {pool}`, then run `sudo nasforge-setup resume`",
                        START_AT_MOST.as_secs()
                    ));
                }
            }
        }
        sleep(POLL);
        since_said += POLL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESILVERING: &str = include_str!("../../tests/data/zfs/status-raidz1-resilvering.txt");
    const HEALTHY: &str = include_str!("../../tests/data/zfs/status-raidz1-healthy.txt");

    /// Follows `texts` in turn (the last one for ever), returning what was
    /// said and the result.
    fn follow(texts: &[String]) -> (Vec<String>, Result<(), String>) {
        let mut i = 0;
        let mut status = || {
            let t = texts[i.min(texts.len() - 1)].clone();
            i += 1;
            Ok(t)
        };
        let mut said = Vec::new();
        let result = follow_resilver("tank", &mut status, &mut |_| {}, &mut |l: &str| {
            said.push(l.to_string())
        });
        (said, result)
    }

    #[test]
    fn the_resilver_is_followed_until_the_old_disk_is_detached() {
        let (said, result) = follow(&[RESILVERING.into(), RESILVERING.into(), HEALTHY.into()]);
        assert_eq!(result, Ok(()));
        assert_eq!(said, ["resilvering 11%", "resilver finished"]);
    }

    #[test]
    fn a_replace_zfs_never_resilvers_stops_with_what_to_look_at() {
        let stuck = RESILVERING
            .replace("resilver in progress since", "scrub canceled on")
            .replace(
                "\t620G scanned at 310M/s, 410G issued at 205M/s, 3.50T total\n",
                "",
            )
            .replace("\t136G resilvered, 11.71% done, 04:23:10 to go\n", "");
        let (_, result) = follow(&[stuck]);
        let e = result.unwrap_err();
        assert!(
            e.contains("has not resilvered 'tank' in 120 s") && e.contains("zpool status -v tank"),
            "{e}"
        );
    }

    #[test]
    fn a_pool_not_imported_is_said_so() {
        let (_, result) = follow(&["cannot open 'tank': no such pool\n".into()]);
        assert!(result.unwrap_err().contains("'tank' is not imported"));
    }
}
