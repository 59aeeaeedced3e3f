//! Expressions evaluated against a `.config` with Kconfig's tristate logic.

use super::{CmpOp, Config, Expr, Tri};

fn number(s: &str) -> Option<i128> {
    let s = s.trim_matches('"');
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

impl Expr {
    /// The value of a symbol or constant as text, for comparisons.
    fn text<'c>(&'c self, cfg: &'c Config) -> String {
        match self {
            Expr::Sym(s) if s == "y" || s == "m" || s == "n" => s.clone(),
            Expr::Sym(s) => cfg.get(s).trim_matches('"').to_string(),
            Expr::Const(c) => c.trim_matches('"').to_string(),
            Expr::Macro(_) => "y".to_string(),
            other => match other.eval(cfg) {
                Tri::Y => "y".into(),
                Tri::M => "m".into(),
                Tri::N => "n".into(),
            },
        }
    }

    pub fn eval(&self, cfg: &Config) -> Tri {
        match self {
            Expr::Sym(s) => match s.as_str() {
                "y" => Tri::Y,
                "m" => Tri::M,
                "n" => Tri::N,
                _ => cfg.tri(s),
            },
            Expr::Const(c) => Tri::from_value(c.trim_matches('"')),
            Expr::Macro(_) => Tri::Y,
            Expr::Not(e) => match e.eval(cfg) {
                Tri::Y => Tri::N,
                Tri::M => Tri::M,
                Tri::N => Tri::Y,
            },
            Expr::And(a, b) => a.eval(cfg).min(b.eval(cfg)),
            Expr::Or(a, b) => a.eval(cfg).max(b.eval(cfg)),
            Expr::Cmp(op, a, b) => {
                let (x, y) = (a.text(cfg), b.text(cfg));
                let ord = match (number(&x), number(&y)) {
                    (Some(p), Some(q)) => p.cmp(&q),
                    _ => x.cmp(&y),
                };
                let r = match op {
                    CmpOp::Eq => ord.is_eq(),
                    CmpOp::Ne => ord.is_ne(),
                    CmpOp::Lt => ord.is_lt(),
                    CmpOp::Le => ord.is_le(),
                    CmpOp::Gt => ord.is_gt(),
                    CmpOp::Ge => ord.is_ge(),
                };
                if r { Tri::Y } else { Tri::N }
            }
        }
    }

    /// Every symbol named in the expression, in order, without duplicates.
    pub fn symbols(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<String>) {
        match self {
            Expr::Sym(s) => {
                if !["y", "m", "n"].contains(&s.as_str()) && !out.contains(s) {
                    out.push(s.clone());
                }
            }
            Expr::Const(_) | Expr::Macro(_) => {}
            Expr::Not(e) => e.collect(out),
            Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }
}
