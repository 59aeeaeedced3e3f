//! Downloads into a cache keyed by sha256: `downloads/<sha256>/<file name>`.
//! A file appears there only after its hash matched; an interrupted download
//! waits in `downloads/partial/` and is resumed with an HTTP Range request,
//! the next attempt or the next run. A `file:` URL (a local mirror) is
//! copied in and checked the same way.

use crate::io::hash;
use crate::io::progress;
use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Attempts per download; each resumes where the last one stopped.
const ATTEMPTS: u32 = 5;

/// `$NASFORGE_CACHE`, else `$XDG_CACHE_HOME/nasforge`, else `~/.cache/nasforge`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("NASFORGE_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("nasforge"));
    }
    let home = std::env::var_os("HOME")
        .context("cannot find a cache directory: set NASFORGE_CACHE or HOME")?;
    Ok(PathBuf::from(home).join(".cache/nasforge"))
}

fn file_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let name = path.rsplit('/').next().unwrap_or("");
    if name.is_empty() || name == "." || name == ".." {
        "download".into()
    } else {
        name.to_string()
    }
}

/// Where a verified download of `url` with this sha256 lives.
pub fn cached_path(cache: &Path, url: &str, sha256: &str) -> PathBuf {
    cache.join("downloads").join(sha256).join(file_name(url))
}

/// Returns the path of a verified copy of `url`, downloading it if needed.
pub fn fetch(url: &str, sha256: &str, cache: &Path) -> Result<PathBuf> {
    let target = cached_path(cache, url, sha256);
    if target.is_file() {
        return Ok(target);
    }
    let partial_dir = cache.join("downloads/partial");
    fs::create_dir_all(&partial_dir)
        .with_context(|| format!("creating cache directory {}", partial_dir.display()))?;
    let partial = partial_dir.join(format!("{sha256}.part"));
    let got = if url.starts_with("file:") {
        copy_local(url, &partial)?
    } else {
        download(url, &partial)?
    };
    if got != sha256 {
        let _ = fs::remove_file(&partial);
        bail!(
            "sha256 mismatch for {url}:\n  expected {sha256} (from the recipe)\n       got {got}\nthe download was deleted. Check the recipe's sha256 against the publisher's .sha256 file."
        );
    }
    let dir = target.parent().expect("cache path has a parent");
    fs::create_dir_all(dir)?;
    fs::rename(&partial, &target)
        .with_context(|| format!("moving the download into {}", dir.display()))?;
    Ok(target)
}

/// Like [`fetch`], but a copy already in the cache is hashed again first: one
/// that no longer matches (a disk error, an edit) is deleted and fetched anew.
/// Also says whether the cached copy was used.
pub fn fetch_rehashed(url: &str, sha256: &str, cache: &Path) -> Result<(PathBuf, bool)> {
    let target = cached_path(cache, url, sha256);
    if let Ok(file) = File::open(&target) {
        let got = hash::hash_file(&file, |_| {})
            .with_context(|| format!("reading {}", target.display()))?;
        if got == sha256 {
            return Ok((target, true));
        }
        eprintln!(
            "warning: cached {} is corrupt (sha256 {got}, expected {sha256}); deleting it and downloading {url} again",
            target.display()
        );
        fs::remove_file(&target)
            .with_context(|| format!("deleting the corrupt {}", target.display()))?;
    }
    Ok((fetch(url, sha256, cache)?, false))
}

/// A `file:` URL's file, copied to `partial`; returns the copy's sha256.
fn copy_local(url: &str, partial: &Path) -> Result<String> {
    let path = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .with_context(|| format!("`{url}` is not a file: URL of a local path"))?;
    if let Err(e) = fs::copy(&path, partial) {
        let _ = fs::remove_file(partial);
        return Err(anyhow::Error::new(e).context(format!("copying {} ({url})", path.display())));
    }
    let copy = File::open(partial).with_context(|| format!("opening {}", partial.display()))?;
    Ok(hash::hash_file(&copy, |_| {})?)
}

/// Downloads `url` into `partial`, resuming what an earlier run left there;
/// returns the sha256 of what `partial` holds.
fn download(url: &str, partial: &Path) -> Result<String> {
    let client = reqwest::blocking::Client::builder()
        .user_agent(concat!("nasforge/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(30))
        .timeout(None::<Duration>)
        .tcp_keepalive(Duration::from_secs(30))
        .build()?;

    // The hash of what the partial file holds, carried across attempts so
    // the body is hashed as it streams in; rebuilt from disk only when a
    // previous run left the partial file.
    let mut hashed = Hashed {
        hasher: Sha256::new(),
        len: 0,
    };
    let mut last_error = None;
    for attempt in 1..=ATTEMPTS {
        match download_once(&client, url, partial, &mut hashed) {
            Ok(()) => {
                last_error = None;
                break;
            }
            Err(Failure::Fatal(e)) => {
                let _ = fs::remove_file(partial);
                return Err(e);
            }
            Err(Failure::Retry(e)) => {
                eprintln!(
                    "warning: download of {url} interrupted (attempt {attempt}/{ATTEMPTS}): {e:#}"
                );
                last_error = Some(e);
                std::thread::sleep(Duration::from_millis(500 * attempt as u64));
            }
        }
    }
    if let Some(e) = last_error {
        let have = fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        return Err(e.context(format!(
            "downloading {url} failed after {ATTEMPTS} attempts; {have} bytes are kept in {} and the next run resumes from there",
            partial.display()
        )));
    }
    Ok(hash::hex(&hashed.hasher.finalize()))
}

enum Failure {
    /// Worth another attempt that resumes (a cut connection, a 5xx).
    Retry(anyhow::Error),
    /// Retrying cannot help (404, 403, a server that ignores the request).
    Fatal(anyhow::Error),
}

struct Hashed {
    hasher: Sha256,
    len: u64,
}

impl Hashed {
    /// Brings the hash in line with the first `len` bytes of the partial file.
    fn catch_up(&mut self, partial: &Path, len: u64) -> std::io::Result<()> {
        if self.len == len {
            return Ok(());
        }
        *self = Hashed {
            hasher: Sha256::new(),
            len: 0,
        };
        if len == 0 {
            return Ok(());
        }
        let f = File::open(partial)?;
        let mut buf = vec![0u8; 1 << 20];
        while self.len < len {
            let n = (len - self.len).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], self.len)?;
            self.hasher.update(&buf[..n]);
            self.len += n as u64;
        }
        Ok(())
    }
}

fn download_once(
    client: &reqwest::blocking::Client,
    url: &str,
    partial: &Path,
    hashed: &mut Hashed,
) -> Result<(), Failure> {
    let have = fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
    let mut req = client.get(url);
    if have > 0 {
        req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut resp = req
        .send()
        .map_err(|e| Failure::Retry(anyhow::anyhow!("cannot reach {url}: {e}")))?;
    let Some((file, offset)) = open_partial(&resp, url, partial, have, hashed)? else {
        return Ok(());
    };
    hashed
        .catch_up(partial, offset)
        .map_err(|e| Failure::Fatal(anyhow::anyhow!("reading the partial download: {e}")))?;
    receive(&mut resp, file, offset, hashed)
}

/// The partial file to write the answer's body to, and the offset the body
/// starts at, as the server's status says: from the start, resumed at
/// `have`, or (None) nothing left to fetch.
fn open_partial(
    resp: &reqwest::blocking::Response,
    url: &str,
    partial: &Path,
    have: u64,
    hashed: &mut Hashed,
) -> Result<Option<(File, u64)>, Failure> {
    let status = resp.status();
    Ok(Some(match status.as_u16() {
        200 => (
            File::create(partial).map_err(|e| Failure::Fatal(e.into()))?,
            0,
        ),
        206 => {
            let start = resp
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok());
            if start != Some(have) {
                // The server resumed from somewhere else: start over cleanly.
                let _ = fs::remove_file(partial);
                return Err(Failure::Retry(anyhow::anyhow!(
                    "server answered a resume with the wrong range"
                )));
            }
            (
                OpenOptions::new()
                    .append(true)
                    .open(partial)
                    .map_err(|e| Failure::Fatal(e.into()))?,
                have,
            )
        }
        // Nothing left to fetch: the partial file is complete.
        416 if have > 0 => {
            hashed
                .catch_up(partial, have)
                .map_err(|e| Failure::Fatal(e.into()))?;
            return Ok(None);
        }
        s if (500..600).contains(&s) || s == 429 => {
            return Err(Failure::Retry(anyhow::anyhow!(
                "server error: HTTP {status} for {url}"
            )));
        }
        _ => {
            return Err(Failure::Fatal(anyhow::anyhow!(
                "HTTP {status} for {url}: the base image URL in the recipe is wrong or gone"
            )));
        }
    }))
}

/// Appends the body to `file`, hashing it, until it ends or the connection
/// is cut.
fn receive(
    resp: &mut reqwest::blocking::Response,
    mut file: File,
    offset: u64,
    hashed: &mut Hashed,
) -> Result<(), Failure> {
    let total = resp.content_length().map(|l| l + offset);
    let bar = progress::bytes(total.unwrap_or(0), "download");
    bar.set_position(offset);
    let mut buf = vec![0u8; 256 * 1024];
    let mut received = offset;
    loop {
        let n = match resp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                bar.abandon();
                let _ = file.flush();
                return Err(Failure::Retry(anyhow::anyhow!(
                    "connection cut after {received} bytes: {e}"
                )));
            }
        };
        file.write_all(&buf[..n])
            .map_err(|e| Failure::Fatal(anyhow::anyhow!("writing the download: {e}")))?;
        hashed.hasher.update(&buf[..n]);
        hashed.len += n as u64;
        received += n as u64;
        bar.set_position(received);
    }
    bar.finish_and_clear();
    file.sync_all().map_err(|e| Failure::Fatal(e.into()))?;
    if let Some(t) = total
        && received < t
    {
        return Err(Failure::Retry(anyhow::anyhow!(
            "body ended after {received} of {t} bytes"
        )));
    }
    Ok(())
}
