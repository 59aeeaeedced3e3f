//! What the manage view shows, as plain data: the NAS as the engine's
//! survey (`care::survey`) sees it. Its fields mirror the survey's, so the
//! one place that builds it, [`super::Backend::overview`], is a field-by-field
//! copy; the screens only read it.

use nasforge_engine::machine::md::SyncProgress;
use nasforge_engine::size::Size;
use nasforge_engine::spec::{Level, Share};

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Overview {
    pub arrays: Vec<ArrayView>,
    pub filesystems: Vec<FilesystemView>,
    /// The shares as the applied recipe says them: the Shares action edits
    /// this list and hands the whole new list back.
    pub shares: Vec<Share>,
    /// Accounts that may be share users (and whose SMB password can be set).
    pub users: Vec<String>,
    /// The unfinished operation's title, when one is pending.
    pub pending: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ArrayView {
    pub name: String,
    pub level: Level,
    /// `/dev/md/<name>` or `/dev/md127`.
    pub md_device: String,
    pub expected: usize,
    pub working: usize,
    pub degraded: bool,
    pub sync: Option<SyncProgress>,
    /// Members present and working.
    pub members: Vec<DiskView>,
    /// Members md marks faulty but that are still attached.
    pub failed: Vec<DiskView>,
    /// Members md expects that are not there, as last seen.
    pub missing: Vec<DiskView>,
    /// Disks that could join: fitting blank disks, and the others with
    /// the reason they do not fit.
    pub candidates: Vec<Candidate>,
    /// Why this array cannot grow by adding disks (raid0, raid10, single);
    /// None when it can.
    pub cannot_grow: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskView {
    /// The kernel name (`sdd`); None for a missing member.
    pub name: Option<String>,
    pub model: String,
    pub serial: String,
    pub size: Size,
}

impl DiskView {
    /// "WDC WD40EFRX (WD-WCC7K0000003)", with its kernel name in front when
    /// it is attached.
    pub fn label(&self) -> String {
        let id = format!("{} ({})", self.model, self.serial);
        match &self.name {
            Some(name) => format!("{name} {id}"),
            None => id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub disk: DiskView,
    /// Why it cannot be used here ("smaller than the members: 2 TB < 4 TB");
    /// None when it fits.
    pub unfit: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FilesystemView {
    pub array: String,
    pub mount: String,
    pub size: Option<Size>,
    pub used: Option<Size>,
}

impl FilesystemView {
    /// "1.2 TB of 8.0 TB used (15%)", or what is known of it.
    pub fn usage(&self) -> String {
        match (self.used, self.size) {
            (Some(used), Some(size)) if size.bytes() > 0 => format!(
                "{used} of {size} used ({}%)",
                used.bytes() * 100 / size.bytes()
            ),
            (_, Some(size)) => format!("{size}"),
            _ => "not mounted".to_string(),
        }
    }
}

/// How an array is doing, in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Busy,
    Bad,
}

impl ArrayView {
    pub fn fitting(&self) -> impl Iterator<Item = &Candidate> {
        self.candidates.iter().filter(|c| c.unfit.is_none())
    }

    /// "healthy", "degraded: missing WDC WD40EFRX (WD-…3)",
    /// "rebuilding 45% (about 3 min left)", "reshaping 10%".
    pub fn health(&self) -> (String, Tone) {
        if let Some(sync) = &self.sync {
            return (sync.to_string(), Tone::Busy);
        }
        if !self.degraded {
            return ("healthy".into(), Tone::Good);
        }
        let mut why: Vec<String> = self
            .failed
            .iter()
            .map(|d| format!("failed {}", d.label()))
            .collect();
        why.extend(
            self.missing
                .iter()
                .map(|d| format!("missing {}", d.label())),
        );
        if why.is_empty() {
            why.push(format!(
                "{} of {} members working",
                self.working, self.expected
            ));
        }
        (format!("degraded: {}", why.join(", ")), Tone::Bad)
    }
}
