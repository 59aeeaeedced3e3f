//! Errors that point into a file: `recipe.toml:5:9: message`, then the line
//! with a caret under the offending span, the way rustc and ripgrep do.

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
}

impl Located {
    pub fn new(
        file: &Path,
        source: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        let (line, col, snippet) = match span {
            Some(span) => {
                let (line, col) = line_col(source, span.start);
                let text = source
                    .lines()
                    .nth(line - 1)
                    .unwrap_or("")
                    .trim_end_matches('\r')
                    .to_string();
                let width = span.end.saturating_sub(span.start).max(1);
                let width = width.min(text.chars().count().saturating_sub(col - 1).max(1));
                (line, col, Some((text, col, width)))
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
            self.message
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
            write!(f, "\n  = help: {help}")?;
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
}
