//! What the board needs to mount a kept disk whose filesystem nobody named:
//! a recipe's `[[storage.disks]]` entry with `keep = true` and no
//! `filesystem`, or the wizard, where any disk may be kept. For each
//! filesystem nasforge keeps that the kernel the board boots cannot mount,
//! the FUSE helper's package is staged, since the board installs nothing
//! once it is offline.

use super::KernelFiles;
use nasforge_engine::machine::filesystems::{KeptFilesystem, drivers};
use nasforge_engine::spec::{Storage, kept_filesystem_open};

/// The Kconfig symbol of each kernel driver a FUSE helper stands in for: a
/// kernel known only by its config is judged by it.
fn config_symbol(module: &str) -> Option<&'static str> {
    match module {
        "ntfs3" => Some("CONFIG_NTFS3_FS"),
        "exfat" => Some("CONFIG_EXFAT_FS"),
        _ => None,
    }
}

/// The packages to stage, each with why, for the kernel in `kernel`.
pub fn fuse_helpers(
    storage: Option<&Storage>,
    kernel: &KernelFiles,
) -> Vec<(&'static str, String)> {
    if !kept_filesystem_open(storage) {
        return vec![];
    }
    KeptFilesystem::ALL
        .into_iter()
        .filter_map(|fs| {
            let (module, fuse) = drivers(fs);
            let (_, _, package) = fuse?;
            let symbols: Vec<String> = config_symbol(module)
                .map(String::from)
                .into_iter()
                .collect();
            (!kernel.has_driver(&[module.to_string()], &symbols)).then(|| {
                (
                    package,
                    format!(
                        "kernel {} has no `{module}` module, and a kept disk may hold {fs}",
                        kernel.version
                    ),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nasforge_engine::spec::DeviceRecipe;
    use std::path::Path;

    fn storage(text: &str) -> Storage {
        DeviceRecipe::parse(text, Path::new("nasforge.toml"))
            .unwrap()
            .storage
            .unwrap()
    }

    fn kernel(dep: &str) -> KernelFiles {
        KernelFiles {
            version: "6.1.0-50-arm64".into(),
            modules_builtin: Some(String::new()),
            modules_dep: Some(dep.into()),
            config: None,
        }
    }

    const KEPT_OPEN: &str = "[storage]\nmode = \"unattended\"\n[[storage.disks]]\nname = \"media\"\nmatch = { transport = \"usb\" }\nkeep = true\nmount = \"/srv/media\"\n";

    #[test]
    fn a_kept_disk_of_no_named_filesystem_gets_what_the_kernel_lacks() {
        let bookworm = kernel("kernel/fs/exfat/exfat.ko.xz:\nkernel/fs/ntfs/ntfs.ko.xz:\n");
        let staged = fuse_helpers(Some(&storage(KEPT_OPEN)), &bookworm);
        assert_eq!(
            staged,
            [(
                "ntfs-3g",
                "kernel 6.1.0-50-arm64 has no `ntfs3` module, and a kept disk may hold ntfs"
                    .to_string()
            )]
        );
        let neither = kernel("kernel/fs/xfs/xfs.ko.xz:\n");
        let names: Vec<&str> = fuse_helpers(Some(&storage(KEPT_OPEN)), &neither)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(names, ["exfat-fuse", "ntfs-3g"]);
        let both = kernel("kernel/fs/exfat/exfat.ko.xz:\nkernel/fs/ntfs3/ntfs3.ko.xz:\n");
        assert!(fuse_helpers(Some(&storage(KEPT_OPEN)), &both).is_empty());
    }

    #[test]
    fn the_wizard_may_keep_any_disk_and_a_named_filesystem_needs_nothing_more() {
        let none = kernel("");
        let wizard = storage("[storage]\nmode = \"wizard\"\n");
        assert_eq!(fuse_helpers(Some(&wizard), &none).len(), 2);
        let named =
            storage(&KEPT_OPEN.replace("keep = true\n", "keep = true\nfilesystem = \"ext4\"\n"));
        assert!(fuse_helpers(Some(&named), &none).is_empty());
        assert!(fuse_helpers(None, &none).is_empty());
    }
}
