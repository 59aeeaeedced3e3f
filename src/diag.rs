//! Errors that point into a file: `recipe.toml:5:9: message`, then the line
//! with a caret under the offending span, the way rustc and ripgrep do.
//! Values of secret keys (`password`, `password_hash`, ...) never appear in
//! them: such output ends up in terminals shared on screen and in CI logs.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// Extra lines such as "did you mean" or the fix.
    pub help: Option<String>,
    snippet: Option<(String, usize, usize)>,
    /// The file's secret values, masked wherever the message or help
    /// would quote them.
    secrets: Vec<String>,
}

/// Shown instead of a secret value.
const MASK: &str = "\"***\"";

/// Whether a key's value is a secret: a password, its hash (which an
/// offline attack turns back into the password) or the like.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "passphrase", "secret", "token", "psk"]
        .iter()
        .any(|w| key.contains(w))
}

/// Byte ranges of the values of secret keys in TOML `text`, found by a
/// scan that needs no valid TOML (the file being reported may not parse):
/// every `key = value` whose key is secret, in a table, a dotted key or an
/// inline table, with the value as a basic, literal or multi-line string
/// or a bare word.
fn secret_values(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                // A string in key position is a quoted key; in value
                // position it was skipped with its key below.
                let end = string_end(b, i);
                let closed = end > i + 1 && b[end - 1] == b[i];
                let key = &text[i + 1..if closed { end - 1 } else { end }];
                i = after_key(text, end, key, &mut out);
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-')
                {
                    i += 1;
                }
                i = after_key(text, i, &text[start..i], &mut out);
            }
            _ => i += 1,
        }
    }
    out
}

/// After a word or quoted string ending at `at`: when it is a key followed
/// by `=`, skips its value (recording it when the key is secret).
fn after_key(text: &str, at: usize, key: &str, out: &mut Vec<Range<usize>>) -> usize {
    let b = text.as_bytes();
    let mut i = at;
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    if i >= b.len() || b[i] != b'=' {
        return at;
    }
    i += 1;
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    let start = i;
    let end = match b.get(i) {
        Some(b'"' | b'\'') => string_end(b, i),
        // Arrays and inline tables are scanned key by key.
        Some(b'[' | b'{') => return i,
        _ => {
            while i < b.len() && !b"\n\r,}]#".contains(&b[i]) {
                i += 1;
            }
            i
        }
    };
    // A boolean is never a password; masking it would only hide which one it is.
    let boolean = matches!(text[start..end].trim_end(), "true" | "false");
    if is_secret_key(key) && end > start && !boolean {
        out.push(start..end);
    }
    end
}

/// The end (exclusive) of the TOML string starting at `start`; the end of
/// the text or line when it is not closed.
fn string_end(b: &[u8], start: usize) -> usize {
    let q = b[start];
    let triple = b.len() >= start + 3 && b[start + 1] == q && b[start + 2] == q;
    let mut i = start + if triple { 3 } else { 1 };
    while i < b.len() {
        if q == b'"' && b[i] == b'\\' {
            i += 2;
            continue;
        }
        if !triple && b[i] == b'\n' {
            return i;
        }
        if b[i] == q && (!triple || b[i..].starts_with(&[q, q, q])) {
            return i + if triple { 3 } else { 1 };
        }
        i += 1;
    }
    b.len()
}

/// Line `line_start..line_end` of `source` with secret values masked, and
/// where 1-based column `col` of the original line lands in it.
fn masked_line(
    source: &str,
    line_start: usize,
    line_end: usize,
    secrets: &[Range<usize>],
    col: usize,
) -> (String, usize) {
    let mut text = String::new();
    let mut new_col = None;
    let mut masked_until = line_start;
    for (n, (at, ch)) in source[line_start..line_end].char_indices().enumerate() {
        let at = line_start + at;
        if n + 1 == col {
            new_col = Some(text.chars().count() + 1);
        }
        if at < masked_until {
            continue;
        }
        if let Some(s) = secrets.iter().find(|s| s.contains(&at)) {
            text.push_str(MASK);
            masked_until = s.end;
            continue;
        }
        text.push(ch);
    }
    let col = new_col.unwrap_or(text.chars().count() + 1);
    (text, col)
}

/// The secret's text as a message might quote it: the literal and, for a
/// simple string, its content.
fn secret_texts(source: &str, secrets: &[Range<usize>]) -> Vec<String> {
    let mut out = Vec::new();
    for s in secrets {
        let raw = &source[s.clone()];
        let inner = raw.trim_matches(|c| c == '"' || c == '\'');
        out.push(raw.to_string());
        if inner != raw {
            out.push(inner.to_string());
        }
        // A multi-line string's lines, which a message may quote one by one.
        out.extend(inner.lines().map(str::trim).map(String::from));
    }
    out.retain(|t| !t.is_empty());
    // Longest first, so that a value is masked whole before any part of it.
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// `text` with every occurrence of a secret (not inside a longer word) masked.
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets {
        let mut from = 0;
        while let Some(pos) = text[from..].find(secret.as_str()) {
            let (a, z) = (from + pos, from + pos + secret.len());
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            if word(text[..a].chars().next_back()) || word(text[z..].chars().next()) {
                from = a + secret.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            text.replace_range(a..z, MASK);
            from = a + MASK.len();
        }
    }
    text
}

impl Located {
    pub fn new(
        file: &Path,
        source: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        let secrets = secret_values(source);
        let (line, col, snippet) = match span {
            Some(span) => {
                let (line, col) = line_col(source, span.start);
                let line_start = source
                    .split_inclusive('\n')
                    .take(line - 1)
                    .map(str::len)
                    .sum::<usize>();
                let line_end = line_start
                    + source[line_start..]
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim_end_matches('\r')
                        .len();
                let (text, shown_col) = masked_line(source, line_start, line_end, &secrets, col);
                let width = if secrets
                    .iter()
                    .any(|s| s.start < span.end && span.start < s.end)
                {
                    MASK.len()
                } else {
                    span.end.saturating_sub(span.start).max(1)
                };
                let width = width.min(text.chars().count().saturating_sub(shown_col - 1).max(1));
                (line, col, Some((text, shown_col, width)))
            }
            None => (1, 1, None),
        };
        Located {
            file: file.to_path_buf(),
            line,
            col,
            message: message.into(),
            help: None,
            snippet,
            secrets: secret_texts(source, &secrets),
        }
    }

    /// At a known 1-based line and column (no span to underline beyond one character).
    pub fn at(
        file: &Path,
        source: &str,
        line: usize,
        col: usize,
        message: impl Into<String>,
    ) -> Self {
        let offset: usize = source
            .split_inclusive('\n')
            .take(line - 1)
            .map(str::len)
            .sum::<usize>()
            + source
                .lines()
                .nth(line - 1)
                .map_or(0, |l| l.chars().take(col - 1).map(char::len_utf8).sum());
        Located::new(file, source, Some(offset..offset + 1), message)
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = source[line_start..offset].chars().count() + 1;
    (line, col)
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.col,
            scrub(&self.message, &self.secrets)
        )?;
        if let Some((text, col, width)) = &self.snippet {
            let gutter = self.line.to_string().len();
            write!(
                f,
                "\n{:gutter$} |\n{} | {}\n{:gutter$} | {}{}",
                "",
                self.line,
                text,
                "",
                " ".repeat(col - 1),
                "^".repeat(*width)
            )?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  = help: {}", scrub(help, &self.secrets))?;
        }
        Ok(())
    }
}

/// Several located errors reported together, so a user fixes a recipe in one
/// pass instead of one error per run.
#[derive(Debug)]
pub struct LocatedErrors(pub Vec<Located>);

impl fmt::Display for LocatedErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LocatedErrors {}

/// "did you mean" for a misspelt key or value, from the valid choices.
pub fn did_you_mean<'a>(word: &str, choices: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    choices
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters() {
        let src = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        let x = src.find("\"x").unwrap();
        assert_eq!(line_col(src, x), (2, 6));
    }

    #[test]
    fn renders_caret_under_span() {
        let src = "[board]\nmodel = \"pi6\"\n";
        let start = src.find("\"pi6\"").unwrap();
        let e = Located::new(
            Path::new("r.toml"),
            src,
            Some(start..start + 5),
            "unknown board",
        );
        let text = e.to_string();
        assert!(text.starts_with("r.toml:2:9: unknown board"), "{text}");
        assert!(
            text.contains("2 | model = \"pi6\"\n  |         ^^^^^"),
            "{text}"
        );
    }

    #[test]
    fn suggests_close_words_only() {
        assert_eq!(
            did_you_mean("pcie_gne", ["model", "pcie_gen", "pcie"]),
            Some("pcie_gen")
        );
        assert_eq!(did_you_mean("zzz", ["model", "pcie_gen"]), None);
    }

    #[test]
    fn finds_the_values_of_secret_keys_in_every_form() {
        let src = concat!(
            "name = \"password\" # password = \"in a comment\"\n",
            "password = \"a\\\"b\"\n",
            "users.password_hash = 'lit'\n",
            "\"root_password_hash\" = \"\"\"one\ntwo\"\"\"\n",
            "users = [{ name = \"x\", password = 1234, sudo = true }]\n",
            "wifi_psk = bare\n",
            "password = true\n",
        );
        let found: Vec<&str> = secret_values(src).into_iter().map(|r| &src[r]).collect();
        assert_eq!(
            found,
            [
                "\"a\\\"b\"",
                "'lit'",
                "\"\"\"one\ntwo\"\"\"",
                "1234",
                "bare"
            ]
        );
    }

    #[test]
    fn a_secret_is_masked_in_the_line_and_the_message() {
        let src = "[[system.users]]\nname = \"admin\"\npassword = \"\"\"s3cret\nmore-s3cret\"\"\" x = 1\n";
        let at = src.find(" x = 1").unwrap() + 1;
        let e = Located::new(
            Path::new("r.toml"),
            src,
            Some(at..at + 1),
            "`more-s3cret` and `s3cret` are wrong",
        )
        .with_help("not `s3cret`, nor s3cret2");
        let text = e.to_string();
        assert!(
            !text.contains("s3cret\"") && !text.contains("`s3cret`"),
            "{text}"
        );
        assert!(
            text.starts_with("r.toml:4:16: `\"***\"` and `\"***\"` are wrong"),
            "{text}"
        );
        assert!(text.contains("4 | \"***\" x = 1\n  |       ^"), "{text}");
        // A longer word that merely contains the secret is left alone.
        assert!(text.contains("nor s3cret2"), "{text}");
    }
}
