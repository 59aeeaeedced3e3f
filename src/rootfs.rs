//! Everything a recipe puts into the root filesystem: the NAS packages
//! staged for an offline first boot, users and system settings, the
//! first-boot service, the nasforge-setup binary and the recipe itself.
//! Worked out first (`prepare`, which also says how much room it needs),
//! then written in one debugfs run (`apply`).

use crate::board::Family;
use crate::firstboot;
use crate::image::Image;
use crate::image::ext4::{Ext4, Op};
use crate::manifest::Change;
use crate::packages::{self, Resolved};
use crate::recipe::Recipe;
use crate::system;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub struct Prepared {
    pub resolved: Option<Resolved>,
    system: system::Applied,
    binary: Option<PathBuf>,
    firstboot: Option<firstboot::Settings>,
    recipe_copy: Option<Vec<u8>>,
}

/// Room the first boot needs beyond the packages themselves: apt's lists,
/// logs, and the journal.
const MARGIN: u64 = 128 << 20;

impl Prepared {
    /// Bytes the root filesystem must have free: the staged packages, what
    /// they unpack to on the board, and a margin.
    pub fn space_needed(&self) -> u64 {
        let packages = self
            .resolved
            .as_ref()
            .map_or(0, |r| r.download_bytes() + r.installed_bytes());
        let binary = self
            .binary
            .as_ref()
            .and_then(|b| std::fs::metadata(b).ok())
            .map_or(0, |m| m.len());
        if packages == 0 && binary == 0 {
            0
        } else {
            packages + binary + MARGIN
        }
    }
}

impl Prepared {
    /// The directories what was prepared goes into.
    fn dirs(&self) -> Vec<&'static str> {
        let mut dirs = vec![];
        if self.resolved.is_some() || self.firstboot.is_some() || !self.system.ops.is_empty() {
            dirs.push("/var/lib/nasforge");
        }
        if self.resolved.is_some() {
            dirs.push(packages::STAGE_DIR);
        }
        if self.binary.is_some() {
            dirs.push("/usr/local/sbin");
        }
        dirs
    }
}

/// The console autologin drop-ins armbian-firstlogin removes.
const ARMBIAN_AUTOLOGIN: [&str; 4] = [
    "/etc/systemd/system/getty@.service.d/override.conf",
    "/etc/systemd/system/getty@tty1.service.d/override.conf",
    "/etc/systemd/system/serial-getty@.service.d/override.conf",
    "/etc/systemd/system/serial-getty@ttyGS0.service.d/override.conf",
];

/// `helpers`: packages the builder adds to the recipe's (the FUSE helpers
/// of `kernel::filesystems`); `zfs`: the ZFS modules and userland to stage,
/// when the recipe wants ZFS.
pub fn prepare(
    image: &Image,
    recipe: &Recipe,
    helpers: &[String],
    cache: &Path,
    refresh: bool,
    zfs: Option<&crate::zfs::Staged>,
) -> Result<Prepared> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem")?;
    let smb_users: Vec<String> = recipe
        .shares
        .iter()
        .filter_map(|s| s.smb.as_ref())
        .flat_map(|s| s.users.iter().cloned())
        .collect();
    let system = system::apply(&root, &recipe.system, &smb_users)?;
    let mut install = recipe.packages.clone();
    for h in helpers {
        if !install.contains(h) {
            install.push(h.clone());
        }
    }
    if system.needs_openssh && !install.iter().any(|p| p == "openssh-server") {
        install.push("openssh-server".into());
    }
    if system.needs_unattended_upgrades && !install.iter().any(|p| p == system::updates::PACKAGE) {
        install.push(system::updates::PACKAGE.into());
    }
    // The ZFS userland is asked for at the modules' exact version; the
    // board's staged repository holds only that one, so it installs by name.
    let mut resolve = install.clone();
    if let Some(z) = zfs {
        resolve.extend(z.userland.iter().cloned());
        install.extend(
            z.userland
                .iter()
                .map(|p| p.split('=').next().unwrap_or(p).to_string()),
        );
        install.push(z.package.package.clone());
    }
    let resolved = if resolve.is_empty() {
        None
    } else {
        let mut r = packages::resolve(&root, &resolve, recipe.mirror.as_deref(), cache, refresh)?;
        if let Some(z) = zfs {
            r.requested.push(z.package.package.clone());
            r.debs.push(z.package.clone());
        }
        Some(r)
    };
    let has_storage = recipe.storage.is_some() || !recipe.shares.is_empty();
    let binary = if has_storage {
        let arch = match &resolved {
            Some(r) => r.architecture.clone(),
            None => image_arch(image)?,
        };
        let path = match &recipe.installer_binary {
            Some(p) => p.clone(),
            None => firstboot::default_binary(&arch)?,
        };
        firstboot::check_binary(&path, &arch)?;
        Some(path)
    } else {
        None
    };
    let firstboot = (resolved.is_some() || has_storage).then(|| firstboot::Settings {
        packages: install.clone(),
        mode: recipe.storage.as_ref().map(|s| s.mode),
        ssh: recipe.system.wants_ssh() && system.needs_openssh,
        hostname: recipe.system.hostname.clone(),
        users: recipe.system.users.iter().map(|u| u.name.clone()).collect(),
    });
    let recipe_copy = if has_storage {
        Some(
            firstboot::board_recipe(
                recipe.storage.as_ref(),
                &recipe.shares,
                recipe.alerts.as_ref(),
            )?
            .into_bytes(),
        )
    } else {
        None
    };
    Ok(Prepared {
        resolved,
        system,
        binary,
        firstboot,
        recipe_copy,
    })
}

fn image_arch(image: &Image) -> Result<String> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem")?;
    let status = root
        .read("/var/lib/dpkg/status")?
        .context("the image has no /var/lib/dpkg/status")?;
    let text = String::from_utf8_lossy(&status);
    text.split("\n\n")
        .find(|s| s.lines().any(|l| l == "Package: dpkg"))
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Architecture: ")))
        .map(|a| a.trim().to_string())
        .context("the image's dpkg status has no dpkg entry, so its architecture is unknown")
}

/// What `apply` writes into the root filesystem, in order, and the
/// manifest's record of it.
struct Writes {
    ops: Vec<Op>,
    changes: Vec<Change>,
}

/// Writes everything `prepare` worked out. Returns the manifest records and
/// warnings.
pub fn apply(
    image: &Image,
    recipe: &Recipe,
    prepared: Prepared,
) -> Result<(Vec<Change>, Vec<String>)> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem")?;
    let dirs = root.missing_dirs(&prepared.dirs())?;
    let mut w = Writes {
        ops: dirs,
        changes: prepared.system.changes,
    };
    w.ops.extend(prepared.system.ops);
    if let Some(r) = &prepared.resolved {
        stage_packages(&root, r, &mut w)?;
    }
    if let Some(b) = &prepared.binary {
        setup_binary(&root, b, &mut w)?;
        md_first_boot_conf(&root, &mut w)?;
        crate::alerts::install(&root, recipe.alerts.as_ref(), &mut w.ops, &mut w.changes)?;
    }
    if let Some(settings) = &prepared.firstboot {
        w.ops.extend(firstboot::ops(&root, settings)?);
        w.changes.push(Change {
            file: "root:/etc/systemd/system/nasforge-firstboot.service".into(),
            before_sha256: None,
            after_sha256: None,
            why: "installs the staged packages on first boot, then runs nasforge-setup".into(),
            details: vec![],
        });
    }
    if recipe
        .storage
        .as_ref()
        .is_some_and(|s| s.mode == nasforge_engine::spec::Mode::Wizard)
    {
        wizard_files(&root, &mut w)?;
    }
    let family = recipe.board.info().family;
    // Armbian's first login forces a new root password and user unless this
    // marker is gone; the recipe's users are the answer to those questions.
    if family == Family::Armbian {
        if !recipe.system.users.is_empty() && root.owner("/root/.not_logged_in_yet")?.is_some() {
            skip_armbian_first_login(&mut w);
        }
        no_armbian_autologin(&root, &mut w)?;
    }
    let mut boot_files = prepared.system.boot_files;
    if let Some(copy) = prepared.recipe_copy {
        board_recipe(&root, family, copy, &mut boot_files, &mut w)?;
    }
    root.apply(&w.ops)?;
    if !boot_files.is_empty() {
        let fat = image
            .fat(true)?
            .context("the image has no FAT boot partition for userconf.txt / nasforge.toml")?;
        for (name, data) in &boot_files {
            fat.write(name, data)?;
        }
        fat.close()?;
    }
    Ok((w.changes, prepared.system.warnings))
}

/// The recipe's `[storage]` and `[[shares]]` where nasforge-setup reads
/// them: the FAT partition of a Raspberry Pi, /boot on the root otherwise.
fn board_recipe(
    root: &Ext4,
    family: Family,
    copy: Vec<u8>,
    boot_files: &mut Vec<(String, Vec<u8>)>,
    w: &mut Writes,
) -> Result<()> {
    match family {
        Family::Rpi => boot_files.push(("nasforge.toml".into(), copy)),
        Family::Armbian | Family::Generic | Family::Uefi => {
            if root.owner("/boot/nasforge.toml")?.is_some() {
                w.ops.push(Op::Remove {
                    path: "/boot/nasforge.toml".into(),
                });
            }
            // Root only: its [alerts] URLs carry tokens, and nasforge-setup,
            // its one reader, runs as root. (The Raspberry Pi's copy is on
            // FAT, which holds no modes: docs/recipe.md says so.)
            w.ops
                .push(Op::root_file("/boot/nasforge.toml", copy, 0o600));
        }
    }
    w.changes.push(Change {
        file: "boot:/nasforge.toml".into(),
        before_sha256: None,
        after_sha256: None,
        why: "the recipe's [storage] and [[shares]], for nasforge-setup on the board".into(),
        details: vec![],
    });
    Ok(())
}

/// The resolved packages as a flat repository in `STAGE_DIR`.
fn stage_packages(root: &Ext4, r: &Resolved, w: &mut Writes) -> Result<()> {
    if root.list(packages::STAGE_DIR)?.is_some() {
        // A rebuild from an image nasforge made: replace the old staging.
        for e in root.list(packages::STAGE_DIR)?.unwrap_or_default() {
            w.ops.insert(
                0,
                Op::Remove {
                    path: format!("{}/{}", packages::STAGE_DIR, e.name),
                },
            );
        }
    }
    w.ops.extend(packages::stage(r)?);
    w.changes.push(Change {
        file: format!("root:{}", packages::STAGE_DIR),
        before_sha256: None,
        after_sha256: None,
        why: format!(
            "packages for the offline first boot: {}",
            r.requested.join(", ")
        ),
        details: r
            .debs
            .iter()
            .map(|d| {
                format!(
                    "{} {} ({}, sha256 {})",
                    d.package, d.version, d.filename, d.sha256
                )
            })
            .collect(),
    });
    Ok(())
}

/// nasforge-setup, copied from this machine.
fn setup_binary(root: &Ext4, b: &Path, w: &mut Writes) -> Result<()> {
    if root.owner(firstboot::SETUP_BINARY)?.is_some() {
        w.ops.push(Op::Remove {
            path: firstboot::SETUP_BINARY.into(),
        });
    }
    w.ops.push(Op::Copy {
        path: firstboot::SETUP_BINARY.into(),
        from: b.to_path_buf(),
        mode: 0o755,
        uid: 0,
        gid: 0,
    });
    w.changes.push(Change {
        file: format!("root:{}", firstboot::SETUP_BINARY),
        before_sha256: None,
        after_sha256: Some(crate::io::hash::hash_file(
            &std::fs::File::open(b)?,
            |_| {},
        )?),
        why: "the first-boot storage setup program".into(),
        details: vec![format!("from {}", b.display())],
    });
    Ok(())
}

/// mdadm.conf before the first boot, when the image has none (see
/// [`nasforge_engine::storage::mdadm::first_boot_conf`]): the disks of an
/// old NAS in the board stay unassembled until someone chooses them. An
/// image with mdadm installed has its file already, made with no disks in.
fn md_first_boot_conf(root: &Ext4, w: &mut Writes) -> Result<()> {
    const CONF: &str = "/etc/mdadm/mdadm.conf";
    if root.owner(CONF)?.is_some() {
        return Ok(());
    }
    w.ops.extend(root.missing_dirs(&["/etc/mdadm"])?);
    let text = nasforge_engine::storage::mdadm::first_boot_conf();
    w.changes.push(crate::system::record_new(CONF, text.as_bytes(), "mdadm's own install would list the arrays on the disks it finds, an old NAS's too, and start them read-write at the next boot"));
    w.ops.push(Op::root_file(CONF, text.into_bytes(), 0o644));
    Ok(())
}

/// Storage mode "wizard": the login note and the unit that starts the
/// wizard after a login.
fn wizard_files(root: &Ext4, w: &mut Writes) -> Result<()> {
    use nasforge_engine::image_files::{ENABLE_WIZARD, FILES};
    let dirs: Vec<&str> = FILES
        .iter()
        .filter_map(|f| f.path.rsplit_once('/').map(|(d, _)| d))
        .chain([ENABLE_WIZARD.0.rsplit_once('/').unwrap().0])
        .collect();
    w.ops.extend(root.missing_dirs(&dirs)?);
    for f in FILES {
        if root.owner(f.path)?.is_some() {
            w.ops.push(Op::Remove {
                path: f.path.into(),
            });
        }
        w.ops.push(Op::root_file(
            f.path,
            f.contents.as_bytes().to_vec(),
            f.mode,
        ));
    }
    if root.readlink(ENABLE_WIZARD.0)?.is_none() {
        w.ops.push(Op::Symlink {
            path: ENABLE_WIZARD.0.into(),
            target: ENABLE_WIZARD.1.into(),
        });
    }
    w.changes.push(Change {
        file: format!("root:{}", ENABLE_WIZARD.1),
        before_sha256: None,
        after_sha256: None,
        why: "storage mode \"wizard\": a note on the login screen, and the wizard after a login"
            .into(),
        details: FILES.iter().map(|f| f.path.to_string()).collect(),
    });
    Ok(())
}

/// Armbian's first-login marker removed.
fn skip_armbian_first_login(w: &mut Writes) {
    w.ops.push(Op::Remove {
        path: "/root/.not_logged_in_yet".into(),
    });
    w.changes.push(Change {
        file: "root:/root/.not_logged_in_yet".into(),
        before_sha256: None,
        after_sha256: None,
        why: "removed: the recipe's users replace Armbian's first-login questions".into(),
        details: vec![],
    });
}

/// Armbian logs root in on every console without a password until its
/// first-login script removes these drop-ins (armbian/build
/// lib/functions/rootfs/distro-agnostic.sh writes them when
/// CONSOLE_AUTOLOGIN=yes; armbian-firstlogin deletes these same four
/// paths). Until that first login anyone at the keyboard or the serial
/// port is root, so they go from every build, with the recipe's users or
/// without: the first login then takes root's password, as on any system.
fn no_armbian_autologin(root: &Ext4, w: &mut Writes) -> Result<()> {
    let paths: Vec<String> = ARMBIAN_AUTOLOGIN.iter().map(|p| p.to_string()).collect();
    for (path, data) in paths.iter().zip(root.read_many(&paths)?) {
        if data.is_some_and(|d| String::from_utf8_lossy(&d).contains("--autologin")) {
            w.ops.push(Op::Remove { path: path.clone() });
            w.changes.push(Change {
                file: format!("root:{path}"),
                before_sha256: None,
                after_sha256: None,
                why: "removed: Armbian's console autologin as root, a root shell for anyone at the console until the first login".into(),
                details: vec![],
            });
        }
    }
    Ok(())
}
