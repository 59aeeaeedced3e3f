//! What the image needs to finish itself on first power-on: the
//! `nasforge-firstboot` service and script, the `nasforge-setup` binary for
//! the image's architecture, and the recipe (minus secrets) on the boot
//! partition, where the board reads it and a person can edit it.

use crate::image::ext4::{Ext4, Op};
use anyhow::{Context, Result, bail};
use nasforge_engine::spec::{Alerts, DeviceRecipe, Mode, Share, Storage};
use std::path::{Path, PathBuf};

const UNIT: &str = include_str!("../files/board/nasforge-firstboot.service");
const SCRIPT: &str = include_str!("../files/board/firstboot");
const UNIT_PATH: &str = "/etc/systemd/system/nasforge-firstboot.service";
const WANTS: &str = "/etc/systemd/system/multi-user.target.wants";
/// Finishes a replace or grow a power cut interrupted (`nasforge-setup resume`).
const RESUME_UNIT: &str = include_str!("../files/board/nasforge-resume.service");
const RESUME_UNIT_PATH: &str = "/etc/systemd/system/nasforge-resume.service";
pub use nasforge_engine::image_files::SETUP_BINARY;

/// What the first boot does, written to its settings file
/// (`/var/lib/nasforge/firstboot.env`).
pub struct Settings {
    /// Packages to install from the staged repository (empty: none staged).
    pub packages: Vec<String>,
    /// How storage is set up; None when the recipe has no `[storage]`.
    pub mode: Option<Mode>,
    /// Enable the SSH server once its package is installed.
    pub ssh: bool,
    /// What the recipe named, checked after the vendor's first boot (Raspberry
    /// Pi Imager's customisation may have changed them).
    pub hostname: Option<String>,
    pub users: Vec<String>,
}

/// The service, its script and its settings; the service is enabled by the
/// same symlink `systemctl enable` would make.
pub fn ops(root: &Ext4, settings: &Settings) -> Result<Vec<Op>> {
    let mut ops = root.missing_dirs(&["/var/lib/nasforge", "/usr/lib/nasforge", WANTS])?;
    for p in [
        "/usr/lib/nasforge/firstboot",
        UNIT_PATH,
        "/var/lib/nasforge/firstboot.env",
        "/etc/systemd/system/multi-user.target.wants/nasforge-firstboot.service",
        RESUME_UNIT_PATH,
        "/etc/systemd/system/multi-user.target.wants/nasforge-resume.service",
    ] {
        if root.owner(p)?.is_some() || root.readlink(p)?.is_some() {
            ops.push(Op::Remove { path: p.into() });
        }
    }
    for p in &settings.packages {
        if !p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.:".contains(c))
        {
            bail!("`{p}` is not a Debian package name");
        }
    }
    // Words in a shell variable: the recipe's checks allow nothing else in
    // host and user names.
    for word in settings.users.iter().chain(&settings.hostname) {
        if word.is_empty()
            || !word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            bail!("`{}` is not a host or user name", word.escape_debug());
        }
    }
    let mode = match settings.mode {
        Some(Mode::Unattended) => "unattended",
        Some(Mode::Wizard) => "wizard",
        None => "none",
    };
    let env = format!(
        "# Written by nasforge; read by /usr/lib/nasforge/firstboot.\nNASFORGE_PACKAGES=\"{}\"\nNASFORGE_MODE={mode}\nNASFORGE_SSH={}\nNASFORGE_HOSTNAME={}\nNASFORGE_USERS=\"{}\"\n",
        settings.packages.join(" "),
        if settings.ssh { "yes" } else { "no" },
        settings.hostname.as_deref().unwrap_or(""),
        settings.users.join(" "),
    );
    ops.push(Op::root_file(
        "/usr/lib/nasforge/firstboot",
        SCRIPT.as_bytes().to_vec(),
        0o755,
    ));
    ops.push(Op::root_file(UNIT_PATH, UNIT.as_bytes().to_vec(), 0o644));
    ops.push(Op::root_file(
        "/var/lib/nasforge/firstboot.env",
        env.into_bytes(),
        0o644,
    ));
    ops.push(Op::Symlink {
        path: format!("{WANTS}/nasforge-firstboot.service"),
        target: UNIT_PATH.into(),
    });
    ops.push(Op::root_file(
        RESUME_UNIT_PATH,
        RESUME_UNIT.as_bytes().to_vec(),
        0o644,
    ));
    ops.push(Op::Symlink {
        path: format!("{WANTS}/nasforge-resume.service"),
        target: RESUME_UNIT_PATH.into(),
    });
    Ok(ops)
}

/// ELF machine numbers of the dpkg architectures nasforge builds for.
fn elf_machine(arch: &str) -> Option<u16> {
    Some(match arch {
        "arm64" => 183,
        "armhf" | "armel" => 40,
        "amd64" => 62,
        "riscv64" => 243,
        _ => return None,
    })
}

fn machine_name(m: u16) -> &'static str {
    match m {
        183 => "arm64 (aarch64)",
        40 => "32-bit ARM",
        62 => "x86-64",
        243 => "RISC-V",
        _ => "another architecture",
    }
}

/// Refuses a setup binary that would not run on the image.
pub fn check_binary(path: &Path, arch: &str) -> Result<()> {
    let mut head = [0u8; 20];
    let mut f = std::fs::File::open(path)
        .with_context(|| format!("opening the nasforge-setup binary {}", path.display()))?;
    std::io::Read::read_exact(&mut f, &mut head)
        .with_context(|| format!("{} is too short to be a program", path.display()))?;
    if &head[..4] != b"\x7fELF" {
        bail!("{} is not a Linux program (no ELF header)", path.display());
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    let want = elf_machine(arch)
        .with_context(|| format!("nasforge cannot tell which programs run on a `{arch}` image"))?;
    if machine != want {
        bail!(
            "{} is built for {}, but the image is {arch}: build it with scripts/build-setup (or set `[installer] binary` to an {arch} build)",
            path.display(),
            machine_name(machine)
        );
    }
    Ok(())
}

/// Where the builder finds nasforge-setup for `arch` when the recipe names
/// none: the workspace's cross build, made on demand by scripts/build-setup.
pub fn default_binary(arch: &str) -> Result<PathBuf> {
    let triple = match arch {
        "arm64" => "aarch64-unknown-linux-gnu",
        "amd64" => "x86_64-unknown-linux-gnu",
        other => bail!(
            "nasforge builds nasforge-setup only for arm64 and amd64; for a `{other}` image set `[installer] binary`"
        ),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let binary = workspace.join(format!("target/{triple}/board/nasforge-setup"));
    let script = workspace.join("scripts/build-setup");
    if !script.is_file() {
        if binary.is_file() {
            return Ok(binary);
        }
        bail!(
            "no nasforge-setup for {arch}: set `[installer] binary` in the recipe (this nasforge was installed without its source tree)"
        );
    }
    // cargo decides whether anything changed; a current build costs a second.
    let status = std::process::Command::new(&script)
        .arg(triple)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() || !binary.is_file() {
        bail!(
            "{} failed; run it by hand to see why, or set `[installer] binary`",
            script.display()
        );
    }
    Ok(binary)
}

/// The part of the recipe the board reads, `[storage]`, `[[shares]]` and
/// `[alerts]` (without the SMTP password, which goes to a root-only file),
/// for nasforge-setup and for a person to read or change before first boot.
/// Written from the parsed values, never cut from the recipe's text: the
/// text's comments (`# old password: ...`) would be published on the FAT
/// partition with it, and only these sections' known keys can travel.
pub fn board_recipe(
    storage: Option<&Storage>,
    shares: &[Share],
    alerts: Option<&Alerts>,
) -> Result<String> {
    let device = DeviceRecipe {
        storage: storage.cloned(),
        shares: shares.to_vec(),
        alerts: alerts.map(Alerts::without_password),
    };
    let text = format!(
        "{BOARD_RECIPE_HEADER}\n{}",
        toml::to_string(&device).context("writing the recipe copy for the board")?
    );
    // The board must build what was checked here, not a near copy.
    match DeviceRecipe::parse(&text, Path::new(BOARD_RECIPE)) {
        Ok(back) if back == device => Ok(text),
        Ok(_) => bail!("internal: the recipe copy for the board reads back differently"),
        Err(e) => bail!("internal: the recipe copy for the board does not read back: {e}"),
    }
}

const BOARD_RECIPE: &str = "nasforge.toml";
const BOARD_RECIPE_HEADER: &str = "\
# Written by nasforge from the [storage], [[shares]] and [alerts] of the
# recipe this image was built from. nasforge-setup builds it at first boot;
# edit it before then to change what it builds (see docs/recipe.md).
";

#[cfg(test)]
mod tests {
    use super::*;

    fn board_copy(text: &str) -> (String, DeviceRecipe) {
        let recipe = crate::recipe::Recipe::parse(Path::new("r.toml"), text).unwrap();
        let copy = board_recipe(
            recipe.storage.as_ref(),
            &recipe.shares,
            recipe.alerts.as_ref(),
        )
        .unwrap();
        let parsed = DeviceRecipe {
            storage: recipe.storage,
            shares: recipe.shares,
            alerts: recipe.alerts.map(|a| a.without_password()),
        };
        (copy, parsed)
    }

    #[test]
    fn only_parsed_storage_and_shares_travel_never_comments() {
        let storage = "# old password: hunter2\n[storage]\nmode = \"unattended\" # pin 4711 hunter2\n\n[[storage.arrays]]\nname = \"data\" # hunter2\nlevel = \"raid1\"\ndisks = { count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n# password = \"hunter2\"\n\n[[shares]]\nname = \"data\"\npath = \"/srv/data\"\nsmb = { users = [\"admin\"] }\n[alerts]\nemail = \"me@example.com\"\n[alerts.smtp]\nhost = \"smtp.example.com\"\nuser = \"me@example.com\"\npassword = \"hunter2\"\n";
        for system in [
            "[system]\nhostname = \"pinas\"\n[[system.users]]\nname = \"admin\"\npassword = \"hunter2\"\n",
            "[system]\nusers = [{ name = \"admin\", password = \"hunter2\" }]\n",
            "system = { users = [{ name = \"admin\", password = \"hunter2\" }] }\n",
        ] {
            let text =
                format!("{system}[base]\npath = \"x.img\"\n[board]\nmodel = \"pi5\"\n{storage}");
            let (copy, parsed) = board_copy(&text);
            assert!(
                !copy.contains("hunter2")
                    && !copy.contains("4711")
                    && !copy.contains("password")
                    && !copy.contains("[system]")
                    && !copy.contains("[base]"),
                "{copy}"
            );
            assert!(copy.starts_with(BOARD_RECIPE_HEADER), "{copy}");
            assert!(
                copy.contains("[alerts.smtp]") && copy.contains("user = \"me@example.com\""),
                "the relay travels, its password does not: {copy}"
            );
            let comments = copy.lines().filter(|l| l.contains('#')).count();
            assert_eq!(comments, BOARD_RECIPE_HEADER.lines().count(), "{copy}");
            let back = DeviceRecipe::parse(&copy, Path::new("nasforge.toml")).unwrap();
            assert_eq!(back, parsed);
        }
    }

    #[test]
    fn every_bundled_recipe_reaches_the_board_as_it_was_checked() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let (copy, parsed) = board_copy(&text);
            assert!(parsed.storage.is_some(), "{}", path.display());
            let back = DeviceRecipe::parse(&copy, Path::new("nasforge.toml"))
                .unwrap_or_else(|e| panic!("{}: {e}\n{copy}", path.display()));
            assert_eq!(back, parsed, "{}", path.display());
            assert!(!copy.contains("password"), "{copy}");
            seen += 1;
        }
        assert!(seen >= 4, "{seen} recipes in {}", dir.display());
    }

    /// The resume unit runs the installed binary only while an operation
    /// is unfinished.
    #[test]
    fn the_resume_unit_runs_resume_while_an_operation_is_pending() {
        assert!(RESUME_UNIT.contains(&format!("ExecStart={SETUP_BINARY} resume\n")));
        assert!(RESUME_UNIT.contains(&format!(
            "ConditionPathExists={}\n",
            nasforge_engine::operation::PATH
        )));
        assert!(RESUME_UNIT.contains("WantedBy=multi-user.target\n"));
    }

    #[test]
    fn binaries_for_the_wrong_architecture_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let host = std::env::current_exe().unwrap();
        let e = check_binary(&host, "arm64").unwrap_err().to_string();
        assert!(
            e.contains("is built for x86-64, but the image is arm64"),
            "{e}"
        );
        check_binary(&host, "amd64").unwrap();
        let text = dir.path().join("script");
        std::fs::write(&text, "#!/bin/sh\necho hello there, friend\n").unwrap();
        assert!(
            check_binary(&text, "arm64")
                .unwrap_err()
                .to_string()
                .contains("not a Linux program")
        );
    }
}
