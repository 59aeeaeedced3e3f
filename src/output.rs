//! Writing results: the image (raw or xz), its `.sha256` in sha256sum format
//! and the JSON manifest. Everything is written under a temporary name in the
//! output directory and renamed into place only once all of it succeeded, so
//! a failed build never leaves a half-written image that looks finished.
//! The recipe's `[output]` section, which says where and how, is read here too.

use crate::io::writeback::Writeback;
use crate::io::{hash, progress};
use crate::section::{Checked, RecipeText, checked};
use crate::size::Size;
use anyhow::{Context, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tempfile::NamedTempFile;
use toml::Spanned;

/// `[output]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFile {
    path: Option<Spanned<String>>,
    grow: Option<Size>,
    xz_level: Option<Spanned<u32>>,
}

/// `[output]`: where the image goes and how it is packed.
#[derive(Debug, Clone)]
pub struct Output {
    /// Relative to the working directory, like any output a command writes.
    pub path: PathBuf,
    pub compress: bool,
    pub grow: Option<u64>,
    pub xz_level: u32,
}

const DEFAULT_XZ_LEVEL: u32 = 6;

/// `[output]`, by default `out/<name>.img`.
pub fn parse(raw: &OutputFile, name: &str, at: &RecipeText) -> Checked<Output> {
    let mut errs = Vec::new();
    let path = match &raw.path {
        Some(p) => {
            let s = p.get_ref();
            if !(s.ends_with(".img") || s.ends_with(".img.xz")) {
                errs.push(at.at(
                    p.span(),
                    format!("output `{}` must end in .img or .img.xz", s.escape_debug()),
                ));
            }
            // The name is written into the `.sha256` file beside it, one line.
            if s.contains(char::is_control) {
                errs.push(
                    at.at(
                        p.span(),
                        format!("output `{}` holds a control character", s.escape_debug()),
                    )
                    .with_help("use a plain file name"),
                );
            }
            PathBuf::from(s)
        }
        None => PathBuf::from(format!("out/{name}.img")),
    };
    let xz_level = match &raw.xz_level {
        Some(l) if *l.get_ref() > 9 => {
            errs.push(
                at.at(
                    l.span(),
                    format!("xz level {} is out of range", l.get_ref()),
                )
                .with_help("use 0 (fastest) to 9 (smallest)"),
            );
            DEFAULT_XZ_LEVEL
        }
        Some(l) => *l.get_ref(),
        None => DEFAULT_XZ_LEVEL,
    };
    let output = Output {
        compress: path.to_string_lossy().ends_with(".xz"),
        path,
        grow: raw.grow.as_ref().map(|s| s.0),
        xz_level,
    };
    checked(output, errs)
}

/// Paths of everything a build writes for `image` (e.g. `out/x.img.xz`).
#[derive(Debug, Clone)]
pub struct Paths {
    pub image: PathBuf,
    pub sha256: PathBuf,
    pub manifest: PathBuf,
}

impl Paths {
    pub fn for_image(image: &Path) -> Paths {
        let name = image
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("image");
        let stem = name.strip_suffix(".xz").unwrap_or(name);
        let stem = stem.strip_suffix(".img").unwrap_or(stem);
        let dir = image.parent().unwrap_or(Path::new("."));
        Paths {
            image: image.to_path_buf(),
            sha256: dir.join(format!("{name}.sha256")),
            manifest: dir.join(format!("{stem}.manifest.json")),
        }
    }

    pub fn dir(&self) -> &Path {
        self.image
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }
}

/// Temporary files not yet renamed into place. Dropping a NamedTempFile
/// deletes it, but Ctrl-C skips destructors: `remove_unfinished` is called
/// from the signal handler instead.
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Deletes every temporary output file; for an interrupted build, which
/// exits right after. The list stays locked from here on, so a file the
/// build was about to start is never created behind the handler's back.
pub fn remove_unfinished() {
    let Ok(mut paths) = UNFINISHED.lock() else {
        return;
    };
    for p in paths.drain(..) {
        let _ = fs::remove_file(p);
    }
    std::mem::forget(paths);
}

fn persist(file: NamedTempFile, to: &Path) -> Result<File> {
    if let Ok(mut v) = UNFINISHED.lock() {
        v.retain(|p| p != file.path());
    }
    file.persist(to)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", to.display()))
}

/// A temporary file beside the final output (same filesystem, so the final
/// rename is atomic); deleted automatically unless persisted.
pub fn temp_beside(paths: &Paths, what: &str) -> Result<NamedTempFile> {
    let dir = paths.dir();
    fs::create_dir_all(dir)
        .with_context(|| format!("creating output directory {}", dir.display()))?;
    let name = paths
        .image
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("image");
    // The name is listed before the file exists: a Ctrl-C between creating
    // and listing it would otherwise leave it behind.
    tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(&format!(".{what}"))
        .make_in(dir, |path| {
            UNFINISHED
                .lock()
                .map_err(|_| io::Error::other("interrupted"))?
                .push(path.to_path_buf());
            use std::os::unix::fs::OpenOptionsExt;
            File::options()
                .mode(0o600)
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
        })
        .with_context(|| format!("creating a temporary file in {}", dir.display()))
}

/// Digests of what `finish_image` wrote.
pub struct Written {
    /// sha256 of the output file itself.
    pub file_sha256: String,
    /// sha256 of the raw image.
    pub image_sha256: String,
    pub image_size: u64,
    /// The finished output, still under its temporary name.
    pub file: NamedTempFile,
}

/// Produces the output file from the finished working image: the working
/// file itself for .img, a multi-threaded xz of it for .img.xz.
/// The digest is taken of the finished file, once every change is in it:
/// whatever wrote to the image, the published sha256 describes the bytes
/// that are published.
pub fn finish_image(
    work: NamedTempFile,
    paths: &Paths,
    compress: bool,
    xz_level: u32,
) -> Result<Written> {
    let size = work.as_file().metadata()?.len();
    if !compress {
        // The flush to disk and the digest both only read the finished
        // file: the second core hashes while the first waits on the disk.
        let bar = progress::bytes(size, "sha256");
        let (synced, digest) = std::thread::scope(|s| {
            let sync = s.spawn(|| work.as_file().sync_all());
            let digest = hash::hash_file(work.as_file(), |n| bar.inc(n));
            (
                sync.join().expect("the fsync thread does not panic"),
                digest,
            )
        });
        synced.context("writing the image to disk")?;
        let digest = digest?;
        bar.finish_and_clear();
        return Ok(Written {
            file_sha256: digest.clone(),
            image_sha256: digest,
            image_size: size,
            file: work,
        });
    }
    let out = temp_beside(paths, "partial")?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let stream = liblzma::stream::MtStreamBuilder::new()
        .threads(threads)
        .preset(xz_level)
        .check(liblzma::stream::Check::Crc64)
        .encoder()
        .context("starting the xz encoder")?;
    let mut file_hash = HashWriter {
        inner: out.as_file(),
        hasher: Sha256::new(),
        writeback: Writeback::new(out.as_file()),
        written: 0,
    };
    let mut encoder = liblzma::write::XzEncoder::new_stream(&mut file_hash, stream);
    let mut raw_hash = Sha256::new();
    let bar = progress::bytes(size, "compress");
    let mut src = File::open(work.path())?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            break;
        }
        raw_hash.update(&buf[..n]);
        encoder
            .write_all(&buf[..n])
            .context("compressing the image (disk full?)")?;
        bar.inc(n as u64);
    }
    encoder.finish().context("finishing the xz stream")?;
    bar.finish_and_clear();
    let file_sha256 = hash::hex(&file_hash.hasher.finalize());
    out.as_file().sync_all()?;
    Ok(Written {
        file_sha256,
        image_sha256: hash::hex(&raw_hash.finalize()),
        image_size: size,
        file: out,
    })
}

/// The compressed file on its way to the disk: hashed, and handed to the
/// disk in pieces as it grows.
struct HashWriter<W> {
    inner: W,
    hasher: Sha256,
    writeback: Writeback,
    written: u64,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        self.writeback.reached(self.written);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn image_name(paths: &Paths) -> &str {
    paths
        .image
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("image")
}

/// Whether the manifest beside `paths.image` is one nasforge wrote for a
/// file of this name: then the image, .sha256 and manifest there are a
/// previous build's, and a new build may replace them. The manifest is the
/// mark because it is the one file of the three only nasforge writes; its
/// `output.path` names the image it describes.
fn previous_output(paths: &Paths) -> bool {
    let Ok(text) = fs::read_to_string(&paths.manifest) else {
        return false;
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    let named = json["output"]["path"]
        .as_str()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str());
    json["nasforge"].is_string() && named == Some(image_name(paths))
}

/// Refuses to overwrite files that are not a previous nasforge output of
/// the same name (the output path may point anywhere), unless `force`.
pub fn check_replaceable(paths: &Paths, force: bool) -> Result<()> {
    if force || previous_output(paths) {
        return Ok(());
    }
    for p in [&paths.image, &paths.sha256, &paths.manifest] {
        if fs::symlink_metadata(p).is_ok() {
            anyhow::bail!(
                "{} already exists and is not the output of an earlier nasforge build (whose manifest, {}, would name it); \
                 move it away, write the output elsewhere (`[output] path` or -o), or pass --force to replace it",
                p.display(),
                paths.manifest.display()
            );
        }
    }
    Ok(())
}

/// Moves the image, its .sha256 and the manifest into place. Old outputs of
/// the same name go first, so no new file ever sits beside a stale one.
/// An image holding a `secret` is made readable by its owner only.
pub fn publish(
    written: Written,
    paths: &Paths,
    manifest_json: &str,
    secret: bool,
    force: bool,
) -> Result<()> {
    check_replaceable(paths, force)?;
    let name = image_name(paths);
    let mut sha = temp_beside(paths, "sha256")?;
    writeln!(sha, "{}  {name}", written.file_sha256)?;
    let mut man = temp_beside(paths, "manifest")?;
    man.write_all(manifest_json.as_bytes())?;
    man.write_all(b"\n")?;
    for p in [&paths.sha256, &paths.manifest, &paths.image] {
        match fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("removing the previous {}", p.display()));
            }
        }
    }
    let image = persist(written.file, &paths.image)?;
    // The temporary files are created 0600; an image is an ordinary file to share,
    // unless it holds password equivalents. The digest and the manifest
    // never hold one.
    use std::os::unix::fs::PermissionsExt;
    let image_mode = if secret { 0o600 } else { 0o644 };
    image.set_permissions(fs::Permissions::from_mode(image_mode))?;
    for f in [sha.as_file(), man.as_file()] {
        f.set_permissions(fs::Permissions::from_mode(0o644))?;
    }
    persist(sha, &paths.sha256)?;
    persist(man, &paths.manifest)?;
    Ok(())
}
