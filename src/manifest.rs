//! The build manifest: every change a build made, with the file's digest
//! before and after and the reason, written as JSON beside the image.

use crate::board::Model;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// `<partition label or role>:<path>`, e.g. `bootfs:/config.txt`.
    pub file: String,
    pub before_sha256: Option<String>,
    pub after_sha256: Option<String>,
    pub why: String,
    /// Line-level detail, e.g. "added `dtparam=pciex1` to [pi5]".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

/// The image the build started from.
#[derive(Debug, Clone, Serialize)]
pub struct Base {
    pub location: String,
    pub sha256: Option<String>,
    pub format: String,
}

/// Which kernel a board boots, and how that was worked out (by
/// `kernel::booted`).
#[derive(Debug, Clone, Serialize)]
pub struct Booted {
    pub board: Model,
    /// The kernel image file (`kernel_2712.img`, `/boot/Image`, ...).
    pub file: Option<String>,
    pub version: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub path: String,
    /// The sha256 of the file at `path` (compressed when it is .img.xz).
    pub sha256: String,
    /// The sha256 of the raw disk image, what a flasher verifies against.
    pub image_sha256: String,
    pub image_size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub nasforge: &'static str,
    pub recipe: String,
    pub name: String,
    pub board: String,
    pub base: Base,
    pub output: Output,
    pub kernel: Option<Booted>,
    pub changes: Vec<Change>,
    /// Files in the image holding password equivalents, without the values;
    /// when there is one, the image is written readable only by its owner.
    pub secrets: Vec<Secret>,
    pub warnings: Vec<String>,
}

/// What kind of password equivalent a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretKind {
    /// crypt(3) hashes: guessable offline, so kept from other people.
    CryptHash,
    /// Samba's NT hash: enough on its own to log in over SMB.
    NtHash,
    /// The SMTP relay's password from `[alerts.smtp]`, in clear: msmtp
    /// must send it.
    SmtpPassword,
    /// A web hook's or ntfy's URL from `[alerts]`: its token (an ntfy
    /// topic's name) is all it takes to post or read the NAS's alerts.
    AlertToken,
}

impl SecretKind {
    pub fn describe(self) -> &'static str {
        match self {
            SecretKind::CryptHash => "password hashes",
            SecretKind::NtHash => "Samba NT hashes (each enough to log in over SMB)",
            SecretKind::SmtpPassword => "the SMTP relay's password",
            SecretKind::AlertToken => "the alerts' web hook or ntfy URL with its token",
        }
    }
}

/// A file of the finished image holding password equivalents, for the
/// manifest: where, what kind and whose, never the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Secret {
    /// `<partition>:<path>`, as in the manifest's changes.
    pub file: String,
    pub kind: SecretKind,
    pub accounts: Vec<String>,
}
