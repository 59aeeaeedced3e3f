//! The check after `make olddefconfig`: every value a fragment asked for
//! must be in the final `.config`, and each one Kconfig dropped is
//! explained from the tree's Kconfig (unknown, unmet dependency, no prompt,
//! overridden by a select).

use super::Requested;
use crate::kernel::kconfig::{Config, Kconfig, Origin, Tri};
use std::collections::BTreeMap;
use std::fmt;

/// A fragment value that is not in the final `.config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub symbol: String,
    pub requested: String,
    /// What the final `.config` holds (`n` when absent).
    pub actual: String,
    pub fragment: String,
    pub line: usize,
    pub why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// No `config SYMBOL` anywhere in the tree's Kconfig files.
    Unknown,
    /// Dependencies that are off: each as the expression, where it comes
    /// from, and the value of every symbol it names.
    Depends(Vec<UnmetDep>),
    /// Only `select` sets it (no prompt); these would.
    NoPrompt { selected_by: Vec<String> },
    /// Asked to be off (or a module) but these select it.
    Selected { by: Vec<String> },
    /// None of the above explains it (a choice, a range, a default).
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmetDep {
    pub expr: String,
    pub origin: String,
    pub values: Vec<(String, String)>,
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let req = if self.requested == "n" {
            " is not set".to_string()
        } else {
            format!("={}", self.requested)
        };
        let got = if self.actual == "n" {
            "off".to_string()
        } else {
            self.actual.clone()
        };
        write!(
            f,
            "CONFIG_{}{req} ({}:{}) ",
            self.symbol, self.fragment, self.line
        )?;
        match &self.why {
            Why::Unknown => write!(
                f,
                "does not exist in this kernel: no `config {}` in its Kconfig files (misspelt, or not in this version)",
                self.symbol
            ),
            Why::Depends(deps) => {
                write!(f, "was dropped (final value: {got}): it depends on ")?;
                let parts: Vec<String> = deps
                    .iter()
                    .map(|d| {
                        let vals: Vec<String> =
                            d.values.iter().map(|(s, v)| format!("{s}={v}")).collect();
                        format!(
                            "{} [{}] ({})",
                            d.expr,
                            d.origin,
                            if vals.is_empty() {
                                "false".into()
                            } else {
                                vals.join(", ")
                            }
                        )
                    })
                    .collect();
                write!(f, "{}", parts.join(" and "))
            }
            Why::NoPrompt { selected_by } => {
                write!(
                    f,
                    "cannot be set directly (final value: {got}): it has no prompt and only `select` turns it on"
                )?;
                if !selected_by.is_empty() {
                    write!(f, ", from {}", selected_by.join(", "))?;
                }
                Ok(())
            }
            Why::Selected { by } => write!(
                f,
                "was overridden (final value: {got}): it is selected by {}",
                by.join(", ")
            ),
            Why::Other => write!(f, "ended up {got} (a choice, range or default decided it)"),
        }
    }
}

/// Values are equal when they mean the same: an absent symbol is `n`.
fn same(requested: &str, actual: &str) -> bool {
    requested == actual
}

/// Compares the final `.config` with what the fragments asked for and
/// explains every difference from the tree's Kconfig.
pub fn verify(
    requested: &BTreeMap<String, Requested>,
    final_config: &Config,
    kconfig: &Kconfig,
) -> Vec<Dropped> {
    let mut out = Vec::new();
    for (sym, req) in requested {
        let actual = final_config.get(sym).to_string();
        if same(&req.value, &actual) {
            continue;
        }
        let why = explain(sym, &req.value, &actual, final_config, kconfig);
        out.push(Dropped {
            symbol: sym.clone(),
            requested: req.value.clone(),
            actual,
            fragment: req.fragment.clone(),
            line: req.line,
            why,
        });
    }
    out
}

fn explain(sym: &str, requested: &str, actual: &str, cfg: &Config, k: &Kconfig) -> Why {
    let Some(defs) = k.defs.get(sym) else {
        return Why::Unknown;
    };
    let want = match requested {
        "y" => Tri::Y,
        "m" => Tri::M,
        "n" => Tri::N,
        _ => Tri::Y,
    };
    let actual_tri = match actual {
        "y" => Tri::Y,
        "m" => Tri::M,
        _ => Tri::N,
    };
    let active_selectors = |k: &Kconfig| -> Vec<String> {
        k.selects
            .get(sym)
            .map(|v| {
                v.iter()
                    .filter(|s| {
                        cfg.tri(&s.by) != Tri::N
                            && s.cond.as_ref().is_none_or(|c| c.eval(cfg) != Tri::N)
                    })
                    .map(|s| format!("{}={}", s.by, cfg.get(&s.by)))
                    .collect()
            })
            .unwrap_or_default()
    };
    if want < actual_tri {
        let by = active_selectors(k);
        if !by.is_empty() {
            return Why::Selected { by };
        }
    }
    if want > actual_tri || want == Tri::Y {
        // Unmet dependencies of the definition that fails the fewest.
        let unmet = k.unmet(sym, want, cfg);
        if let Some((_, failing)) = unmet
            .iter()
            .filter(|(_, f)| !f.is_empty())
            .min_by_key(|(_, f)| f.len())
            && unmet.iter().all(|(_, f)| !f.is_empty())
        {
            return Why::Depends(
                failing
                    .iter()
                    .map(|d| UnmetDep {
                        expr: d.expr.to_string(),
                        origin: match &d.origin {
                            Origin::Own => "its own `depends on`".into(),
                            Origin::Prompt => "its prompt's `if`".into(),
                            Origin::If { file, line } => format!("inside `if` at {file}:{line}"),
                            Origin::Menu { title, file, line } => {
                                format!("inside menu \"{title}\" at {file}:{line}")
                            }
                        },
                        values: d
                            .expr
                            .symbols()
                            .into_iter()
                            .map(|s| (s.clone(), cfg.get(&s).to_string()))
                            .collect(),
                    })
                    .collect(),
            );
        }
        if defs.iter().all(|d| !d.has_prompt) {
            let selected_by = k
                .selects
                .get(sym)
                .map(|v| v.iter().map(|s| s.by.clone()).collect())
                .unwrap_or_default();
            return Why::NoPrompt { selected_by };
        }
    }
    Why::Other
}

/// The report for a failed verification: one line per dropped value.
pub fn report(dropped: &[Dropped]) -> String {
    let mut s = format!(
        "{} kernel option{} from the fragments did not survive `make olddefconfig`:\n",
        dropped.len(),
        if dropped.len() == 1 { "" } else { "s" }
    );
    for d in dropped {
        s.push_str(&format!("  - {d}\n"));
    }
    s.push_str("Enable what they depend on in a fragment (or pick a defconfig that has it), or remove the option.");
    s
}
