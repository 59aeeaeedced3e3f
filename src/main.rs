use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nasforge::recipe::{Recipe, Source};
use std::path::PathBuf;
use std::process::ExitCode;

/// Turn a stock Raspberry Pi OS / Armbian image into a NAS image.
///
/// A recipe (TOML, see docs/recipe.md) names the base image, the board and
/// what to change; `build` writes a customised image plus its .sha256 and a
/// JSON manifest of every change. Nothing is mounted and root is not needed.
#[derive(Parser)]
#[command(name = "nasforge", version, after_help = "Examples:\n  nasforge check recipes/pi5-penta-sata-raid5.toml\n  nasforge build recipes/pi5-penta-sata-raid5.toml\n  nasforge inspect out/pi5-penta-sata-raid5.img --json")]
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
    /// Validate a recipe without building: syntax, keys, values, and that a
    /// local base image exists. Errors name the file, line and column.
    Check {
        recipe: PathBuf,
    },
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
        Command::Check { recipe } => {
            let r = Recipe::load(&recipe)?;
            if let Source::Path(p) = &r.base.source {
                if !p.is_file() {
                    anyhow::bail!("{}: base image {} does not exist (paths are relative to the recipe)", recipe.display(), p.display());
                }
            }
            println!("{}: ok — {} for {}, output {}", recipe.display(), r.name, r.board.info().description, r.output.path.display());
            Ok(())
        }
        Command::Build { recipe, output, timings } => {
            let r = Recipe::load(&recipe)?;
            let opts = nasforge::build::Options { cache: cache(cli.cache)?, output };
            let report = nasforge::build::build(&r, &opts)?;
            if timings {
                for (phase, d) in &report.timings {
                    eprintln!("{phase:>14}  {:.2}s", d.as_secs_f64());
                }
            }
            Ok(())
        }
        Command::Inspect { image, json } => {
            let mut f = std::fs::File::open(&image).with_context(|| format!("opening {}", image.display()))?;
            let format = nasforge::io::decompress::Format::sniff(&mut f)?;
            // Compressed images are unpacked to a temporary sparse file first.
            let tmp;
            let path = if format == nasforge::io::decompress::Format::Raw {
                image.clone()
            } else {
                tmp = tempfile::NamedTempFile::new().context("creating a temporary file to unpack the image")?;
                nasforge::io::unpack(&image, tmp.as_file(), None)?;
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
    }
}
