//! `nasforge inspect IMAGE`: what an image is and what a board will do with
//! it — partitions, OS, kernels and their capabilities, the kernel each board
//! boots, and the PCIe/overlay settings in effect.

use crate::board::{Family, Model};
use crate::boot::config_txt::ConfigTxt;
use crate::image::{Image, Partition, TableKind, ext4::Ext4};
use crate::kernel::{self, Booted, Capability, KernelReport};
use crate::size::human;
use anyhow::Result;
use nasforge_engine::machine::armbian_env::ArmbianEnv;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct Inspection {
    pub path: String,
    pub size: u64,
    pub table: TableKind,
    pub disk_id: String,
    pub partitions: Vec<Partition>,
    pub boot_partition: Option<u32>,
    pub root_partition: Option<u32>,
    pub os_release: BTreeMap<String, String>,
    /// "rpi", "armbian", "uefi" or "generic", from what the image holds.
    pub family: Family,
    /// UEFI: the boot loader the firmware finds on the EFI system partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efi_loader: Option<String>,
    /// What the kernels are checked for: the family's boards' capabilities.
    #[serde(skip)]
    checked: Vec<Capability>,
    pub kernels: Vec<KernelReport>,
    /// The kernel each board of this family boots.
    pub booted: Vec<BootedReport>,
    /// Raspberry Pi: per board, the config.txt lines in effect that matter
    /// for PCIe SATA (`dtparam=pciex1`, `pciex1_gen`, `kernel=`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pcie: BTreeMap<String, PcieSettings>,
    /// Armbian: armbianEnv.txt's overlay settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub armbian: Option<ArmbianSettings>,
    /// Who can log in as root, when the image has a root filesystem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_access: Option<RootAccess>,
    /// ZFS modules built by nasforge, staged or installed, per kernel.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zfs: Vec<crate::zfs::InImage>,
}

#[derive(Debug, Serialize)]
pub struct RootAccess {
    /// "locked", "empty" or "password"; `known_default` names a vendor's.
    pub password: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_default: Option<&'static str>,
    /// sshd's PermitRootLogin as it reads its files (no Match block applied).
    pub ssh_permit_root_login: String,
    /// Whether sshd would take root's password.
    pub ssh_root_password_login: bool,
}

#[derive(Debug, Serialize)]
pub struct BootedReport {
    #[serde(flatten)]
    pub booted: Booted,
    /// `sata ✓ (libata=m, ahci=m)` for each capability, when the version is known.
    pub capabilities: Vec<String>,
    /// Why the board's firmware cannot boot the image as a NAS (a device
    /// tree or a driver of its own missing); empty when it can.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cannot_boot: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PcieSettings {
    pub pciex1: Option<String>,
    pub pciex1_gen: Option<String>,
    pub kernel: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ArmbianSettings {
    pub overlay_prefix: Option<String>,
    pub overlays: Vec<String>,
    pub fdtfile: Option<String>,
}

pub fn inspect(path: &Path) -> Result<Inspection> {
    let image = Image::open(path)?;
    let root = image.ext4();
    let os_release = match &root {
        Some(r) => crate::distro::os_release(r)?,
        None => BTreeMap::new(),
    };
    let (config, armbian_env) = boot_settings(&image, root.as_ref())?;
    let efi_loader = crate::boot::efi_loader(&image)?;
    let family = if config.is_some() {
        Family::Rpi
    } else if armbian_env.is_some() {
        Family::Armbian
    } else if efi_loader.is_some() {
        Family::Uefi
    } else {
        Family::Generic
    };

    let files = kernel::installed(&image)?;
    let kernels: Vec<KernelReport> = files.iter().map(|k| k.report(&[])).collect();
    let boards: Vec<Model> = match family {
        Family::Rpi => Model::raspberry_pis().collect(),
        Family::Armbian => vec![armbian_board(armbian_env.as_ref())],
        Family::Generic => vec![Model::GenericArm64],
        Family::Uefi => vec![Model::X86_64],
    };
    let booted = booted_reports(&image, &boards, &files)?;
    let mut checked: Vec<Capability> = boards.iter().flat_map(|b| b.info().capabilities).collect();
    checked.sort();
    checked.dedup();
    let pcie = config.as_ref().map(pcie_settings).unwrap_or_default();
    let armbian = armbian_env.map(|e| ArmbianSettings {
        overlay_prefix: e.get("overlay_prefix").map(String::from),
        overlays: e.overlays(),
        fdtfile: e.get("fdtfile").map(String::from),
    });
    let root_access = match &root {
        Some(r) => root_access(r)?,
        None => None,
    };
    let zfs = match &root {
        Some(r) => crate::zfs::in_image(r)?,
        None => vec![],
    };

    Ok(Inspection {
        path: path.display().to_string(),
        size: image.layout.disk_size,
        table: image.layout.kind,
        disk_id: image.layout.disk_id.clone(),
        boot_partition: image.boot().map(|p| p.number),
        root_partition: image.root().map(|p| p.number),
        partitions: image.layout.partitions.clone(),
        os_release,
        family,
        efi_loader: efi_loader.map(String::from),
        checked,
        kernels,
        booted,
        pcie,
        armbian,
        root_access,
        zfs,
    })
}

/// The Raspberry Pi config.txt on the FAT partition or, without one,
/// Armbian's armbianEnv.txt: which of them the image has tells its family.
fn boot_settings(
    image: &Image,
    root: Option<&Ext4>,
) -> Result<(Option<ConfigTxt>, Option<ArmbianEnv>)> {
    let config = match image.fat(false)? {
        Some(f) => f
            .read("config.txt")?
            .map(|b| ConfigTxt::parse(&String::from_utf8_lossy(&b))),
        None => None,
    };
    let armbian_env = match (&config, root) {
        (None, Some(r)) => r
            .read("/boot/armbianEnv.txt")?
            .map(|b| ArmbianEnv::parse(&String::from_utf8_lossy(&b))),
        _ => None,
    };
    Ok((config, armbian_env))
}

/// The kernel each board boots and, when it is installed, what it can do.
fn booted_reports(
    image: &Image,
    boards: &[Model],
    files: &[kernel::KernelFiles],
) -> Result<Vec<BootedReport>> {
    let versions: Vec<String> = files.iter().map(|k| k.version.clone()).collect();
    let mut booted = Vec::new();
    for &board in boards {
        let b = kernel::booted(image, board, &versions)?;
        let extras = kernel::board_extras(board);
        let capabilities = match b
            .version
            .as_ref()
            .and_then(|v| files.iter().find(|k| &k.version == v))
        {
            Some(k) => {
                let r = k.report(&extras);
                board
                    .info()
                    .capabilities
                    .iter()
                    .map(|c| r.describe(*c, &extras))
                    .collect()
            }
            None => vec![],
        };
        let cannot_boot = kernel::firmware::problems(image, board, &b, files)?;
        booted.push(BootedReport {
            booted: b,
            capabilities,
            cannot_boot,
        });
    }
    Ok(booted)
}

/// Per Raspberry Pi board, the config.txt lines in effect for PCIe SATA.
fn pcie_settings(config: &ConfigTxt) -> BTreeMap<String, PcieSettings> {
    Model::raspberry_pis()
        .map(|board| {
            let filters = board.info().filters;
            (
                board.name().to_string(),
                PcieSettings {
                    pciex1: config.effective("dtparam:pciex1", &filters),
                    pciex1_gen: config.effective("dtparam:pciex1_gen", &filters),
                    kernel: config.effective("kernel", &filters),
                },
            )
        })
        .collect()
}

fn root_access(root: &Ext4) -> Result<Option<RootAccess>> {
    use crate::system::access::{self, Password, SshdConfig};
    let Some(shadow) = root.read("/etc/shadow")? else {
        return Ok(None);
    };
    let shadow = String::from_utf8_lossy(&shadow);
    let Some(field) = access::shadow_field(&shadow, "root") else {
        return Ok(None);
    };
    let (password, known_default) = match access::password_state("root", field) {
        Password::Locked => ("locked", None),
        Password::Empty => ("empty", None),
        Password::Set(known) => ("password", known),
    };
    let main = root.read("/etc/ssh/sshd_config")?.unwrap_or_default();
    // An Include names files on the board: read them from the image.
    let include = |pattern: &str| -> Vec<String> {
        let (dir, name) = pattern.rsplit_once('/').unwrap_or(("/etc/ssh", pattern));
        let mut names: Vec<String> = match name.split_once('*') {
            Some((prefix, suffix)) => root
                .list(dir)
                .ok()
                .flatten()
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.name)
                .filter(|n| n.starts_with(prefix) && n.ends_with(suffix))
                .collect(),
            None => vec![name.to_string()],
        };
        names.sort();
        names
            .iter()
            .filter_map(|n| root.read(&format!("{dir}/{n}")).ok().flatten())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    };
    let sshd = SshdConfig::evaluate(&String::from_utf8_lossy(&main), &include);
    Ok(Some(RootAccess {
        password,
        known_default,
        ssh_permit_root_login: sshd.get("permitrootlogin").to_string(),
        ssh_root_password_login: sshd.root_password_login(),
    }))
}

/// The Rock board an Armbian image is for, from the device tree it loads.
fn armbian_board(env: Option<&ArmbianEnv>) -> Model {
    let fdt = env.and_then(|e| e.get("fdtfile")).unwrap_or("");
    if fdt.contains("rock-5b") {
        Model::Rock5b
    } else if fdt.contains("rock-3a") {
        Model::Rock3a
    } else if fdt.contains("rock-pi-4") || fdt.contains("rock-4") {
        Model::Rock4b
    } else {
        Model::GenericArm64
    }
}

impl Inspection {
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_layout(&mut s);
        self.render_kernels(&mut s);
        self.render_settings(&mut s);
        s
    }

    fn render_layout(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "{}: {} disk image, {} partition table ({})",
            self.path,
            human(self.size),
            self.table,
            self.disk_id
        );
        for p in &self.partitions {
            let role = if Some(p.number) == self.boot_partition {
                " [boot]"
            } else if Some(p.number) == self.root_partition {
                " [root]"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "  {:>2}  start {:>10}  size {:>10}  type {:<6} {:<6} {}{}",
                p.number,
                human(p.start),
                human(p.size),
                p.type_id,
                p.fs.to_string(),
                p.label.as_deref().or(p.name.as_deref()).unwrap_or("-"),
                role
            );
        }
    }

    /// The OS, the installed kernels and the one each board boots.
    fn render_kernels(&self, s: &mut String) {
        if let Some(name) = self.os_release.get("PRETTY_NAME") {
            let _ = writeln!(s, "os: {name}");
        }
        if self.kernels.is_empty() {
            let _ = writeln!(s, "kernels: none found in /lib/modules");
        }
        for k in &self.kernels {
            let caps: Vec<String> = self.checked.iter().map(|c| k.describe(*c, &[])).collect();
            let _ = writeln!(
                s,
                "kernel {} (from {}): {}",
                k.version,
                k.evidence,
                caps.join(", ")
            );
        }
        for z in &self.zfs {
            let _ = writeln!(s, "{}", z.describe());
        }
        for b in &self.booted {
            let v = b.booted.version.as_deref().unwrap_or("unknown");
            if b.cannot_boot.is_empty() {
                let _ = writeln!(s, "{} boots {} — {}", b.booted.board, v, b.booted.reason);
            } else {
                let _ = writeln!(
                    s,
                    "{} cannot boot {}: {} — {}",
                    b.booted.board,
                    v,
                    b.cannot_boot.join("; "),
                    b.booted.reason
                );
            }
            if !b.capabilities.is_empty() {
                let _ = writeln!(s, "    {}", b.capabilities.join(", "));
            }
        }
    }

    /// PCIe settings, root's access and Armbian's overlays.
    fn render_settings(&self, s: &mut String) {
        for (board, p) in &self.pcie {
            let _ = writeln!(
                s,
                "config.txt for {board}: pciex1={} pciex1_gen={}{}",
                p.pciex1.as_deref().unwrap_or("(off)"),
                p.pciex1_gen.as_deref().unwrap_or("(default)"),
                p.kernel
                    .as_ref()
                    .map(|k| format!(" kernel={k}"))
                    .unwrap_or_default()
            );
        }
        if let Some(r) = &self.root_access {
            let _ = writeln!(
                s,
                "root: {}{}; sshd PermitRootLogin {} — {}",
                match r.password {
                    "locked" => "password locked",
                    "empty" => "EMPTY password",
                    _ => "has a password",
                },
                r.known_default
                    .map(|k| format!(" ({k}: anyone can log in)"))
                    .unwrap_or_default(),
                r.ssh_permit_root_login,
                if r.ssh_root_password_login {
                    "root may log in over SSH with a password"
                } else {
                    "no root password login over SSH"
                }
            );
        }
        if let Some(l) = &self.efi_loader {
            let _ = writeln!(s, "efi: {l} on the EFI system partition");
        }
        if let Some(a) = &self.armbian {
            let _ = writeln!(
                s,
                "armbianEnv.txt: overlay_prefix={} overlays={} fdtfile={}",
                a.overlay_prefix.as_deref().unwrap_or("-"),
                if a.overlays.is_empty() {
                    "-".to_string()
                } else {
                    a.overlays.join(" ")
                },
                a.fdtfile.as_deref().unwrap_or("-")
            );
        }
    }
}
