//! Which Debian package put the board's kernel into the image, and the name
//! of the headers package built from the same source: ZFS's modules are
//! compiled against exactly those headers. Debian (`linux-image-6.1.0-57-arm64`),
//! Raspberry Pi OS (`linux-image-6.12.47+rpt-rpi-v8`) and Armbian
//! (`linux-image-current-rockchip64`) all name the pair the same way.

use crate::image::ext4::Ext4;
use crate::packages::field;
use anyhow::{Context, Result};

/// The installed package that owns `/lib/modules/<release>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPackage {
    pub release: String,
    pub package: String,
    pub version: String,
}

impl KernelPackage {
    /// The headers package of the same build; Debian's unsigned image
    /// (`-unsigned`) shares its headers with the signed one.
    pub fn headers(&self) -> String {
        let flavour = self
            .package
            .strip_prefix("linux-image-")
            .unwrap_or(&self.package);
        format!(
            "linux-headers-{}",
            flavour.strip_suffix("-unsigned").unwrap_or(flavour)
        )
    }
}

/// Reads the image's dpkg database for the package of kernel `release`.
pub fn find(root: &Ext4, release: &str) -> Result<KernelPackage> {
    let info = "/var/lib/dpkg/info";
    let lists: Vec<String> = root
        .list(info)?
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.starts_with("linux-image-") && n.ends_with(".list"))
        .collect();
    let paths: Vec<String> = lists.iter().map(|n| format!("{info}/{n}")).collect();
    let texts: Vec<(String, String)> = lists
        .iter()
        .zip(root.read_many(&paths)?)
        .filter_map(|(n, data)| Some((n.clone(), String::from_utf8_lossy(&data?).into_owned())))
        .collect();
    let status = root
        .read("/var/lib/dpkg/status")?
        .context("the image has no /var/lib/dpkg/status")?;
    owner(&texts, &String::from_utf8_lossy(&status), release)
}

/// The package among `lists` (dpkg's `<package>[:arch].list` files) whose
/// files include the kernel's module directory, with its installed version.
pub fn owner(lists: &[(String, String)], status: &str, release: &str) -> Result<KernelPackage> {
    let dirs = [
        format!("/lib/modules/{release}"),
        format!("/usr/lib/modules/{release}"),
    ];
    let package = lists
        .iter()
        .find(|(_, text)| text.lines().any(|l| dirs.iter().any(|d| l == d)))
        .map(|(name, _)| {
            let name = name.trim_end_matches(".list");
            name.split(':').next().unwrap_or(name).to_string()
        })
        .with_context(|| {
            format!(
                "no installed package owns /lib/modules/{release}: the kernel the board boots was not installed by dpkg, so nasforge cannot tell which headers package builds ZFS for it{}",
                if lists.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (kernel packages: {})",
                        lists
                            .iter()
                            .map(|(n, _)| n.trim_end_matches(".list"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )
        })?;
    let version = status
        .split("\n\n")
        .find(|s| field(s, "Package") == Some(package.as_str()))
        .and_then(|s| field(s, "Version"))
        .map(String::from)
        .with_context(|| {
            format!("{package} owns the kernel's files but is not in dpkg's status")
        })?;
    Ok(KernelPackage {
        release: release.to_string(),
        package,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Package: dpkg\nStatus: install ok installed\nVersion: 1.21.22\n\nPackage: linux-image-6.1.0-57-arm64\nStatus: install ok installed\nArchitecture: arm64\nVersion: 6.1.192-3\n\nPackage: linux-image-current-rockchip64\nStatus: install ok installed\nVersion: 25.11.1\n";

    fn list(name: &str, release: &str) -> (String, String) {
        (
            format!("{name}.list"),
            format!(
                "/.\n/boot\n/boot/vmlinuz-{release}\n/lib\n/lib/modules\n/lib/modules/{release}\n/lib/modules/{release}/kernel\n"
            ),
        )
    }

    #[test]
    fn the_package_that_owns_the_module_directory_names_the_headers() {
        let lists = vec![
            list(
                "linux-image-current-rockchip64",
                "6.12.1-current-rockchip64",
            ),
            list("linux-image-6.1.0-57-arm64", "6.1.0-57-arm64"),
        ];
        let k = owner(&lists, STATUS, "6.1.0-57-arm64").unwrap();
        assert_eq!(k.package, "linux-image-6.1.0-57-arm64");
        assert_eq!(k.version, "6.1.192-3");
        assert_eq!(k.headers(), "linux-headers-6.1.0-57-arm64");
        let armbian = owner(&lists, STATUS, "6.12.1-current-rockchip64").unwrap();
        assert_eq!(armbian.headers(), "linux-headers-current-rockchip64");
        assert_eq!(armbian.version, "25.11.1");
    }

    #[test]
    fn unsigned_images_and_arch_qualified_lists() {
        let k = KernelPackage {
            release: "6.1.0-57-arm64".into(),
            package: "linux-image-6.1.0-57-arm64-unsigned".into(),
            version: "6.1.192-3".into(),
        };
        assert_eq!(k.headers(), "linux-headers-6.1.0-57-arm64");
        let status = "Package: linux-image-6.12.47+rpt-rpi-v8\nVersion: 1:6.12.47-1+rpt1\n";
        let lists = vec![(
            "linux-image-6.12.47+rpt-rpi-v8:arm64.list".to_string(),
            "/usr/lib/modules/6.12.47+rpt-rpi-v8\n".to_string(),
        )];
        let k = owner(&lists, status, "6.12.47+rpt-rpi-v8").unwrap();
        assert_eq!(k.headers(), "linux-headers-6.12.47+rpt-rpi-v8");
        assert_eq!(k.version, "1:6.12.47-1+rpt1");
    }

    #[test]
    fn a_kernel_no_package_installed_is_named() {
        let lists = vec![list("linux-image-6.1.0-57-arm64", "6.1.0-57-arm64")];
        let e = owner(&lists, STATUS, "6.6.0-nasforge")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/lib/modules/6.6.0-nasforge") && e.contains("linux-image-6.1.0-57-arm64"),
            "{e}"
        );
    }
}
