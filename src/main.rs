use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use nasforge::recipe::{BaseSource, Recipe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Turn a stock Raspberry Pi OS / Armbian image into a NAS image.
///
/// A recipe (TOML, see docs/recipe.md) names the base image, the board and
/// what to change; `build` writes a customised image plus its .sha256 and a
/// JSON manifest of every change. Nothing is mounted and root is not needed.
#[derive(Parser)]
#[command(
    name = "nasforge",
    version,
    after_help = "Examples:\n  nasforge check recipes/pi5-penta-sata-raid5.toml\n  nasforge build recipes/pi5-penta-sata-raid5.toml\n  nasforge inspect out/pi5-penta-sata-raid5.img --json"
)]
struct Cli {
    /// Where downloads are cached, keyed by sha256 [default: $NASFORGE_CACHE,
    /// $XDG_CACHE_HOME/nasforge or ~/.cache/nasforge]
    #[arg(long, global = true, value_name = "DIR")]
    cache: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a recipe without building: syntax, keys, values, that a
    /// local base image exists, and that the board boots a base already on
    /// this machine (a local image, or a Debian base `build` made before).
    /// Errors name the file, line and column.
    Check { recipe: PathBuf },
    /// Build the image a recipe describes.
    ///
    /// Fetches (or reads) and verifies the base image, checks the kernel the
    /// board will boot, applies boot settings, and writes the image (raw or
    /// .img.xz), IMAGE.sha256 and NAME.manifest.json. Output appears only
    /// when everything succeeded.
    Build {
        recipe: PathBuf,
        /// Write here instead of the recipe's `[output] path` (.img or .img.xz)
        #[arg(short, long, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Print how long each phase took
        #[arg(long)]
        timings: bool,
        /// Ask the package mirrors for new lists even when the cached ones are
        /// less than a day old
        #[arg(long)]
        refresh: bool,
        /// Replace files at the output path even when no earlier nasforge
        /// build wrote them (without it, only a previous output of the same
        /// name, recognised by its manifest, is replaced)
        #[arg(long)]
        force: bool,
    },
    /// Describe an image: partitions, OS, kernels and what they can do, the
    /// kernel each board boots, and the PCIe / overlay settings in effect.
    /// Accepts .img, .img.xz and .img.gz.
    Inspect {
        image: PathBuf,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Boot an image on an emulated board or PC, to try the NAS before flashing.
    ///
    /// Software emulation (TCG). SSH, SMB and NFS are forwarded to free ports
    /// on 127.0.0.1, printed at start. The machine writes to a copy-on-write
    /// overlay in the work directory, so the image stays as built; the
    /// overlay and the blank disks persist between runs (a reboot keeps its
    /// arrays) until the image is rebuilt or --fresh is given.
    ///
    /// A Pi or Rock image boots on qemu's arm64 `virt` machine with an
    /// ich9-ahci controller whose disks the guest sees as sdX, as it would a
    /// JMB585 or ASM1166 card (up to 6 SATA disks). The Raspberry Pi firmware
    /// cannot be emulated: the kernel and initramfs are taken from the image's
    /// root filesystem (an image built with `[base] debian`). A Raspberry Pi OS
    /// or Armbian image, whose kernels run only on their boards, boots its own
    /// userland on a stand-in: Debian's arm64 kernel of the release the image
    /// is built on (from nasforge's Debian base of it, built once and cached),
    /// its modules on a disk of their own; the first lines say what differs
    /// from the board. The image is never changed.
    ///
    /// An image with a PC's EFI boot loader (board "x86-64") boots on qemu's
    /// q35 PC with UEFI firmware (Debian's ovmf), its own GRUB and kernel; its
    /// data disks hang off up to four AHCI controllers, up to 24 SATA disks.
    #[command(
        after_help = "Examples:\n  nasforge emulate out/pi4-debian-raid5.img --disks 4x2G\n  nasforge emulate out/nas.img --disk old-data.img --disks 3x1G\n  nasforge emulate out/x86-15-drive-raid6.img --disks 15x2G\n  nasforge emulate out/x86-15-drive-raidz2.img --sas-disks 15x2G"
    )]
    Emulate(Box<nasforge::emulate::Options>),
    /// Cause a fault on a machine `nasforge emulate --qmp PATH` runs.
    ///
    /// Rehearses what goes wrong while the NAS is busy: a USB disk pulled
    /// out at once (as a USB bridge resetting under UAS, a cable knocked
    /// out) and put back, and the power cut. Disks are named by the serial
    /// `emulate` printed. Only USB disks can be pulled out: qemu's SATA,
    /// SAS and NVMe controllers take no hot-unplug.
    #[command(
        after_help = "Examples:\n  nasforge emulate out/nas.img --disks 3x2G --usb-disk usbA.img --usb-disk usbB.img --qmp /tmp/nas.qmp\n  nasforge fault /tmp/nas.qmp disks\n  nasforge fault /tmp/nas.qmp unplug usbB\n  nasforge fault /tmp/nas.qmp plug usbB\n  nasforge fault /tmp/nas.qmp power-cut"
    )]
    Fault(nasforge::emulate::fault::Options),
    /// Kernels: build the one a recipe's `[kernel] build` describes.
    Kernel {
        #[command(subcommand)]
        command: KernelCommand,
    },
    /// Write an image to an SD card, eMMC or USB disk, then read it back.
    ///
    /// Accepts .img, .img.xz and .img.gz, streamed. Only the blocks that hold
    /// data are sent; the image's zero ranges are zeroed by the target itself
    /// where it can (loop devices, NVMe, files) and written otherwise. The
    /// first MiB (the partition table) is written last, after everything
    /// else is on the disk, and the target's last MiB is zeroed so no stale
    /// backup GPT survives. Every written range is then read back, past the
    /// page cache, and compared with the image.
    ///
    /// The target must be named, and is opened once, exclusively (O_EXCL: the
    /// kernel answers EBUSY while the disk or a partition of it is mounted,
    /// swap, part of md/dm or open exclusively elsewhere, and nothing can
    /// mount it while nasforge has it). Every check reads that open device:
    /// the disk holding `/`, a partition, a read-only card, an internal
    /// (non-removable SATA, NVMe, SAS/SCSI or virtio) disk without --force, and disks larger
    /// than --max-size are refused. The question shows the model, serial,
    /// size and contents and expires after 5 minutes; after `yes`, the
    /// device is read again, and if its size, model, serial or first and
    /// last bytes changed (a card swapped at the prompt), nothing is
    /// written. A regular file is written like `dd` would.
    #[command(
        after_help = "Examples:\n  nasforge flash --list\n  nasforge flash out/pinas.img.xz /dev/sdX\n  nasforge flash out/pinas.img /dev/mmcblk0 --yes      (scripts: no question)\n  nasforge flash out/pinas.img.xz copy.img             (dd-style, to a file)"
    )]
    Flash(nasforge::flash::Options),
    /// Print a shell's completions for nasforge.
    #[command(
        after_help = "Examples:\n  nasforge completions bash > ~/.local/share/bash-completion/completions/nasforge\n  nasforge completions zsh > ~/.zfunc/_nasforge\n  nasforge completions fish > ~/.config/fish/completions/nasforge.fish"
    )]
    Completions { shell: clap_complete::Shell },
    /// Print nasforge's manual page (roff), its commands and options.
    #[command(
        after_help = "Examples:\n  nasforge man | man -l -\n  nasforge man > ~/.local/share/man/man1/nasforge.1"
    )]
    Man,
}

#[derive(Subcommand)]
enum KernelCommand {
    /// Build only the kernel of a recipe's `[kernel] build` (cross-compiled
    /// for arm64, cached by source, defconfig and fragments), check its
    /// `.config` and report what it can do. `nasforge build` installs it.
    #[command(after_help = "Example:\n  nasforge kernel build recipes/cm4-marvell9215-raid10.toml")]
    Build {
        recipe: PathBuf,
        /// Stop after configuring: merge the fragments, run olddefconfig and
        /// report any option Kconfig dropped, without compiling
        #[arg(long)]
        config_only: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // An interrupted build must not leave half-written files beside its output.
    let _ = ctrlc::set_handler(|| {
        nasforge::output::remove_unfinished();
        eprintln!("\ninterrupted: no output was written");
        std::process::exit(130);
    });
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn cache(cli_cache: Option<PathBuf>) -> Result<PathBuf> {
    match cli_cache {
        Some(c) => Ok(c),
        None => nasforge::fetch::cache_dir(),
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Check { recipe } => check(&recipe, &cache(cli.cache)?),
        Command::Build {
            recipe,
            output,
            timings,
            refresh,
            force,
        } => {
            let r = Recipe::load(&recipe)?;
            let opts = nasforge::build::Options {
                cache: cache(cli.cache)?,
                output,
                refresh,
                force,
            };
            build(&r, &opts, timings)
        }
        Command::Inspect { image, json } => inspect(&image, json),
        Command::Emulate(opts) => emulate(&opts, &cache(cli.cache)?),
        Command::Fault(opts) => {
            println!("{}", nasforge::emulate::fault::run(&opts)?);
            Ok(())
        }
        Command::Kernel {
            command:
                KernelCommand::Build {
                    recipe,
                    config_only,
                },
        } => {
            let r = Recipe::load(&recipe)?;
            print!(
                "{}",
                nasforge::cli::kernel::build(&r, &cache(cli.cache)?, config_only)?
            );
            Ok(())
        }
        Command::Flash(opts) => flash(&opts),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "nasforge",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Man => Ok(clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?),
    }
}

fn check(recipe: &Path, cache: &Path) -> Result<()> {
    let r = Recipe::load(recipe)?;
    let vendor = match &r.base.source {
        BaseSource::Path(p) if !p.is_file() => anyhow::bail!(
            "{}: base image {} does not exist (paths are relative to the recipe)",
            recipe.display(),
            p.display()
        ),
        BaseSource::Path(p) => {
            if let Some(image) = raw_image(p)? {
                nasforge::build::check_boots(&image, &r)?;
            }
            nasforge::system::Vendor::of_image(p)?
        }
        BaseSource::Url(u) => nasforge::system::Vendor::from_url(u),
        BaseSource::Debian(d) => {
            // Built once per machine by `build`; until then (or where no
            // Debian mirror is known yet) its kernel is judged there.
            if let Some(base) = d.cached(cache).ok().flatten() {
                nasforge::build::check_boots(&nasforge::image::Image::open(&base)?, &r)?;
            }
            Default::default()
        }
    };
    r.check_for(vendor)?;
    println!(
        "{}: ok — {} for {}, output {}",
        recipe.display(),
        r.name,
        r.board.info().description,
        r.output.path.display()
    );
    Ok(())
}

/// A local base image `check` can read as it is: compressed ones, and what
/// holds no partition table, are judged at build time, where they are
/// unpacked and read anyway.
fn raw_image(path: &Path) -> Result<Option<nasforge::image::Image>> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    if nasforge::io::decompress::Format::sniff(&mut f)? != nasforge::io::decompress::Format::Raw {
        return Ok(None);
    }
    Ok(nasforge::image::Image::open(path).ok())
}

fn build(recipe: &Recipe, opts: &nasforge::build::Options, timings: bool) -> Result<()> {
    let report = nasforge::build::build(recipe, opts)?;
    if timings {
        for (phase, d) in &report.timings {
            eprintln!("{phase:>14}  {:.2}s", d.as_secs_f64());
        }
    }
    Ok(())
}

fn inspect(image: &Path, json: bool) -> Result<()> {
    let mut f =
        std::fs::File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let format = nasforge::io::decompress::Format::sniff(&mut f)?;
    // Compressed images are unpacked to a temporary sparse file first.
    let tmp;
    let path = if format == nasforge::io::decompress::Format::Raw {
        image.to_path_buf()
    } else {
        tmp = tempfile::NamedTempFile::new()
            .context("creating a temporary file to unpack the image")?;
        nasforge::io::unpack(image, tmp.as_file(), None)?;
        tmp.path().to_path_buf()
    };
    let mut report = nasforge::inspect::inspect(&path)?;
    report.path = image.display().to_string();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

fn emulate(opts: &nasforge::emulate::Options, cache: &std::path::Path) -> Result<()> {
    let status = nasforge::emulate::run(opts, cache)?;
    if !status.success() {
        anyhow::bail!("qemu exited with {status}");
    }
    Ok(())
}

fn flash(opts: &nasforge::flash::Options) -> Result<()> {
    if opts.list {
        print!("{}", nasforge::flash::list(opts));
    } else if let Some(summary) = nasforge::flash::flash(opts)? {
        print!("{}", summary.render());
    }
    Ok(())
}
