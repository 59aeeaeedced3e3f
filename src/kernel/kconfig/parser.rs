//! Kconfig expressions parsed by precedence: `||` below `&&` below `!` and
//! comparisons.

use super::Expr;
use super::lexer::{Tok, tokenize};
use anyhow::{Result, bail};

/// Parses a Kconfig expression (`A && (B || !C)`, `X = "y"`, `FOO != 0`).
pub fn parse_expr(s: &str) -> Result<Expr> {
    let toks = tokenize(s)?;
    let mut p = Parser {
        toks: &toks,
        at: 0,
        src: s,
    };
    let e = p.or()?;
    if p.at != toks.len() {
        bail!("trailing input in Kconfig expression `{s}`");
    }
    Ok(e)
}

struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    src: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn or(&mut self) -> Result<Expr> {
        let mut e = self.and()?;
        while self.peek() == Some(&Tok::Or) {
            self.at += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr> {
        let mut e = self.unary()?;
        while self.peek() == Some(&Tok::And) {
            self.at += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }
    fn unary(&mut self) -> Result<Expr> {
        if self.peek() == Some(&Tok::Not) {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        let left = self.atom()?;
        if let Some(Tok::Cmp(op)) = self.peek().cloned() {
            self.at += 1;
            let right = self.atom()?;
            return Ok(Expr::Cmp(op, Box::new(left), Box::new(right)));
        }
        Ok(left)
    }
    fn atom(&mut self) -> Result<Expr> {
        match self.toks.get(self.at).cloned() {
            Some(Tok::Open) => {
                self.at += 1;
                let e = self.or()?;
                if self.peek() != Some(&Tok::Close) {
                    bail!("missing `)` in Kconfig expression `{}`", self.src);
                }
                self.at += 1;
                Ok(e)
            }
            Some(Tok::Word(w)) => {
                self.at += 1;
                let numeric = w
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == '-');
                Ok(if numeric {
                    Expr::Const(w)
                } else {
                    Expr::Sym(w)
                })
            }
            Some(Tok::Str(s)) => {
                self.at += 1;
                Ok(Expr::Const(format!("\"{s}\"")))
            }
            Some(Tok::Macro(m)) => {
                self.at += 1;
                Ok(Expr::Macro(m))
            }
            other => bail!("unexpected {other:?} in Kconfig expression `{}`", self.src),
        }
    }
}
