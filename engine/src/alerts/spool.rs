//! The spool: each event is written to [`ALERTS_SPOOL`] before any delivery is
//! tried, with the channels it still has to reach; a channel leaves the
//! list once its delivery succeeded and the file goes when the list is
//! empty. A failure is logged and stays for `alert --retry` (a timer, every
//! ten minutes), so an unreachable relay delays an alert but never drops it.

use super::deliver::{Channel, command, send};
use super::{Event, now, one_line};
use crate::machine::disks::Host;
use crate::paths::{ALERTS_LOG, ALERTS_SPOOL, ROUTING};
use crate::runner::Runner;
use crate::steps::alerts::Routing;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Serialize, Deserialize)]
struct Spooled {
    event: Event,
    pending: Vec<Channel>,
}

/// How one channel's delivery of one event went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub channel: Channel,
    pub subject: String,
    pub result: Result<(), String>,
}

/// Logs `event`, spools it for every channel set up, and tries each once.
pub fn raise(
    host: &Host,
    event: &Event,
    runner: &mut dyn Runner,
) -> std::io::Result<Vec<Delivery>> {
    log(
        host,
        &format!("{}: {}", event.summary(), one_line(&event.message)),
    );
    let routing = load_routing(host);
    let pending = routing.channels();
    if pending.is_empty() {
        log(
            host,
            "no alert channel is set up ([alerts] in nasforge.toml): this log and the status file hold the event",
        );
        return Ok(Vec::new());
    }
    let dir = host.path(ALERTS_SPOOL);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = dir.join(format!(
        "{}.{nanos:09}-{}-{}.json",
        event.time,
        std::process::id(),
        event.kind
    ));
    save(
        &path,
        &Spooled {
            event: event.clone(),
            pending,
        },
    )?;
    deliver(host, &path, &routing, runner)
}

/// Tries every spooled event's channels again, oldest first.
pub fn retry(host: &Host, runner: &mut dyn Runner) -> std::io::Result<Vec<Delivery>> {
    let dir = host.path(ALERTS_SPOOL);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    files.sort();
    let routing = load_routing(host);
    let mut out = Vec::new();
    for path in files {
        out.extend(deliver(host, &path, &routing, runner)?);
    }
    Ok(out)
}

fn deliver(
    host: &Host,
    path: &Path,
    routing: &Routing,
    runner: &mut dyn Runner,
) -> std::io::Result<Vec<Delivery>> {
    let mut spooled: Spooled = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            // Set aside, so one bad file does not fail every retry.
            let aside = path.with_extension("unreadable");
            log(
                host,
                &format!(
                    "cannot read the spooled alert {}: {e}; kept as {}",
                    path.display(),
                    aside.display()
                ),
            );
            std::fs::rename(path, &aside)?;
            return Ok(Vec::new());
        }
    };
    let mut out = Vec::new();
    let mut left = Vec::new();
    for channel in spooled.pending.clone() {
        let Some((argv, stdin)) = command(channel, routing, &spooled.event) else {
            log(
                host,
                &format!(
                    "{channel} is no longer set up; its copy of \"{}\" is dropped",
                    one_line(&spooled.event.subject)
                ),
            );
            continue;
        };
        let result = send(runner, argv, stdin);
        match &result {
            Ok(()) => log(
                host,
                &format!("sent by {channel}: {}", one_line(&spooled.event.subject)),
            ),
            Err(e) => {
                log(
                    host,
                    &format!(
                        "{channel} failed for \"{}\", kept for retry: {e}",
                        one_line(&spooled.event.subject)
                    ),
                );
                left.push(channel);
            }
        }
        out.push(Delivery {
            channel,
            subject: spooled.event.subject.clone(),
            result,
        });
    }
    if left.is_empty() {
        std::fs::remove_file(path)?;
    } else if left != spooled.pending {
        spooled.pending = left;
        save(path, &spooled)?;
    }
    Ok(out)
}

fn save(path: &Path, spooled: &Spooled) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(spooled).map_err(std::io::Error::other)?;
    crate::atomic_file::write(path, &json, 0o600)
}

/// The routing setup wrote; none (every channel off) when there is no
/// file, or it cannot be read, which is logged.
fn load_routing(host: &Host) -> Routing {
    match std::fs::read(host.path(ROUTING)) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            log(host, &format!("{ROUTING} cannot be read ({e}); alerts stay in this log until setup writes it again"));
            Routing::default()
        }),
        Err(_) => Routing::default(),
    }
}

/// One line to stderr (the journal, when a unit or a monitor runs us) and
/// to [`ALERTS_LOG`]; the log failing is said on stderr, not fatal.
pub fn log(host: &Host, line: &str) {
    eprintln!("nasforge-alert: {line}");
    let path = host.path(ALERTS_LOG);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
        })
        .and_then(|mut f| writeln!(f, "{} {line}", crate::clock::utc(now())));
    if let Err(e) = written {
        eprintln!("nasforge-alert: cannot write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::super::Kind;
    use super::*;
    use crate::runner::RecordingRunner;
    use crate::steps::alerts::Email;

    /// The programs the runner was asked to run, in order.
    fn programs(runner: &RecordingRunner) -> Vec<&str> {
        runner
            .lines
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect()
    }

    fn host_with_routing() -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let routing = Routing {
            email: Some(Email {
                to: "me@example.com".into(),
                from: "nas@example.com".into(),
            }),
            webhook: None,
            ntfy: Some("https://ntfy.sh/nas".into()),
        };
        crate::atomic_file::write(
            &host.path(ROUTING),
            &serde_json::to_vec(&routing).unwrap(),
            0o600,
        )
        .unwrap();
        (dir, host)
    }

    fn spooled(host: &Host) -> Vec<Spooled> {
        std::fs::read_dir(host.path(ALERTS_SPOOL))
            .map(|d| {
                d.map(|e| {
                    serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap()
                })
                .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_failed_delivery_stays_spooled_and_logged_until_a_retry_succeeds() {
        let (_dir, host) = host_with_routing();
        // The first command, the mail, fails.
        let mut runner = RecordingRunner::interrupting_at(0);
        let event = Event::new(Kind::Degraded, "nas", "data is degraded", "md127 lost sdb1");
        let first = raise(&host, &event, &mut runner).unwrap();
        assert_eq!(first.len(), 2);
        assert!(
            first[0]
                .result
                .as_ref()
                .unwrap_err()
                .contains("interrupted before `msmtp")
        );
        assert_eq!(first[1].result, Ok(()));
        let left = spooled(&host);
        assert_eq!(left.len(), 1);
        assert_eq!(
            left[0].pending,
            [Channel::Email],
            "ntfy's copy was delivered"
        );
        let log = crate::machine::recent_alerts(&host, 10).join("\n");
        assert!(
            log.contains("degraded on nas: data is degraded: md127 lost sdb1"),
            "{log}"
        );
        assert!(
            log.contains(
                "email failed for \"data is degraded\", kept for retry: interrupted before `msmtp"
            ),
            "{log}"
        );
        assert!(log.contains("sent by ntfy: data is degraded"), "{log}");

        let again = retry(&host, &mut runner).unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(
            (again[0].channel, &again[0].result),
            (Channel::Email, &Ok(()))
        );
        assert!(spooled(&host).is_empty(), "delivered everywhere, so gone");
        assert_eq!(
            programs(&runner),
            ["curl", "msmtp"],
            "the failed try is not recorded"
        );
        assert!(
            crate::machine::recent_alerts(&host, 1)[0].ends_with("sent by email: data is degraded")
        );
        assert!(retry(&host, &mut runner).unwrap().is_empty());
    }

    #[test]
    fn without_channels_the_event_is_logged_only() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::new(dir.path());
        let mut runner = RecordingRunner::default();
        let event = Event::new(Kind::FilesystemFull, "nas", "", "/srv/data is 93 % full");
        assert!(raise(&host, &event, &mut runner).unwrap().is_empty());
        assert!(runner.lines.is_empty() && spooled(&host).is_empty());
        let log = crate::machine::recent_alerts(&host, 2).join("\n");
        assert!(
            log.contains(
                "filesystem-full on nas: A filesystem is nearly full: /srv/data is 93 % full"
            ),
            "{log}"
        );
        assert!(log.contains("no alert channel is set up"), "{log}");
    }

    #[test]
    fn an_unreadable_spool_file_is_set_aside() {
        let (_dir, host) = host_with_routing();
        std::fs::create_dir_all(host.path(ALERTS_SPOOL)).unwrap();
        std::fs::write(host.path(ALERTS_SPOOL).join("1.json"), "{").unwrap();
        assert!(
            retry(&host, &mut RecordingRunner::default())
                .unwrap()
                .is_empty()
        );
        assert!(host.path(ALERTS_SPOOL).join("1.unreadable").exists());
    }
}
