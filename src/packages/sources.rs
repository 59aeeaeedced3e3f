//! The image's apt sources, in both of apt's formats: one-line
//! `sources.list` entries and deb822 `.sources` stanzas.

use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    pub uris: Vec<String>,
    pub suites: Vec<String>,
    pub components: Vec<String>,
    /// Keyring file paths inside the image (`Signed-By:` / `[signed-by=]`);
    /// empty means apt's trusted.gpg.d.
    pub signed_by: Vec<String>,
    /// Where it was read from, for messages.
    pub origin: String,
}

/// One-line format: `deb [opt=val ...] URI SUITE [COMPONENT ...]`.
pub fn parse_list(text: &str, origin: &str) -> Result<Vec<AptSource>> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut rest = line;
        let Some(kind) = rest.split_whitespace().next() else {
            continue;
        };
        if kind == "deb-src" {
            continue;
        }
        if kind != "deb" {
            bail!(
                "{origin}:{}: `{line}` is not an apt source line (expected `deb URI SUITE COMPONENT...`)",
                n + 1
            );
        }
        rest = rest[kind.len()..].trim_start();
        let mut signed_by = Vec::new();
        if let Some(opts) = rest.strip_prefix('[') {
            let Some((opts, after)) = opts.split_once(']') else {
                bail!("{origin}:{}: unclosed `[` in `{line}`", n + 1);
            };
            for opt in opts.split_whitespace() {
                if let Some(v) = opt.strip_prefix("signed-by=") {
                    signed_by.extend(v.split(',').map(String::from));
                }
            }
            rest = after.trim_start();
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.len() < 2 {
            bail!("{origin}:{}: `{line}` needs a URI and a suite", n + 1);
        }
        out.push(AptSource {
            uris: vec![words[0].to_string()],
            suites: vec![words[1].to_string()],
            components: words[2..].iter().map(|s| s.to_string()).collect(),
            signed_by,
            origin: format!("{origin}:{}", n + 1),
        });
    }
    Ok(out)
}

/// deb822 format: stanzas of `Field: value` separated by blank lines.
pub fn parse_sources(text: &str, origin: &str) -> Result<Vec<AptSource>> {
    let mut out = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut start_line = 1;
    let mut flush = |fields: &mut Vec<(String, String)>, line: usize| -> Result<()> {
        if fields.is_empty() {
            return Ok(());
        }
        let get = |k: &str| {
            fields
                .iter()
                .find(|(f, _)| f.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        let words = |k: &str| {
            get(k)
                .map(|v| v.split_whitespace().map(String::from).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        let enabled = get("Enabled").is_none_or(|v| !v.trim().eq_ignore_ascii_case("no"));
        if enabled && words("Types").iter().any(|t| t == "deb") {
            let signed_by = match get("Signed-By") {
                // An inline key block is not a path; it is written out by the caller.
                Some(v) if v.contains("BEGIN PGP") => vec![format!("inline:{}", v)],
                Some(v) => v.split_whitespace().map(String::from).collect(),
                None => vec![],
            };
            let uris = words("URIs");
            let suites = words("Suites");
            if uris.is_empty() || suites.is_empty() {
                bail!("{origin}:{line}: a deb822 stanza needs URIs and Suites");
            }
            out.push(AptSource {
                uris,
                suites,
                components: words("Components"),
                signed_by,
                origin: format!("{origin}:{line}"),
            });
        }
        fields.clear();
        Ok(())
    };
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            flush(&mut fields, start_line)?;
            start_line = n + 2;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            // A continuation line (multi-line Signed-By key blocks).
            if let Some((_, v)) = fields.last_mut() {
                v.push('\n');
                v.push_str(line.trim());
            }
            continue;
        }
        match line.split_once(':') {
            Some((k, v)) => fields.push((k.trim().to_string(), v.trim().to_string())),
            None => bail!("{origin}:{}: `{line}` is not a `Field: value` line", n + 1),
        }
    }
    flush(&mut fields, start_line)?;
    Ok(out)
}

impl AptSource {
    /// The stanza apt on the build host reads, with keyrings mapped to
    /// copies of the image's own files. Every field is a space-separated
    /// list, so a value holding whitespace or a control character is refused:
    /// a newline would start a field of its own (`Trusted: yes`).
    pub fn render(&self, keyrings: &[String]) -> Result<String> {
        let mut s = String::from("Types: deb\n");
        for (field, values) in [
            ("URIs", &self.uris[..]),
            ("Suites", &self.suites[..]),
            ("Components", &self.components[..]),
            ("Signed-By", keyrings),
        ] {
            if values.is_empty() && matches!(field, "Components" | "Signed-By") {
                continue;
            }
            for v in values {
                if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    bail!(
                        "{}: apt source field {field} value {v:?} is empty or holds whitespace or a control character, which would split it or add a field; fix the value (a `[packages] mirror`, or the cache directory's path for a keyring)",
                        self.origin
                    );
                }
            }
            s.push_str(&format!("{field}: {}\n", values.join(" ")));
        }
        Ok(s)
    }

    /// The Debian archive entries (URIs ending in `/debian`), which
    /// `[packages] mirror` points elsewhere.
    pub fn is_debian_archive(&self) -> bool {
        self.uris
            .iter()
            .any(|u| u.trim_end_matches('/').ends_with("/debian"))
    }
}

/// A file of apt sources, in the format its name says: deb822 stanzas for
/// `.sources`, one-line entries otherwise.
pub fn parse_file(path: &str, text: &str) -> Result<Vec<AptSource>> {
    if path.ends_with(".sources") {
        parse_sources(text, path)
    } else {
        parse_list(text, path)
    }
}

/// Debian's security archive as this machine's apt uses it: a source of
/// some release's `-security` suite at a URI ending in `/debian-security`,
/// as Debian's mirrors lay it out (Ubuntu's `-security` is another archive).
pub fn host_security_mirror() -> Option<String> {
    security_mirror_in(&host())
}

/// This machine's apt sources.
pub fn host() -> Vec<AptSource> {
    apt_sources_in(Path::new("/etc/apt"))
}

fn security_mirror_in(sources: &[AptSource]) -> Option<String> {
    sources
        .iter()
        .filter(|s| s.suites.iter().any(|x| x.ends_with("-security")))
        .flat_map(|s| &s.uris)
        .find(|u| u.trim_end_matches('/').ends_with("/debian-security"))
        .cloned()
}

/// The apt sources under `etc` (apt's /etc/apt): sources.list.d's files in
/// either format, then sources.list. A file apt could not read either is
/// passed over, as apt's own errors say what is wrong with it.
fn apt_sources_in(etc: &Path) -> Vec<AptSource> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(etc.join("sources.list.d"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("sources" | "list")
            )
        })
        .collect();
    parts.sort();
    parts.push(etc.join("sources.list"));
    parts
        .iter()
        .filter_map(|p| Some((p.display().to_string(), std::fs::read_to_string(p).ok()?)))
        .flat_map(|(path, text)| parse_file(&path, &text).unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_security_archive_is_the_source_of_a_security_suite() {
        let etc = tempfile::tempdir().unwrap();
        std::fs::create_dir(etc.path().join("sources.list.d")).unwrap();
        std::fs::write(
            etc.path().join("sources.list"),
            "deb http://mirror.example/debian bookworm main\ndeb http://security.example/ubuntu jammy-security main\n",
        )
        .unwrap();
        let found = apt_sources_in(etc.path());
        assert_eq!(security_mirror_in(&found), None);
        std::fs::write(
            etc.path().join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n",
        )
        .unwrap();
        std::fs::write(
            etc.path().join("sources.list.d/notes.txt"),
            "deb x y-security\n",
        )
        .unwrap();
        let found = apt_sources_in(etc.path());
        assert_eq!(
            security_mirror_in(&found).as_deref(),
            Some("http://security.example/debian-security")
        );
    }

    #[test]
    fn one_line_sources_with_options() {
        let text = "# comment\ndeb [arch=arm64 signed-by=/usr/share/keyrings/a.gpg] http://m.example/debian trixie main contrib non-free-firmware\ndeb-src http://m.example/debian trixie main\n\ndeb http://archive.example/debian/ trixie main\n";
        let s = parse_list(text, "sources.list").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].uris, vec!["http://m.example/debian"]);
        assert_eq!(
            s[0].components,
            vec!["main", "contrib", "non-free-firmware"]
        );
        assert_eq!(s[0].signed_by, vec!["/usr/share/keyrings/a.gpg"]);
        assert_eq!(s[1].origin, "sources.list:5");
        assert!(s[1].is_debian_archive());
    }

    #[test]
    fn deb822_stanzas_skip_disabled_and_source_types() {
        let text = "Types: deb\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb-src\nURIs: http://m.example/debian\nSuites: bookworm\n\nEnabled: no\nTypes: deb\nURIs: http://x.example/\nSuites: y\n";
        let s = parse_sources(text, "debian.sources").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].suites, vec!["bookworm", "bookworm-updates"]);
        assert_eq!(
            s[0].render(&["/k.gpg".into()]).unwrap(),
            "Types: deb\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n"
        );
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let e = parse_list("deb http://only-uri\n", "x.list")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.list:1: "), "{e}");
        let e = parse_sources("Types deb\n", "y.sources")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("y.sources:1: "), "{e}");
    }

    #[test]
    fn a_value_that_would_add_a_field_is_refused() {
        let mut s = parse_sources(
            "Types: deb\nURIs: http://m.example/debian\nSuites: trixie\nComponents: main\n",
            "debian.sources",
        )
        .unwrap()
        .remove(0);
        s.uris = vec!["http://127.0.0.1:8765\nTrusted: yes".into()];
        let e = s.render(&[]).unwrap_err().to_string();
        assert!(
            e.starts_with("debian.sources:1: apt source field URIs value \"http://127.0.0.1:8765\\nTrusted: yes\""),
            "{e}"
        );
        s.uris = vec!["http://m.example/debian".into()];
        for bad in ["a\rTrusted: yes", "/k k.gpg", "", "\u{7f}"] {
            let e = s.render(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains("field Signed-By"), "{bad:?}: {e}");
        }
        s.suites = vec!["trixie\nTrusted: yes".into()];
        assert!(s.render(&[]).is_err());
    }
}
