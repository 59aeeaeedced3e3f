//! The recipe's `[storage]`, `[[shares]]` and `[alerts]` sections: what the
//! user asked for.
//!
//! These types are shared with the host builder, which parses the whole recipe
//! on the workstation so that a bad storage section fails there, with the file,
//! line and column, long before a board boots. Field names are snake_case as in
//! the recipe; enums are lowercase words; unknown keys are errors.
//!
//! Each section's types live with their checks, in `storage` and `shares`.
//! This module reads the recipe, runs the checks across both sections and
//! locates each problem in the text ([`locate`]).

pub mod alerts;
pub mod glob;
mod kept;
mod paths;
pub mod pool;
mod position;
mod shares;
mod storage;

pub use crate::machine::usb_quirk::UsbQuirk;
pub use alerts::{Alerts, DEFAULT_TEMPERATURE, Smtp, Tls};
pub use kept::KeptFilesystem;
pub use paths::is_under;
pub use position::{Location, locate, location};
pub use shares::{Clients, Nfs, Share, Smb};
pub use storage::KeptDisk;
pub use storage::{
    Array, Count, DiskMatch, Filesystem, Level, Mode, SYSTEM_MIRROR_NAME, SpinDown, Storage,
    SystemMirror, Transport,
};

use serde::{Deserialize, Serialize};
use shares::check_shares;
use std::fmt;
use std::path::{Path, PathBuf};
use storage::check_storage;

/// The part of the recipe the board reads. Top-level sections owned by the
/// builder (`base`, `board`, `boot`, `system`, ...) are ignored here; inside
/// `storage` and `shares` every key must be known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct DeviceRecipe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<Share>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
}

/// Something wrong across fields, with the dotted path of the value to fix
/// (`storage.arrays[0].mount`) and a message that says how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecProblem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("cannot read the recipe {}: {source}; the image builder copies it to the boot partition, or pass --recipe PATH", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}:{}: {message}", path.display(), at.line, at.column)]
    Syntax {
        path: PathBuf,
        at: Location,
        message: String,
    },
    #[error("{}", render_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<(SpecProblem, Option<Location>)>,
    },
}

fn render_problems(path: &Path, problems: &[(SpecProblem, Option<Location>)]) -> String {
    problems
        .iter()
        .map(|(p, at)| match at {
            Some(at) => format!("{}:{}:{}: {p}", path.display(), at.line, at.column),
            None => format!("{}: {p}", path.display()),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl DeviceRecipe {
    /// Reads and checks the recipe: syntax and type errors, then the
    /// cross-field problems from [`validate`], all with file:line:col.
    pub fn load(path: &Path) -> Result<Self, RecipeError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecipeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// As [`DeviceRecipe::load`], for text already read; `path` only names it
    /// in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, RecipeError> {
        let recipe: DeviceRecipe = toml::from_str(text).map_err(|e| RecipeError::Syntax {
            path: path.to_path_buf(),
            at: e
                .span()
                .map(|s| location(text, s.start))
                .unwrap_or(Location { line: 1, column: 1 }),
            message: e.message().trim_end().to_string(),
        })?;
        let problems = recipe.problems();
        if problems.is_empty() {
            Ok(recipe)
        } else {
            let located = problems
                .into_iter()
                .map(|p| {
                    let at = locate(text, &p.path);
                    (p, at)
                })
                .collect();
            Err(RecipeError::Invalid {
                path: path.to_path_buf(),
                problems: located,
            })
        }
    }

    pub fn problems(&self) -> Vec<SpecProblem> {
        let mut out = match &self.storage {
            Some(storage) => validate(storage, &self.shares),
            None if self.shares.is_empty() => Vec::new(),
            None => vec![problem(
                "shares",
                "shares need an array to live on; add a [storage] section with [[storage.arrays]]",
            )],
        };
        if let Some(alerts) = &self.alerts {
            alerts::check_alerts(alerts, &mut out);
        }
        out
    }
}

fn problem(path: impl Into<String>, message: impl Into<String>) -> SpecProblem {
    SpecProblem {
        path: path.into(),
        message: message.into(),
    }
}

/// Cross-field checks serde cannot express. An empty list means the spec can
/// be planned (whether the disks exist is the planner's question).
pub fn validate(storage: &Storage, shares: &[Share]) -> Vec<SpecProblem> {
    let mut out = Vec::new();
    check_storage(storage, &mut out);
    for (i, array) in storage.arrays.iter().enumerate() {
        pool::check_pool(&format!("storage.arrays[{i}]"), array, storage, &mut out);
    }
    kept::check_kept(storage, &mut out);
    check_shares(storage, shares, &mut out);
    out
}

/// The Debian packages the board needs to carry out this storage, these
/// shares and these alerts, for the image builder to stage. In wizard mode
/// the filesystem and the kinds of share are chosen on the board, so every
/// one is included.
pub fn required_packages(
    storage: Option<&Storage>,
    shares: &[Share],
    alerts: Option<&Alerts>,
) -> Vec<&'static str> {
    let wizard = storage.is_some_and(|s| s.mode == Mode::Wizard);
    let mirror = storage.is_some_and(|s| s.system_mirror.is_some());
    let pools = wizard || storage.is_some_and(|s| s.arrays.iter().any(|a| a.level == Level::Pool));
    let uses = |fs: Filesystem| {
        wizard || storage.is_some_and(|s| s.arrays.iter().any(|a| a.filesystem == fs))
    };
    [
        // mdadm for the arrays; also for its monitor and `status`, whatever the levels.
        ("mdadm", storage.is_some()),
        ("e2fsprogs", uses(Filesystem::Ext4)),
        ("xfsprogs", uses(Filesystem::Xfs)),
        ("btrfs-progs", uses(Filesystem::Btrfs)),
        ("samba", wizard || shares.iter().any(|s| s.smb.is_some())),
        // `vfs objects = fruit streams_xattr` on every share: without the
        // modules (only recommended by samba) every share refuses to open.
        (
            "samba-vfs-modules",
            wizard || shares.iter().any(|s| s.smb.is_some()),
        ),
        (
            "nfs-kernel-server",
            wizard || shares.iter().any(|s| s.nfs.is_some()),
        ),
        // `<hostname>.local` and the Bonjour records Macs and Time Machine
        // look for; WS-Discovery for Windows' Network view.
        ("avahi-daemon", wizard || !shares.is_empty()),
        ("wsdd2", wizard || shares.iter().any(|s| s.smb.is_some())),
        ("smartmontools", storage.is_some()),
        // The system mirror's partition table (sfdisk), second EFI system
        // partition (mkfs.vfat) and copy of the root.
        ("fdisk", mirror),
        ("dosfstools", mirror),
        ("rsync", mirror),
        // A pool's join and its parity (Debian packs no unit or config
        // for either; setup writes them).
        ("mergerfs", pools),
        ("snapraid", pools),
        // Kept ntfs disks where the kernel has no ntfs3 (Raspberry Pi OS
        // kernels differ in it): setup prefers ntfs3 when it is there.
        (
            "ntfs-3g",
            storage.is_some_and(|s| {
                s.disks
                    .iter()
                    .any(|k| k.filesystem == Some(KeptFilesystem::Ntfs))
            }),
        ),
        (
            "hd-idle",
            wizard || storage.is_some_and(|s| !s.spin_down.is_off()),
        ),
        // The mail transport and the HTTP client, and the CA certificates
        // their TLS checks the relay and the web servers against; the
        // wizard's alerts screen may choose any of them.
        ("msmtp", wizard || alerts.is_some_and(|a| a.email.is_some())),
        (
            "curl",
            wizard || alerts.is_some_and(|a| a.webhook.is_some() || a.ntfy.is_some()),
        ),
        (
            "ca-certificates",
            wizard
                || alerts
                    .is_some_and(|a| a.email.is_some() || a.webhook.is_some() || a.ntfy.is_some()),
        ),
    ]
    .into_iter()
    .filter_map(|(package, needed)| needed.then_some(package))
    .collect()
}

/// Whether a disk the board keeps may hold any filesystem nasforge keeps:
/// the recipe leaves a kept disk's filesystem open, or the wizard (where
/// any disk may be kept) decides. The builder then stages what the kernel
/// the board boots lacks to mount each of them.
pub fn kept_filesystem_open(storage: Option<&Storage>) -> bool {
    storage
        .is_some_and(|s| s.mode == Mode::Wizard || s.disks.iter().any(|k| k.filesystem.is_none()))
}

#[cfg(test)]
mod tests;
