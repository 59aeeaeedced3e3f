//! Alerts that reach a person: events from mdadm's monitor, smartd, the
//! hourly filesystem check and nasforge's own setup, delivered by mail
//! (msmtp through the recipe's SMTP relay), a webhook or ntfy (curl).
//!
//! Nothing is lost silently: every event is logged (stderr, which the
//! journal keeps, and [`crate::paths::ALERTS_LOG`]) and written to the
//! spool first; each channel's copy leaves the spool only once delivered,
//! and the retry timer tries the rest again (`spool`). Without an `[alerts]` section the log
//! and the status file on the boot partition are where an event shows.
//!
//! `steps::alerts` writes what setup installs (the routing, msmtprc,
//! smartd.conf), `sources` turns mdadm's arguments and smartd's and ZED's
//! environment into events, `deliver` makes the msmtp and curl command lines, `check`
//! finds full filesystems.

mod check;
mod deliver;
mod sources;
mod spool;

pub use check::{FULL_PERCENT, Statvfs, Usage, array_mounts, check, check_kernel};
pub use deliver::{Channel, command};
pub use sources::{from_mdadm, from_smartd, from_zed, is_system_mirror, zed_needs_status};
pub use spool::{Delivery, log, raise, retry};

use serde::{Deserialize, Serialize};
use std::fmt;

/// What happened, as `alert --event KIND` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Degraded,
    MemberFailed,
    RebuildStarted,
    RebuildFinished,
    SmartFailure,
    SmartPrefail,
    Temperature,
    FilesystemFull,
    SetupFailed,
    ApplyFailed,
    Test,
    /// ZFS found blocks that did not match their checksum, or could not
    /// read them, in a scrub or in use.
    DataErrors,
    /// A pool's parity was not brought up to date: a sync failed or was
    /// held back.
    ParityStale,
    /// A kernel update waits behind the hold setup put on the kernel for
    /// ZFS's modules.
    KernelUpdateHeld,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::Degraded,
        Kind::MemberFailed,
        Kind::RebuildStarted,
        Kind::RebuildFinished,
        Kind::SmartFailure,
        Kind::SmartPrefail,
        Kind::Temperature,
        Kind::FilesystemFull,
        Kind::SetupFailed,
        Kind::ApplyFailed,
        Kind::Test,
        Kind::DataErrors,
        Kind::ParityStale,
        Kind::KernelUpdateHeld,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Degraded => "degraded",
            Kind::MemberFailed => "member-failed",
            Kind::RebuildStarted => "rebuild-started",
            Kind::RebuildFinished => "rebuild-finished",
            Kind::SmartFailure => "smart-failure",
            Kind::SmartPrefail => "smart-prefail",
            Kind::Temperature => "temperature",
            Kind::FilesystemFull => "filesystem-full",
            Kind::SetupFailed => "setup-failed",
            Kind::ApplyFailed => "apply-failed",
            Kind::Test => "test",
            Kind::DataErrors => "data-errors",
            Kind::ParityStale => "parity-stale",
            Kind::KernelUpdateHeld => "kernel-update-held",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Data is at risk or a disk is failing: ntfy rings for these.
    pub fn urgent(self) -> bool {
        matches!(
            self,
            Kind::Degraded | Kind::MemberFailed | Kind::SmartFailure | Kind::SetupFailed
        )
    }

    /// The subject when the event's source gives none.
    pub fn subject(self) -> &'static str {
        match self {
            Kind::Degraded => "An array is degraded",
            Kind::MemberFailed => "A disk of an array failed",
            Kind::RebuildStarted => "An array is rebuilding",
            Kind::RebuildFinished => "An array finished rebuilding",
            Kind::SmartFailure => "A disk reports it is failing",
            Kind::SmartPrefail => "A disk reports errors",
            Kind::Temperature => "A disk is too hot",
            Kind::FilesystemFull => "A filesystem is nearly full",
            Kind::SetupFailed => "Storage setup failed",
            Kind::ApplyFailed => "Applying nasforge.toml failed",
            Kind::Test => "Test alert",
            Kind::DataErrors => "A pool found damaged data",
            Kind::ParityStale => "The pool's parity was not updated",
            Kind::KernelUpdateHeld => "A kernel update is held back for ZFS",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One event, as spooled and as a webhook receives it (`kind` is sent as
/// `event`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "event")]
    pub kind: Kind,
    pub host: String,
    pub subject: String,
    pub message: String,
    /// Seconds since the epoch.
    pub time: u64,
}

impl Event {
    /// An event happening now; an empty subject takes the kind's own.
    pub fn new(kind: Kind, host: &str, subject: &str, message: &str) -> Event {
        Event {
            kind,
            host: host.to_string(),
            subject: if subject.trim().is_empty() {
                kind.subject().to_string()
            } else {
                subject.to_string()
            },
            message: message.to_string(),
            time: now(),
        }
    }

    /// One line for the log (which adds the time): kind, host, subject.
    pub fn summary(&self) -> String {
        format!(
            "{} on {}: {}",
            self.kind,
            self.host,
            one_line(&self.subject)
        )
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Control characters (a line break in a mail header or an HTTP header
/// would start a new one) become spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_by_its_name() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()), Some(kind));
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
        assert_eq!(Kind::parse("Degraded"), None);
    }

    #[test]
    fn an_event_without_subject_takes_its_kinds() {
        let e = Event::new(Kind::Degraded, "nas", " ", "md0 lost sdb");
        assert_eq!(e.subject, "An array is degraded");
        assert_eq!(one_line("a\r\nBcc: x"), "a  Bcc: x");
    }
}
