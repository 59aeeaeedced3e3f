//! What the pool's nightly sync and weekly scrub last did, as
//! `nasforge-setup pool sync|scrub` records it: SnapRAID's own status has
//! no "last sync" date.

use crate::machine::disks::Host;
use serde::{Deserialize, Serialize};

/// Where the last sync and scrub are recorded.
pub const RECORD: &str = "/var/lib/nasforge/pool-care.json";

/// One run of sync or scrub, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Seconds since the epoch.
    pub time: u64,
    pub ok: bool,
    pub summary: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Run>,
    /// The last sync that finished: what a restore brings back is as of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced: Option<Run>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrub: Option<Run>,
}

impl Record {
    pub fn read(host: &Host) -> Record {
        std::fs::read_to_string(host.path(RECORD))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
}
