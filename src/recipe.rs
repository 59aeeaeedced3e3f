//! The recipe: one TOML file that says which image to start from, which
//! board it is for, and what to change. Parsing is strict (`deny_unknown_fields`)
//! and every error points at a line and column of the file; the schema is
//! documented in docs/recipe.md.
//!
//! Each section is parsed and checked by the module that uses it (`[boot]`
//! by `boot::section`, `[system]` by `system::section`, ...), all the same
//! way: the raw section and the recipe's text in, the checked section or
//! every error found in it out. `Recipe::parse` gathers them all, so one run
//! reports every mistake in the file.

mod base;
mod board;

pub use base::{Base, BaseSource};

use crate::board::Model;
use crate::boot::section::Boot;
use crate::diag::{Located, LocatedErrors, did_you_mean};
use crate::kernel::section::{Kernel, KernelFile};
use crate::output::{Output, OutputFile};
use crate::packages::section::PackagesSection;
use crate::section::{Checked, RecipeText, checked};
use crate::system::SystemSection;
use nasforge_engine::spec::{Alerts, DeviceRecipe, Share, Storage};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    name: Option<Spanned<String>>,
    base: Spanned<base::BaseFile>,
    board: board::BoardFile,
    #[serde(default)]
    boot: Option<Spanned<Boot>>,
    #[serde(default)]
    kernel: KernelFile,
    #[serde(default)]
    output: OutputFile,
    storage: Option<Storage>,
    #[serde(default)]
    shares: Vec<Share>,
    alerts: Option<Alerts>,
    packages: Option<Spanned<PackagesSection>>,
    #[serde(default)]
    system: SystemSection,
    installer: Option<InstallerFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallerFile {
    /// A nasforge-setup built for the image's architecture.
    binary: Spanned<String>,
}

/// A recipe that parsed and passed every check.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub file: PathBuf,
    /// The recipe as read, to place errors found after parsing.
    pub text: String,
    pub name: String,
    pub base: Base,
    pub board: Model,
    pub pcie_gen: Option<u8>,
    /// Armbian overlays to add, each as alternative names; the board's
    /// defaults unless the recipe names its own.
    pub overlays: Vec<Vec<String>>,
    pub boot: Boot,
    pub kernel: Kernel,
    pub output: Output,
    /// What `nasforge-setup` builds on the board at first boot; parsed and
    /// checked here with the board's own types.
    pub storage: Option<Storage>,
    pub shares: Vec<Share>,
    /// `[alerts]`, with the SMTP password the board copy leaves out.
    pub alerts: Option<Alerts>,
    /// Packages staged for the offline first boot (with their dependencies);
    /// empty when the recipe needs none.
    pub packages: Vec<String>,
    /// Replaces the image's Debian archive address for package resolution.
    pub mirror: Option<String>,
    pub system: SystemSection,
    /// `[installer] binary`, resolved against the recipe's directory.
    pub installer_binary: Option<PathBuf>,
}

/// The section's value, its errors (if any) added to `errs`.
fn gather<T>(errs: &mut Vec<Located>, section: Checked<T>) -> Option<T> {
    section.map_err(|e| errs.extend(e)).ok()
}

impl Recipe {
    pub fn load(file: &Path) -> anyhow::Result<Recipe> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read recipe {}: {e}", file.display()))?;
        Ok(Recipe::parse(file, &text)?)
    }

    /// Every section is checked before any error is returned, so one run
    /// reports every mistake; the errors are sorted by where they are.
    pub fn parse(file: &Path, text: &str) -> Result<Recipe, LocatedErrors> {
        let raw: RecipeFile =
            toml::from_str(text).map_err(|e| LocatedErrors(vec![toml_error(file, text, &e)]))?;
        let at = RecipeText { file, text };
        let model = raw.board.model;
        let mut errs = Vec::new();
        let e = &mut errs;
        let name = gather(e, name(raw.name.as_ref(), &at));
        let base = gather(e, base::parse(&raw.base, &at));
        e.extend(base::arch_problem(&raw.base, model, &at));
        let board = gather(e, board::parse(&raw.board, &at));
        let boot = gather(
            e,
            crate::boot::section::parse(raw.boot.as_ref(), model, &at),
        );
        let kernel = gather(e, crate::kernel::section::parse(raw.kernel, model, &at));
        // A refused name fails the recipe anyway; the default output path
        // made from it is then never used.
        let output_name = name.as_deref().unwrap_or_default();
        let output = gather(e, crate::output::parse(&raw.output, output_name, &at));
        let packages = gather(
            e,
            crate::packages::section::parse(
                raw.packages.as_ref(),
                raw.storage.as_ref(),
                &raw.shares,
                raw.alerts.as_ref(),
                &at,
            ),
        );
        let installer_binary = gather(e, installer(raw.installer.as_ref(), &at));
        let system = gather(
            e,
            crate::system::section::parse(raw.system, raw.storage.as_ref(), &raw.shares, &at),
        );
        let device = DeviceRecipe {
            storage: raw.storage,
            shares: raw.shares,
            alerts: raw.alerts,
        };
        errs.extend(
            device
                .problems()
                .iter()
                .map(|p| at.at_path(&p.path, &p.message)),
        );
        // The mirror is made by copying the PC image's own layout, and its
        // switch lives in that image's GRUB configuration.
        if device
            .storage
            .as_ref()
            .is_some_and(|s| s.system_mirror.is_some())
        {
            if model.info().family != crate::board::Family::Uefi {
                errs.push(at.at_path(
                    "storage.system_mirror",
                    &format!("board `{model}` boots from its card or eMMC, and nasforge mirrors the system of a PC only (`model = \"x86-64\"`); leave system_mirror out"),
                ));
            } else if !raw.base.get_ref().is_debian() {
                errs.push(at.at_path(
                    "storage.system_mirror",
                    "the system is mirrored on a PC image nasforge lays out itself, whose boot loader knows the mirror: use `[base] debian = { suite = ..., arch = \"amd64\" }`",
                ));
            }
        }

        if !errs.is_empty() {
            errs.sort_by_key(|e| (e.line, e.col));
            return Err(LocatedErrors(errs));
        }
        // A section is None only when it added errors.
        let board = board.expect("no errors");
        let packages = packages.expect("no errors");
        Ok(Recipe {
            file: file.to_path_buf(),
            text: text.to_string(),
            name: name.expect("no errors"),
            base: base.expect("no errors"),
            board: model,
            pcie_gen: board.pcie_gen,
            overlays: board.overlays,
            boot: boot.expect("no errors"),
            kernel: kernel.expect("no errors"),
            output: output.expect("no errors"),
            storage: device.storage,
            shares: device.shares,
            alerts: device.alerts,
            packages: packages.install,
            mirror: packages.mirror,
            system: system.expect("no errors"),
            installer_binary: installer_binary.expect("no errors"),
        })
    }
}

/// `name`, or the recipe file's stem; it names the output image.
fn name(given: Option<&Spanned<String>>, at: &RecipeText) -> Checked<String> {
    let Some(n) = given else {
        let stem = at.file.file_stem().and_then(|s| s.to_str());
        return Ok(stem.unwrap_or("image").to_string());
    };
    let ok = !n.get_ref().is_empty()
        && n.get_ref()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !n.get_ref().starts_with('.');
    let mut errs = Vec::new();
    if !ok {
        errs.push(
            at.at(
                n.span(),
                format!("name `{}` cannot be used as a file name", n.get_ref()),
            )
            .with_help("use letters, digits, `-`, `_` and `.`"),
        );
    }
    checked(n.get_ref().clone(), errs)
}

/// `[installer] binary`, which must exist when the recipe is read.
fn installer(raw: Option<&InstallerFile>, at: &RecipeText) -> Checked<Option<PathBuf>> {
    let Some(i) = raw else {
        return Ok(None);
    };
    let path = at.dir().join(i.binary.get_ref());
    let mut errs = Vec::new();
    if !path.is_file() {
        errs.push(
            at.at(
                i.binary.span(),
                format!("{} does not exist", path.display()),
            )
            .with_help("paths are relative to the recipe; build one with scripts/build-setup"),
        );
    }
    checked(Some(path), errs)
}

impl Recipe {
    /// What the boot partition should say for this recipe.
    pub fn boot_asked(&self) -> crate::boot::Asked {
        crate::boot::Asked {
            board: self.board,
            pcie_gen: self.pcie_gen,
            overlays: self.overlays.clone(),
            boot: self.boot.clone(),
            usb_quirks: self
                .storage
                .as_ref()
                .map(|s| s.usb_quirks.clone())
                .unwrap_or_default(),
        }
    }

    /// What only a base of this kind refuses (a first user Raspberry Pi
    /// OS's userconf would not create), located like every other error.
    pub fn check_for(&self, vendor: crate::system::Vendor) -> Result<(), LocatedErrors> {
        let at = RecipeText {
            file: &self.file,
            text: &self.text,
        };
        crate::system::section::problems_for(vendor, &self.system, &at).map_err(LocatedErrors)
    }
}

/// toml/serde's error, placed on its line, with a suggestion for a misspelt key.
fn toml_error(file: &Path, text: &str, e: &toml::de::Error) -> Located {
    let message = e.message().trim().to_string();
    let mut located = Located::new(file, text, e.span(), message.clone());
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((word, choices)) = rest.split_once('`')
    {
        let valid: Vec<&str> = choices.split('`').skip(1).step_by(2).collect();
        if let Some(s) = did_you_mean(word, valid.iter().copied()) {
            located = located.with_help(format!("did you mean `{s}`?"));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `")
        && let Some((word, choices)) = rest.split_once('`')
    {
        let valid: Vec<&str> = choices.split('`').skip(1).step_by(2).collect();
        if let Some(s) = did_you_mean(word, valid.iter().copied()) {
            located = located.with_help(format!("did you mean `{s}`?"));
        }
    }
    located
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Recipe, String> {
        Recipe::parse(Path::new("r.toml"), text).map_err(|e| e.to_string())
    }

    const MIN: &str = "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n";

    #[test]
    fn minimal_recipe_gets_defaults() {
        let r = parse(MIN).unwrap();
        assert_eq!(r.name, "r");
        assert_eq!(r.output.path, PathBuf::from("out/r.img"));
        assert!(!r.output.compress);
        assert_eq!(r.base.source, BaseSource::Path(PathBuf::from("x.img")));
    }

    #[test]
    fn unknown_board_names_the_line_and_the_choices() {
        let e = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"pi6\"\n").unwrap_err();
        assert!(
            e.starts_with("r.toml:4:9: unknown variant `pi6`, expected one of `pi4`, `cm4`, `pi5`"),
            "{e}"
        );
        assert!(
            e.contains("did you mean `pi5`?") || e.contains("did you mean `pi4`?"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_suggests_the_right_one() {
        let e = parse(&format!("{MIN}pcie_gne = 3\n")).unwrap_err();
        assert!(e.starts_with("r.toml:5:1: unknown field `pcie_gne`"), "{e}");
        assert!(e.contains("did you mean `pcie_gen`?"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let e = parse(&format!("{MIN}pcie_gen = \"three\"\n")).unwrap_err();
        assert!(
            e.starts_with("r.toml:5:12: invalid type: string \"three\", expected u8"),
            "{e}"
        );
    }

    #[test]
    fn url_without_sha256_is_refused() {
        let e = parse("[base]\nurl = \"https://example.org/a.img.xz\"\n[board]\nmodel = \"pi4\"\n")
            .unwrap_err();
        assert!(
            e.contains("r.toml:2:7: a downloaded base image needs its `sha256`"),
            "{e}"
        );
    }

    #[test]
    fn semantic_errors_are_all_reported_at_once() {
        let text = "[base]\npath = \"x.img\"\nsha256 = \"abc\"\n[board]\nmodel = \"pi4\"\npcie_gen = 3\n[output]\npath = \"a.iso\"\n";
        let e = parse(text).unwrap_err();
        assert!(e.contains("r.toml:3:10: `abc` is not a sha256"), "{e}");
        assert!(
            e.contains("r.toml:6:12: board `pi4` has no configurable PCIe generation"),
            "{e}"
        );
        assert!(
            e.contains("r.toml:8:8: output `a.iso` must end in .img or .img.xz"),
            "{e}"
        );
    }

    #[test]
    fn boot_section_is_for_raspberry_pis_only() {
        let e = parse(
            "[base]\npath = \"x.img\"\n[board]\nmodel = \"rock5b\"\n[boot]\nconfig = [\"a=1\"]\n",
        )
        .unwrap_err();
        assert!(e.contains("r.toml:5:1: `[boot]` edits config.txt"), "{e}");
    }

    #[test]
    fn storage_and_shares_are_checked_with_the_boards_own_rules() {
        let text = format!(
            "{MIN}[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid5\"\ndisks = {{ transport = \"sata\", count = 3 }}\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n[[shares]]\nname = \"data\"\npath = \"/srv/data\"\nsmb = {{ users = [\"admin\"] }}\n[[system.users]]\nname = \"admin\"\npassword = \"pw\"\n"
        );
        let r = parse(&text).unwrap();
        assert_eq!(r.storage.unwrap().arrays[0].name, "data");
        assert_eq!(r.shares.len(), 1);

        let bad = text.replace("level = \"raid5\"", "level = \"raid7\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("r.toml:9:9: unknown variant `raid7`"), "{e}");

        let bad = text.replace("mount = \"/srv/data\"", "mount = \"srv\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.contains("r.toml:12:9: storage.arrays[0].mount:"), "{e}");
    }

    #[test]
    fn kernel_build_defaults_come_from_the_board() {
        use crate::kernel::build::{Defconfig, FragmentRef, KernelSource};
        let r = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"../linux\" }}\n"
        ))
        .unwrap();
        let b = r.kernel.build.unwrap();
        assert_eq!(b.source, KernelSource::Tree(PathBuf::from("../linux")));
        assert_eq!(b.defconfig, Defconfig::Target("bcm2712_defconfig".into()));
        assert_eq!(
            b.fragments,
            ["sata", "md-raid", "nas"]
                .map(|f| FragmentRef::Bundled(f.into()))
                .to_vec()
        );
        let r = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"rock3a\"\n[kernel]\nbuild = { source = \"linux.tar.xz\", defconfig = \"configs/armbian.config\", fragments = [\"sata\", \"mine.config\"] }\n").unwrap();
        let b = r.kernel.build.unwrap();
        assert_eq!(
            b.source,
            KernelSource::Tarball {
                path: PathBuf::from("linux.tar.xz"),
                sha256: None
            }
        );
        assert_eq!(
            b.defconfig,
            Defconfig::File(PathBuf::from("configs/armbian.config"))
        );
        assert_eq!(
            b.fragments[1],
            FragmentRef::File(PathBuf::from("mine.config"))
        );
    }

    #[test]
    fn kernel_build_mistakes_are_located() {
        let text = format!(
            "{MIN}[kernel]\nbuild = {{ source = \"https://github.com/raspberrypi/linux/archive/<commit>.tar.gz\", fragments = [\"sata\", \"md-riad\"], defconfig = \"bcm 2712\" }}\n"
        );
        let e = parse(&text).unwrap_err();
        assert!(e.contains("r.toml:6:20: `https://github.com/raspberrypi/linux/archive/<commit>.tar.gz` still holds a placeholder"), "{e}");
        assert!(
            e.contains("r.toml:6:20: a downloaded kernel source needs its `sha256`"),
            "{e}"
        );
        assert!(
            e.contains("no kernel fragment `md-riad`") && e.contains("did you mean `md-raid`?"),
            "{e}"
        );
        assert!(
            e.contains("`bcm 2712` is neither a defconfig target nor a config file"),
            "{e}"
        );
        let e = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"linux\", sha256 = \"{}\" }}\n",
            "a".repeat(64)
        ))
        .unwrap_err();
        assert!(
            e.contains("`sha256` applies to a source tarball, not a kernel tree"),
            "{e}"
        );
        let e = parse("[base]\npath = \"x.img\"\n[board]\nmodel = \"generic-arm64\"\n[kernel]\nbuild = { source = \"linux\" }\n").unwrap_err();
        assert!(
            e.contains("r.toml:6:9: nasforge cannot install a kernel on board `generic-arm64`"),
            "{e}"
        );
        let e = parse(&format!(
            "{MIN}[kernel]\nbuild = {{ source = \"linux\", colour = 1 }}\n"
        ))
        .unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn rock5b_gets_its_sata_overlay_by_default() {
        let r = parse("[base]\npath = \"x.img.xz\"\n[board]\nmodel = \"rock5b\"\n").unwrap();
        assert_eq!(
            r.overlays,
            vec![vec!["sata1".to_string(), "rock-5b-sata".to_string()]]
        );
    }

    /// Every recipe string that reaches a file, a unit or a command line on
    /// the workstation's side, with a value that would add a line, a field
    /// or a word there. (Shares and storage are checked by the board's own
    /// rules; password hashes by their own test.)
    #[test]
    fn hostile_values_are_refused_where_they_would_break_out() {
        let pi = "[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n";
        let armbian = "[base]\npath = \"x.img\"\n[board]\nmodel = \"rock5b\"\n";
        let user = "[[system.users]]\nname = \"admin\"\npassword = \"pw\"\n";
        let rows: &[(&str, String, &str)] = &[
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"http://127.0.0.1:8765\\nTrusted: yes\"\n"),
                "r.toml:6:10: packages.mirror: `http://127.0.0.1:8765\\nTrusted: yes` holds whitespace or a control character",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"http://m.example/debian [trusted=yes]\"\n"),
                "holds whitespace or a control character",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"ftp://m.example/debian\"\n"),
                "is not an http:, https: or file: URL",
            ),
            (
                "packages.mirror",
                format!("{pi}[packages]\nmirror = \"file://elsewhere/srv/debian\"\n"),
                "is not a file: URL of a path on this machine",
            ),
            (
                "packages.install",
                format!("{pi}[packages]\ninstall = [\"htop\\nevil\"]\n"),
                "`htop\\nevil` is not a Debian package name",
            ),
            (
                "base.url",
                format!("[base]\nurl = \"https://e.example/a.img.xz\\r\\nX: y\"\nsha256 = \"{}\"\n[board]\nmodel = \"pi5\"\n", "a".repeat(64)),
                "holds whitespace or a control character",
            ),
            (
                "base.debian.mirror",
                "[base]\ndebian = { suite = \"trixie\", arch = \"arm64\", mirror = \"http://m.example/debian\\ndeb http://evil.example/ x main\" }\n[board]\nmodel = \"pi5\"\n".into(),
                "`mirror`: `http://m.example/debian\\ndeb http://evil.example/ x main` holds whitespace",
            ),
            (
                "base.debian.packages",
                "[base]\ndebian = { suite = \"trixie\", arch = \"arm64\", packages = [\"htop,evil\"] }\n[board]\nmodel = \"pi5\"\n".into(),
                "`htop,evil` is not a Debian package name",
            ),
            (
                "board.overlays",
                armbian.replace("rock5b\"\n", "rock5b\"\noverlays = [\"sata1\\nrootdev=/dev/sdz1\"]\n"),
                "`sata1\\nrootdev=/dev/sdz1` is not a device-tree overlay name",
            ),
            (
                "board.overlays",
                armbian.replace("rock5b\"\n", "rock5b\"\noverlays = [\"sata1 pcie\"]\n"),
                "is not a device-tree overlay name",
            ),
            (
                "boot.config",
                format!("{pi}[boot]\nconfig = [\"dtparam=audio=off\\r[all]\"]\n"),
                "config line `dtparam=audio=off\\r[all]` must be a single setting",
            ),
            (
                "boot.cmdline_append",
                format!("{pi}[boot]\ncmdline_append = [\"quiet\\u0000\"]\n"),
                "cmdline entry `quiet\\0` must be one word",
            ),
            (
                "boot.cmdline_append",
                format!("{pi}[boot]\ncmdline_append = [\"dyndbg=\\\"\"]\n"),
                "cmdline entry `dyndbg=\\\"` must be one word",
            ),
            (
                "boot.cmdline_remove",
                format!("{pi}[boot]\ncmdline_remove = [\"quiet\\nsplash\"]\n"),
                "must be one word",
            ),
            (
                "kernel.build.source",
                format!("{pi}[kernel]\nbuild = {{ source = \"https://e.example/l.tar.gz\\n\", sha256 = \"{}\" }}\n", "a".repeat(64)),
                "`https://e.example/l.tar.gz\\n` holds whitespace or a control character",
            ),
            (
                "kernel.build.defconfig",
                format!("{pi}[kernel]\nbuild = {{ source = \"../linux\", defconfig = \"bcm2712_defconfig\\nCONFIG_X=y\" }}\n"),
                "is neither a defconfig target nor a config file",
            ),
            (
                "output.path",
                format!("{pi}[output]\npath = \"out/r\\n.img\"\n"),
                "output `out/r\\n.img` holds a control character",
            ),
            (
                "name",
                format!("name = \"r\\nx\"\n{pi}"),
                "cannot be used as a file name",
            ),
            (
                "system.hostname",
                format!("{pi}[system]\nhostname = \"nas\\n10.0.0.1 evil\"\n"),
                "is not a valid host name",
            ),
            (
                "system.timezone",
                format!("{pi}[system]\ntimezone = \"UTC\\n\"\n"),
                "is not a time zone name",
            ),
            (
                "system.updates",
                format!("{pi}[system]\nupdates = \"securty\"\n"),
                "unknown variant `securty`, expected `off` or `security`",
            ),
            (
                "system.updates_reboot",
                format!("{pi}[system]\nupdates = \"security\"\nupdates_reboot = \"4am\"\n"),
                "`4am` is not a time of day: write it as \"04:00\"",
            ),
            (
                "system.updates_reboot without updates",
                format!("{pi}[system]\nupdates_reboot = \"04:00\"\n"),
                "only security updates reboot on their own: add `updates = \"security\"`",
            ),
            (
                "system.updates_mirror",
                format!("{pi}[system]\nupdates = \"security\"\nupdates_mirror = \"deb.example/debian-security\"\n"),
                "is not a URL",
            ),
            (
                "system.updates_mirror without updates",
                format!("{pi}[system]\nupdates_mirror = \"http://mirror.example/debian-security\"\n"),
                "the security archive is for security updates: add `updates = \"security\"`",
            ),
            (
                "system.users.name",
                format!("{pi}{}", user.replace("\"admin\"", "\"admin:x:0:0::/root:/bin/sh\\nm\"")),
                "is not a valid user name",
            ),
            (
                "system.users.ssh_authorized_keys",
                format!("{pi}{user}ssh_authorized_keys = [\"ssh-ed25519 AAAA k\\nssh-rsa AAAA evil\"]\n"),
                "not an SSH public key line",
            ),
        ];
        for (key, text, want) in rows {
            let e = parse(text).expect_err(key);
            assert!(e.contains(want), "{key}: expected `{want}` in:\n{e}");
        }
    }

    #[test]
    fn mirrors_of_every_accepted_kind_pass() {
        for m in [
            "http://127.0.0.1:8765/debian",
            "https://m.example/debian/",
            "file:///srv/mirror/debian",
        ] {
            let r = parse(&format!("{MIN}[packages]\nmirror = \"{m}\"\n")).unwrap();
            assert_eq!(r.mirror.as_deref(), Some(m));
        }
    }

    #[test]
    fn a_base_of_another_architecture_than_the_board_is_refused_at_its_line() {
        let e = parse("[base]\ndebian = { suite = \"bookworm\", arch = \"arm64\" }\n[board]\nmodel = \"x86-64\"\n").unwrap_err();
        assert!(
            e.contains("r.toml:2:10: board `x86-64` runs amd64 programs, but this base is built for `arm64`"),
            "{e}"
        );
        assert!(
            e.contains("set `arch = \"amd64\"` in `[base] debian`"),
            "{e}"
        );
        let e = parse("[base]\ndebian = { suite = \"bookworm\", arch = \"amd64\" }\n[board]\nmodel = \"pi4\"\n").unwrap_err();
        assert!(e.contains("board `pi4` runs arm64 programs"), "{e}");
        parse("[base]\ndebian = { suite = \"bookworm\", arch = \"amd64\" }\n[board]\nmodel = \"x86-64\"\n").unwrap();
    }

    #[test]
    fn a_pc_recipe_may_build_a_zfs_pool() {
        let storage = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"tank\"\nlevel = \"raidz2\"\nfilesystem = \"zfs\"\nmount = \"/srv/tank\"\ndisks = { count = 4 }\n";
        let pc = "[base]\npath = \"x.raw\"\n[board]\nmodel = \"x86-64\"\n";
        let r = parse(&format!("{pc}{storage}")).unwrap();
        assert!(crate::zfs::wanted(&r));
    }

    #[test]
    fn the_system_is_mirrored_on_a_pc_nasforge_lays_out_only() {
        let storage = "[storage]\nmode = \"unattended\"\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\ndisks = { count = 2 }\n[storage.system_mirror]\nmatch = { rotational = false }\n";
        let debian = "[base]\ndebian = { suite = \"bookworm\", arch = \"amd64\" }\n[board]\nmodel = \"x86-64\"\n";
        let r = parse(&format!("{debian}{storage}")).unwrap();
        assert!(r.storage.unwrap().system_mirror.is_some());
        let e = parse(&format!("{MIN}{storage}")).unwrap_err();
        assert!(
            e.contains(
                "r.toml:13:1: storage.system_mirror: board `pi5` boots from its card or eMMC"
            ),
            "{e}"
        );
        let vendor = "[base]\npath = \"x.raw\"\n[board]\nmodel = \"x86-64\"\n";
        let e = parse(&format!("{vendor}{storage}")).unwrap_err();
        assert!(
            e.contains("storage.system_mirror: the system is mirrored on a PC image nasforge lays out itself"),
            "{e}"
        );
    }
}
