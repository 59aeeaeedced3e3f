//! apt itself, on the build host, against a throwaway root that holds the
//! image's dpkg status, the image's apt sources and only the image's
//! keyrings: the real resolver and the real signature check, with the trust
//! the board would apply. `APT_CONFIG` points apt at this root's own
//! configuration, so nothing of the host's apt setup leaks in.

use super::sources::AptSource;
use crate::io::hash::sha256_hex;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

/// Package lists younger than this are reused without asking the mirror, so
/// a rebuild makes no HTTP request at all (`--refresh` forces an update).
const LISTS_FRESH_FOR: Duration = Duration::from_secs(24 * 3600);

pub struct AptRoot {
    dir: PathBuf,
}

/// One package apt chose, as `--print-uris` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    pub uri: String,
    /// The file name apt would store it under (epoch as `%3a`).
    pub filename: String,
    pub size: u64,
    pub sha256: String,
}

/// A file of the image that apt must see: keyrings and the status file.
pub struct ImageFile {
    pub path: String,
    pub data: Vec<u8>,
}

impl AptRoot {
    /// Sets up (or reuses) the root for this architecture, these sources and
    /// these keyrings under `cache/apt/<digest>`; lists already downloaded
    /// for the same inputs are kept.
    pub fn prepare(
        cache: &Path,
        arch: &str,
        sources: &[AptSource],
        keyrings: &[ImageFile],
        status: &[u8],
    ) -> Result<AptRoot> {
        // apt.conf strings below have no escapes: a quote or a line break in
        // the path would end the string and start settings of its own.
        if let Some(bad) = cache.to_str().map_or(Some('\u{fffd}'), |c| {
            c.chars().find(|c| *c == '"' || c.is_control())
        }) {
            bail!(
                "the cache path {} holds {bad:?}, which apt's configuration cannot carry; set NASFORGE_CACHE to a plain directory",
                cache.display()
            );
        }
        let mut rendered = String::new();
        let key_material: String = keyrings
            .iter()
            .map(|k| format!("{}:{}\n", k.path, sha256_hex(&k.data)))
            .collect();
        let keyring_path = |dir: &Path, image_path: &str| -> PathBuf {
            let idx = keyrings
                .iter()
                .position(|k| k.path == image_path)
                .expect("keyring read from the image");
            let ext = if keyrings[idx].data.starts_with(b"-----BEGIN") {
                "asc"
            } else {
                "gpg"
            };
            dir.join(format!("etc/apt/keyrings/{idx}.{ext}"))
        };
        let digest = sha256_hex(format!("{arch}\n{sources:?}\n{key_material}").as_bytes());
        let dir = cache.join("apt").join(&digest[..16]);
        for d in [
            "etc/apt/apt.conf.d",
            "etc/apt/sources.list.d",
            "etc/apt/keyrings",
            "etc/apt/trusted.gpg.d",
            "etc/apt/preferences.d",
            "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial",
            "var/lib/dpkg",
        ] {
            fs::create_dir_all(dir.join(d))
                .with_context(|| format!("creating {}", dir.join(d).display()))?;
        }
        for k in keyrings {
            fs::write(keyring_path(&dir, &k.path), &k.data)?;
        }
        // Sources without Signed-By trust every keyring in trusted.gpg.d, as
        // on the board; those are the image's files of that directory.
        for k in keyrings
            .iter()
            .filter(|k| k.path.starts_with("/etc/apt/trusted.gpg.d/"))
        {
            let name = k.path.rsplit('/').next().unwrap_or("key.gpg");
            fs::write(dir.join("etc/apt/trusted.gpg.d").join(name), &k.data)?;
        }
        for s in sources {
            let keys: Vec<String> = s
                .signed_by
                .iter()
                .map(|p| keyring_path(&dir, p).display().to_string())
                .collect();
            rendered.push_str(&s.render(&keys)?);
            rendered.push('\n');
        }
        fs::write(dir.join("etc/apt/sources.list.d/image.sources"), rendered)?;
        fs::write(dir.join("var/lib/dpkg/status"), status)?;
        let d = dir.display();
        let conf = format!(
            "Dir \"{d}/\";\nDir::State::status \"{d}/var/lib/dpkg/status\";\nDir::Etc::Main \"{d}/etc/apt/apt.conf\";\nDir::Etc::Parts \"{d}/etc/apt/apt.conf.d\";\nDir::Etc::SourceList \"{d}/etc/apt/sources.list\";\nDir::Etc::SourceParts \"{d}/etc/apt/sources.list.d\";\nDir::Etc::trusted \"{d}/etc/apt/trusted.gpg\";\nDir::Etc::TrustedParts \"{d}/etc/apt/trusted.gpg.d\";\nDir::Etc::Preferences \"{d}/etc/apt/preferences\";\nDir::Etc::PreferencesParts \"{d}/etc/apt/preferences.d\";\nAPT::Architecture \"{arch}\";\nAPT::Architectures {{ \"{arch}\"; }};\nAcquire::Languages \"none\";\nAcquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";\nAcquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled \"false\";\nAcquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled \"false\";\nAcquire::IndexTargets::deb::CNF::DefaultEnabled \"false\";\nAcquire::ForceHash \"sha256\";\nAcquire::Retries \"2\";\nDebug::NoLocking \"true\";\nAPT::Get::List-Cleanup \"true\";\nBinary::apt::APT::Keep-Downloaded-Packages \"true\";\n"
        );
        fs::write(dir.join("etc/apt/apt.conf"), conf)?;
        Ok(AptRoot { dir })
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("APT_CONFIG", self.dir.join("etc/apt/apt.conf"))
            .env("LC_ALL", "C.UTF-8")
            .env_remove("DEBIAN_FRONTEND");
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<Output> {
        self.command(program).args(args).output().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow::anyhow!("{program} not found: nasforge resolves packages with apt on the build host (Debian or Ubuntu); install apt, or leave out `[packages]` and let the board install them from the network")
            } else {
                anyhow::anyhow!("cannot run {program}: {e}")
            }
        })
    }

    fn lists_age(&self) -> Option<Duration> {
        let entries = fs::read_dir(self.dir.join("var/lib/apt/lists")).ok()?;
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("Release"))
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .min()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
    }

    /// `apt-get update`, unless the lists are fresh. A bad signature, a
    /// tampered index or an unreachable mirror is an error naming the file.
    pub fn update(&self, refresh: bool) -> Result<bool> {
        if !refresh && self.lists_age().is_some_and(|a| a < LISTS_FRESH_FOR) {
            return Ok(false);
        }
        let out = self.run(
            "apt-get",
            &["update", "-q", "-o", "APT::Update::Error-Mode=any"],
        )?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("E:") || l.starts_with("W:") || l.starts_with("Err:"))
            .collect();
        if !out.status.success() || problems.iter().any(|l| !l.starts_with("W:")) {
            // Lists from a failed update must not be trusted next time.
            let _ = fs::remove_dir_all(self.dir.join("var/lib/apt/lists"));
            bail!(
                "apt could not read the image's package repositories:\n  {}",
                problems.join("\n  ")
            );
        }
        Ok(true)
    }

    /// The closure apt installs for `packages` without recommends, given
    /// what the image already has.
    pub fn resolve(&self, packages: &[String]) -> Result<Vec<Download>> {
        let mut args = vec![
            "install",
            "--no-install-recommends",
            "--print-uris",
            "-y",
            "-q",
        ];
        args.extend(packages.iter().map(String::as_str));
        let out = self.run("apt-get", &args)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why: Vec<&str> = stdout
                .lines()
                .skip_while(|l| !l.contains("unmet dependencies") && !l.starts_with("E:"))
                .chain(stderr.lines())
                .filter(|l| !l.trim().is_empty())
                .collect();
            bail!(
                "apt cannot install {} on this image:\n  {}",
                packages.join(", "),
                why.join("\n  ")
            );
        }
        parse_print_uris(&stdout)
    }

    /// The files of exactly these packages (`name` or `name=version`),
    /// without their dependencies, as the signed index describes them.
    pub fn download_uris(&self, specs: &[String]) -> Result<Vec<Download>> {
        let mut args = vec!["download", "--print-uris", "-q"];
        args.extend(specs.iter().map(String::as_str));
        let out = self.run("apt-get", &args)?;
        if !out.status.success() {
            bail!(
                "apt cannot find {} in the image's package sources:\n  {}",
                specs.join(", "),
                apt_errors(&out).join("\n  ")
            );
        }
        parse_print_uris(&String::from_utf8_lossy(&out.stdout))
    }

    /// Every version of `name` the sources offer, apt's candidate first,
    /// then the others newest first; empty when no source has it.
    pub fn versions(&self, name: &str) -> Result<Vec<String>> {
        let out = self.run("apt-cache", &["policy", name])?;
        let policy = String::from_utf8_lossy(&out.stdout);
        let candidate = policy
            .lines()
            .find_map(|l| l.trim().strip_prefix("Candidate:"))
            .map(|c| c.trim().to_string())
            .filter(|c| c != "(none)");
        let out = self.run("apt-cache", &["madison", name])?;
        let mut versions: Vec<String> = candidate.into_iter().collect();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut cols = line.split('|').map(str::trim);
            if cols.next() != Some(name) {
                continue;
            }
            if let Some(v) = cols.next().filter(|v| !versions.iter().any(|x| x == v)) {
                versions.push(v.to_string());
            }
        }
        Ok(versions)
    }

    /// The index entry of one version of a package, if a source has it.
    pub fn stanza(&self, name: &str, version: &str) -> Result<Option<String>> {
        let spec = format!("{name}={version}");
        let out = self.run("apt-cache", &["show", "--no-all-versions", &spec])?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok((out.status.success() && !text.trim().is_empty())
            .then(|| text.split("\n\n").next().unwrap_or("").trim().to_string()))
    }

    /// The Packages stanzas of the chosen versions, found by their sha256
    /// (the index entry describes exactly the file that was verified).
    pub fn stanzas(&self, names: &[String], wanted: &[Download]) -> Result<Vec<String>> {
        let mut args = vec!["show"];
        args.extend(names.iter().map(String::as_str));
        let out = self.run("apt-cache", &args)?;
        if !out.status.success() {
            bail!(
                "apt-cache show failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut found = Vec::new();
        for d in wanted {
            let stanza = text
                .split("\n\n")
                .find(|s| {
                    s.lines().any(|l| {
                        l.strip_prefix("SHA256: ")
                            .is_some_and(|h| h.trim() == d.sha256)
                    })
                })
                .with_context(|| {
                    format!("no index entry for {} with sha256 {}", d.filename, d.sha256)
                })?;
            found.push(stanza.trim().to_string());
        }
        Ok(found)
    }
}

/// apt's `E:` lines, the reason it gives for a failure.
fn apt_errors(out: &Output) -> Vec<String> {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| l.starts_with("E:"))
        .map(String::from)
        .collect()
}

/// `'URI' FILENAME SIZE SHA256:HEX` per line.
pub fn parse_print_uris(text: &str) -> Result<Vec<Download>> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('\'')) {
        let Some((uri, rest)) = line[1..].split_once("' ") else {
            bail!("unexpected line from apt-get --print-uris: {line}");
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let (Some(filename), Some(size), Some(hash)) = (f.first(), f.get(1), f.get(2)) else {
            bail!("unexpected line from apt-get --print-uris: {line}");
        };
        let Some(sha256) = hash.strip_prefix("SHA256:") else {
            bail!(
                "apt gave no SHA256 for {filename} ({hash}); the repository's index lacks SHA256 sums"
            );
        };
        out.push(Download {
            uri: uri.to_string(),
            filename: filename.to_string(),
            size: size
                .parse()
                .with_context(|| format!("bad size in: {line}"))?,
            sha256: sha256.to_ascii_lowercase(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_print_uris() {
        let text = "Reading package lists...\n'http://m.example/debian/pool/main/z/zlib/zlib1g_1.2.13.dfsg-1_arm64.deb' zlib1g_1%3a1.2.13.dfsg-1_arm64.deb 82744 SHA256:52B8b8a145bbe1956bba82034f77022cbef0c3d0885c9e32d9817a7932fe1913\n";
        let d = parse_print_uris(text).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].filename, "zlib1g_1%3a1.2.13.dfsg-1_arm64.deb");
        assert_eq!(d[0].size, 82744);
        assert!(d[0].sha256.starts_with("52b8b8a1"));
        let e = parse_print_uris("'http://x/a.deb' a.deb 1 MD5Sum:00\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no SHA256"), "{e}");
    }

    #[test]
    fn a_cache_path_that_would_add_apt_settings_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["c\";\nAcquire::AllowInsecureRepositories \"true", "c\rx"] {
            let cache = tmp.path().join(name);
            let e = AptRoot::prepare(&cache, "arm64", &[], &[], b"")
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains("set NASFORGE_CACHE"), "{e}");
            assert!(!cache.exists(), "nothing was written");
        }
    }
}
