//! What the reader learns from a Kconfig tree: each symbol's definitions
//! with their dependencies, and who selects it.

use super::{Config, Expr, Tri};
use std::collections::BTreeMap;

/// Where a dependency comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `depends on` inside the entry.
    Own,
    /// `bool "prompt" if EXPR`: the option can only be set when it holds.
    Prompt,
    /// An enclosing `if EXPR` block.
    If { file: String, line: usize },
    /// An enclosing `menu` (or `choice`) with its own `depends on`.
    Menu {
        title: String,
        file: String,
        line: usize,
    },
}

#[derive(Debug, Clone)]
pub struct Dependency {
    pub expr: Expr,
    pub origin: Origin,
}

/// One `config`/`menuconfig` entry for a symbol (a symbol may have several).
#[derive(Debug, Clone)]
pub struct Definition {
    pub file: String,
    pub line: usize,
    pub kind: Option<String>,
    pub has_prompt: bool,
    pub depends: Vec<Dependency>,
}

/// `select SYM if COND` from the entry of `by`.
#[derive(Debug, Clone)]
pub struct Select {
    pub by: String,
    pub cond: Option<Expr>,
}

#[derive(Debug, Clone, Default)]
pub struct Kconfig {
    pub defs: BTreeMap<String, Vec<Definition>>,
    pub selects: BTreeMap<String, Vec<Select>>,
    /// Files that could not be read or lines that could not be parsed; the
    /// explanation is then incomplete, never wrong about what it does say.
    pub warnings: Vec<String>,
}

impl Kconfig {
    /// For each definition of `sym`, the dependencies that keep it below
    /// `want` under `cfg`: those that are `n`, and for a tristate asked to be
    /// `y`, those that are only `m` (a bool may be `y` under an `m`
    /// dependency). Empty when there is no definition.
    pub fn unmet(
        &self,
        sym: &str,
        want: Tri,
        cfg: &Config,
    ) -> Vec<(&Definition, Vec<&Dependency>)> {
        let Some(defs) = self.defs.get(sym) else {
            return vec![];
        };
        defs.iter()
            .map(|d| {
                let need = if d.kind.as_deref() == Some("tristate") {
                    want.max(Tri::M)
                } else {
                    Tri::M
                };
                let failing: Vec<&Dependency> = d
                    .depends
                    .iter()
                    .filter(|dep| dep.expr.eval(cfg) < need)
                    .collect();
                (d, failing)
            })
            .collect()
    }
}
