//! Fragments merged into a base `.config` the way merge_config.sh merges:
//! a later setting of a symbol replaces the earlier one, base included.

use super::Fragment;
use std::collections::BTreeMap;

/// What the merged configuration asks for, symbol by symbol, and which
/// fragment asked last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    pub value: String,
    pub fragment: String,
    pub line: usize,
}

/// A fragment replacing a value the base or an earlier fragment set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redefinition {
    pub symbol: String,
    pub previous: String,
    pub new: String,
    pub fragment: String,
    /// The earlier fragment, or None for the base config.
    pub previous_from: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Merged {
    /// The `.config` to hand to `make olddefconfig`.
    pub text: String,
    pub requested: BTreeMap<String, Requested>,
    pub redefinitions: Vec<Redefinition>,
}

/// The symbol a `.config` line sets, if any.
fn line_symbol(l: &str) -> Option<&str> {
    let l = l.trim();
    if let Some(r) = l.strip_prefix("# CONFIG_") {
        return r.strip_suffix(" is not set");
    }
    l.strip_prefix("CONFIG_")
        .and_then(|r| r.split_once('='))
        .map(|(k, _)| k)
}

/// merge_config.sh's merge: each fragment setting removes the symbol's
/// earlier line (from the base or an earlier fragment) and is appended.
pub fn merge(base: &str, fragments: &[Fragment]) -> Merged {
    let mut lines: Vec<String> = base.lines().map(String::from).collect();
    let mut requested: BTreeMap<String, Requested> = BTreeMap::new();
    let mut redefinitions = Vec::new();
    for f in fragments {
        for s in &f.settings {
            let new = s.render();
            if let Some(pos) = lines
                .iter()
                .position(|l| line_symbol(l) == Some(s.symbol.as_str()))
            {
                let previous = lines.remove(pos);
                if previous.trim() != new {
                    redefinitions.push(Redefinition {
                        symbol: s.symbol.clone(),
                        previous: previous.trim().to_string(),
                        new: new.clone(),
                        fragment: f.name.clone(),
                        previous_from: requested.get(&s.symbol).map(|r| r.fragment.clone()),
                    });
                }
            }
            lines.push(new);
            requested.insert(
                s.symbol.clone(),
                Requested {
                    value: s.value.clone(),
                    fragment: f.name.clone(),
                    line: s.line,
                },
            );
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    Merged {
        text,
        requested,
        redefinitions,
    }
}
