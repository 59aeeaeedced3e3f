//! What every recipe section's parser shares: the recipe's text that its
//! errors point into, the result a section check returns, and the checks of
//! values several sections take (URLs, sha256 digests). `recipe` calls the
//! sections; the sections depend on this module, never on `recipe`.

use crate::diag::Located;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// A checked section, or every error found in it.
pub type Checked<T> = Result<T, Vec<Located>>;

/// `value` when no error was found on the way to it.
pub fn checked<T>(value: T, errs: Vec<Located>) -> Checked<T> {
    if errs.is_empty() {
        Ok(value)
    } else {
        Err(errs)
    }
}

/// The recipe file and its text, which every section's errors point into.
#[derive(Debug, Clone, Copy)]
pub struct RecipeText<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl RecipeText<'_> {
    /// An error at a span serde recorded (`Spanned`).
    pub fn at(&self, span: Range<usize>, message: impl Into<String>) -> Located {
        Located::new(self.file, self.text, Some(span), message)
    }

    /// An error at a dotted path of the recipe (`system.users[0].name`),
    /// for sections parsed without spans.
    pub fn at_path(&self, path: &str, message: &str) -> Located {
        let at = nasforge_engine::spec::locate(self.text, path);
        let (line, col) = at.map_or((1, 1), |l| (l.line, l.column));
        Located::at(
            self.file,
            self.text,
            line,
            col,
            format!("{path}: {message}"),
        )
    }

    /// The recipe's directory: relative paths in it are resolved against
    /// it, so a recipe and the files beside it move together.
    pub fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }
}

/// Why `value` cannot be used as an address with one of `schemes`, if it
/// cannot. Whitespace and control characters are refused before parsing: the
/// URL parser silently drops tabs and newlines, while an apt source or a
/// command line would read them as the start of another field or word.
pub fn url_problem(value: &str, schemes: &[&str]) -> Option<String> {
    let shown = value.escape_debug();
    if value.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Some(format!(
            "`{shown}` holds whitespace or a control character, which no URL has"
        ));
    }
    let url = match reqwest::Url::parse(value) {
        Ok(u) => u,
        Err(e) => return Some(format!("`{shown}` is not a URL ({e})")),
    };
    if !schemes.contains(&url.scheme()) {
        let names: Vec<String> = schemes.iter().map(|s| format!("{s}:")).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        };
        return Some(format!("`{shown}` is not an {list} URL"));
    }
    if url.scheme() == "file" {
        if url.to_file_path().is_err() {
            return Some(format!(
                "`{shown}` is not a file: URL of a path on this machine"
            ));
        }
    } else if url.host_str().is_none_or(str::is_empty) {
        return Some(format!("`{shown}` names no host"));
    }
    None
}

/// Why `value` is not a sha256 (64 hexadecimal digits), if it is not; the
/// lowercase digest either way.
pub fn sha256_problem(value: &Spanned<String>, at: &RecipeText) -> (String, Option<Located>) {
    let v = value.get_ref().trim().to_ascii_lowercase();
    let bad = v.len() != 64 || !v.chars().all(|c| c.is_ascii_hexdigit());
    let err = bad.then(|| {
        at.at(
            value.span(),
            format!(
                "`{}` is not a sha256 (64 hexadecimal digits)",
                value.get_ref()
            ),
        )
    });
    (v, err)
}
