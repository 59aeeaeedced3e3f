//! `[boot]`: lines for a Raspberry Pi's config.txt and words for its
//! cmdline.txt, each checked so it stays one setting or one argument.

use crate::board::{Family, Model};
use crate::section::{Checked, RecipeText, checked};
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Boot {
    /// Extra config.txt lines for this board's section.
    #[serde(default)]
    pub config: Vec<String>,
    #[serde(default)]
    pub cmdline_append: Vec<String>,
    #[serde(default)]
    pub cmdline_remove: Vec<String>,
}

pub fn parse(raw: Option<&Spanned<Boot>>, model: Model, at: &RecipeText) -> Checked<Boot> {
    let Some(b) = raw else {
        return Ok(Boot::default());
    };
    let info = model.info();
    let mut errs = Vec::new();
    if info.family != Family::Rpi {
        errs.push(
            at.at(
                b.span(),
                format!(
                    "`[boot]` edits config.txt and cmdline.txt, which board `{model}` does not have"
                ),
            )
            .with_help("remove the section, or pick a Raspberry Pi board"),
        );
    }
    for line in &b.get_ref().config {
        if line.contains(char::is_control) || line.trim_start().starts_with('[') {
            errs.push(
                at.at(
                    b.span(),
                    format!(
                        "config line `{}` must be a single setting, not a section or several lines",
                        line.escape_debug()
                    ),
                )
                .with_help(format!(
                    "nasforge puts these lines in the board's own section ([{}])",
                    info.section.clone().unwrap_or_default()
                )),
            );
        }
    }
    let boot = b.get_ref();
    for token in boot.cmdline_append.iter().chain(&boot.cmdline_remove) {
        // A quote would make the kernel read the arguments after it as part
        // of this one.
        if token.is_empty()
            || token.contains(|c: char| c.is_whitespace() || c.is_control() || c == '"')
        {
            errs.push(
                at.at(
                    b.span(),
                    format!("cmdline entry `{}` must be one word", token.escape_debug()),
                )
                .with_help("give each kernel argument as its own list item, without quotes"),
            );
        }
    }
    checked(boot.clone(), errs)
}
