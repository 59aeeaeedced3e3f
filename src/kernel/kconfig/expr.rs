//! A Kconfig expression, and how it reads back (`A && (B || !C)`).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Sym(String),
    /// A quoted string or a number.
    Const(String),
    /// A preprocessor macro such as `$(cc-option,-fstack-protector)`: a test
    /// of the toolchain that Kconfig ran and this reader cannot; taken as y.
    Macro(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn text(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn paren(e: &Expr, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match e {
                Expr::And(..) | Expr::Or(..) => write!(f, "({e})"),
                _ => write!(f, "{e}"),
            }
        }
        match self {
            Expr::Sym(s) => f.write_str(s),
            Expr::Const(c) | Expr::Macro(c) => f.write_str(c),
            Expr::Not(e) => {
                f.write_str("!")?;
                paren(e, f)
            }
            Expr::And(a, b) => {
                match **a {
                    Expr::Or(..) => paren(a, f)?,
                    _ => write!(f, "{a}")?,
                }
                f.write_str(" && ")?;
                match **b {
                    Expr::Or(..) => paren(b, f),
                    _ => write!(f, "{b}"),
                }
            }
            Expr::Or(a, b) => write!(f, "{a} || {b}"),
            Expr::Cmp(op, a, b) => write!(f, "{a}{}{b}", op.text()),
        }
    }
}
