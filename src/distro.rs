//! Which distribution an image's userland is, and the Debian release it is
//! built on: what decides whether `emulate` can boot the image's own kernel
//! or needs a stand-in, and which Debian kernel stands in.

use crate::image::ext4::Ext4;
use anyhow::Result;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// pi-gen writes /etc/rpi-issue (export-image/05-finalise); images
    /// before that carry userconf-pi, Raspberry Pi OS's own first-user
    /// service.
    RaspberryPiOs,
    /// armbian/build writes /etc/armbian-release into every image.
    Armbian,
    /// Anything else: Debian's own images, nasforge's Debian bases.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Userland {
    pub distribution: Distribution,
    /// os-release's `ID` (debian, ubuntu, ...).
    pub id: String,
    /// os-release's `VERSION_CODENAME` (bookworm, trixie, noble, ...).
    pub codename: Option<String>,
    /// os-release's `PRETTY_NAME`, for messages.
    pub pretty: String,
}

impl Userland {
    pub fn of(root: &Ext4) -> Result<Userland> {
        let fields = os_release(root)?;
        let distribution = if root.owner("/etc/armbian-release")?.is_some() {
            Distribution::Armbian
        } else if root.owner("/etc/rpi-issue")?.is_some()
            || root.owner("/usr/lib/userconf-pi/userconf")?.is_some()
        {
            Distribution::RaspberryPiOs
        } else {
            Distribution::Other
        };
        let get = |k: &str| fields.get(k).filter(|v| !v.is_empty()).cloned();
        Ok(Userland {
            distribution,
            id: get("ID").unwrap_or_else(|| "linux".into()),
            codename: get("VERSION_CODENAME"),
            pretty: get("PRETTY_NAME").unwrap_or_else(|| "an unknown Linux".into()),
        })
    }

    /// What the distribution is called in messages.
    pub fn name(&self) -> &'static str {
        match self.distribution {
            Distribution::RaspberryPiOs => "Raspberry Pi OS",
            Distribution::Armbian => "Armbian",
            Distribution::Other => "this image",
        }
    }

    /// The Debian release the userland is built on, when it is Debian's.
    pub fn debian_release(&self) -> Option<&str> {
        (self.id == "debian")
            .then_some(self.codename.as_deref())
            .flatten()
    }
}

/// The fields of the image's os-release (`/usr/lib/os-release`, else the
/// `/etc/os-release` of older images).
pub fn os_release(root: &Ext4) -> Result<BTreeMap<String, String>> {
    let text = match root.read("/usr/lib/os-release")? {
        Some(t) => Some(t),
        None => root.read("/etc/os-release")?,
    };
    Ok(text
        .map(|t| parse_os_release(&String::from_utf8_lossy(&t)))
        .unwrap_or_default())
}

pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_values_lose_their_quotes() {
        let f = parse_os_release(
            "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\nVERSION_CODENAME=trixie\n",
        );
        assert_eq!(f["PRETTY_NAME"], "Debian GNU/Linux 13 (trixie)");
        assert_eq!(f["VERSION_CODENAME"], "trixie");
    }
}
