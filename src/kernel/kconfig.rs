//! Just enough of Kconfig to explain why `make olddefconfig` dropped an
//! option: where each symbol is defined, what it depends on (its own
//! `depends on`, prompt conditions, and the enclosing `if`/`menu`/`choice`
//! blocks across `source` statements), and who `select`s it. Expressions are
//! evaluated against a `.config` with Kconfig's tristate logic (n=0, m=1,
//! y=2; `&&` is min, `||` is max, `!x` is 2-x).
//!
//! The kernel's own `scripts/kconfig` decides the values; this module only
//! explains them, so it errs on the side of reading too much (e.g. help
//! text is skipped by indentation, as Kconfig does).

use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A tristate value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tri {
    N = 0,
    M = 1,
    Y = 2,
}

impl Tri {
    fn from_value(v: &str) -> Tri {
        match v {
            "y" => Tri::Y,
            "m" => Tri::M,
            _ => Tri::N,
        }
    }
}

/// The values of a `.config` file: `CONFIG_X=v` lines; `# CONFIG_X is not
/// set` and absent symbols read as `n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub values: BTreeMap<String, String>,
}

impl Config {
    pub fn parse(text: &str) -> Config {
        let mut values = BTreeMap::new();
        for line in text.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("# CONFIG_") {
                if let Some(sym) = rest.strip_suffix(" is not set") {
                    values.insert(sym.to_string(), "n".to_string());
                }
            } else if let Some(rest) = l.strip_prefix("CONFIG_")
                && let Some((k, v)) = rest.split_once('=')
            {
                values.insert(k.to_string(), v.to_string());
            }
        }
        Config { values }
    }

    /// The value as written (`y`, `m`, `"text"`, `32`), `n` when unset.
    pub fn get(&self, sym: &str) -> &str {
        self.values.get(sym).map(String::as_str).unwrap_or("n")
    }

    pub fn tri(&self, sym: &str) -> Tri {
        Tri::from_value(self.get(sym))
    }
}

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Macro(String),
    Str(String),
    Not,
    And,
    Or,
    Open,
    Close,
    Cmp(CmpOp),
}

fn tokenize(s: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            ' ' | '\t' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            '&' if b.get(i + 1) == Some(&'&') => {
                out.push(Tok::And);
                i += 2
            }
            '|' if b.get(i + 1) == Some(&'|') => {
                out.push(Tok::Or);
                i += 2
            }
            '!' if b.get(i + 1) == Some(&'=') => {
                out.push(Tok::Cmp(CmpOp::Ne));
                i += 2
            }
            '!' => {
                out.push(Tok::Not);
                i += 1
            }
            '=' => {
                out.push(Tok::Cmp(CmpOp::Eq));
                i += 1
            }
            '<' | '>' => {
                let eq = b.get(i + 1) == Some(&'=');
                out.push(Tok::Cmp(match (c, eq) {
                    ('<', false) => CmpOp::Lt,
                    ('<', true) => CmpOp::Le,
                    ('>', false) => CmpOp::Gt,
                    _ => CmpOp::Ge,
                }));
                i += if eq { 2 } else { 1 };
            }
            '"' | '\'' => {
                let mut j = i + 1;
                let mut text = String::new();
                while j < b.len() && b[j] != c {
                    if b[j] == '\\' && j + 1 < b.len() {
                        j += 1;
                    }
                    text.push(b[j]);
                    j += 1;
                }
                out.push(Tok::Str(text));
                i = j + 1;
            }
            '#' => break,
            '$' if b.get(i + 1) == Some(&'(') => {
                let mut j = i + 1;
                let mut depth = 0;
                while j < b.len() {
                    match b[j] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                out.push(Tok::Macro(b[i..(j + 1).min(b.len())].iter().collect()));
                i = j + 1;
            }
            _ => {
                let mut j = i;
                let mut word = String::new();
                while j < b.len() && !" \t()&|!=<>\"'#".contains(b[j]) {
                    word.push(b[j]);
                    j += 1;
                }
                if word.is_empty() {
                    bail!("unexpected `{c}` in Kconfig expression `{s}`");
                }
                out.push(Tok::Word(word));
                i = j;
            }
        }
    }
    Ok(out)
}

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

#[derive(Debug, Clone)]
enum Block {
    If(Dependency),
    Menu {
        title: String,
        file: String,
        line: usize,
        deps: Vec<Expr>,
    },
    Choice {
        file: String,
        line: usize,
        deps: Vec<Expr>,
    },
}

/// What the current line's keywords attach to.
enum Current {
    None,
    Entry(String, usize),
    Menu,
    Choice,
    Other,
}

fn indent(line: &str) -> usize {
    let mut n = 0;
    for c in line.chars() {
        match c {
            ' ' => n += 1,
            '\t' => n = (n / 8 + 1) * 8,
            _ => break,
        }
    }
    n
}

/// The first word and the rest of a trimmed line.
fn split_word(l: &str) -> (&str, &str) {
    match l.find(char::is_whitespace) {
        Some(i) => (&l[..i], l[i..].trim()),
        None => (l, ""),
    }
}

/// Splits `"prompt text" if EXPR` into (had a prompt, condition).
fn prompt_condition(rest: &str) -> (bool, Option<&str>) {
    let rest = rest.trim();
    if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                let after = rest[i + 1..].trim();
                return (
                    true,
                    after
                        .strip_prefix("if")
                        .map(str::trim)
                        .filter(|s| !s.is_empty()),
                );
            }
        }
        return (true, None);
    }
    (false, None)
}

/// `SYM if COND` of a select/imply line.
fn select_target(rest: &str) -> (String, Option<&str>) {
    let (sym, after) = split_word(rest);
    let cond = after
        .strip_prefix("if")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    (sym.to_string(), cond)
}

impl Kconfig {
    /// Reads the tree at `srctree` from its top-level `Kconfig`, following
    /// `source` statements with `$(SRCARCH)`/`$(ARCH)` set to `arch`.
    pub fn read_tree(srctree: &Path, arch: &str) -> Kconfig {
        let load = |p: &str| std::fs::read_to_string(srctree.join(p)).ok();
        Kconfig::load(&load, "Kconfig", arch)
    }

    /// The same over any file loader (tests use an in-memory tree).
    pub fn load(load: &dyn Fn(&str) -> Option<String>, root: &str, arch: &str) -> Kconfig {
        let mut k = Kconfig::default();
        let mut stack = Vec::new();
        k.file(load, root, arch, &mut stack, 0);
        if !stack.is_empty() {
            k.warnings.push(format!(
                "{} unclosed if/menu/choice block(s) at the end of {root}",
                stack.len()
            ));
        }
        k
    }

    fn file(
        &mut self,
        load: &dyn Fn(&str) -> Option<String>,
        path: &str,
        arch: &str,
        stack: &mut Vec<Block>,
        depth: usize,
    ) {
        if depth > 64 {
            self.warnings
                .push(format!("{path}: `source` nested too deeply"));
            return;
        }
        let Some(text) = load(path) else {
            self.warnings.push(format!("cannot read {path}"));
            return;
        };
        let dir = path
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default();
        // Join continuation lines, keeping the first line's number.
        let mut lines: Vec<(usize, String)> = Vec::new();
        let mut pending: Option<(usize, String)> = None;
        for (i, raw) in text.lines().enumerate() {
            let (n, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
            acc.push_str(raw);
            if acc.ends_with('\\') {
                acc.pop();
                pending = Some((n, acc));
            } else {
                lines.push((n, acc));
            }
        }
        if let Some(p) = pending {
            lines.push(p);
        }

        let mut cur = Current::None;
        let mut i = 0;
        while i < lines.len() {
            let (n, ref raw) = lines[i];
            i += 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (kw, rest) = split_word(l);
            match kw {
                "config" | "menuconfig" => {
                    let sym = rest.split_whitespace().next().unwrap_or("").to_string();
                    let depends = inherited(stack);
                    self.defs.entry(sym.clone()).or_default().push(Definition {
                        file: path.to_string(),
                        line: n,
                        kind: None,
                        has_prompt: false,
                        depends,
                    });
                    let idx = self.defs[&sym].len() - 1;
                    cur = Current::Entry(sym, idx);
                }
                "choice" => {
                    stack.push(Block::Choice {
                        file: path.to_string(),
                        line: n,
                        deps: vec![],
                    });
                    cur = Current::Choice;
                }
                "endchoice" => {
                    pop(
                        stack,
                        |b| matches!(b, Block::Choice { .. }),
                        &mut self.warnings,
                        path,
                        n,
                        kw,
                    );
                    cur = Current::None;
                }
                "menu" => {
                    let title = rest.trim_matches('"').to_string();
                    stack.push(Block::Menu {
                        title,
                        file: path.to_string(),
                        line: n,
                        deps: vec![],
                    });
                    cur = Current::Menu;
                }
                "endmenu" => {
                    pop(
                        stack,
                        |b| matches!(b, Block::Menu { .. }),
                        &mut self.warnings,
                        path,
                        n,
                        kw,
                    );
                    cur = Current::None;
                }
                "if" => {
                    match parse_expr(rest) {
                        Ok(expr) => stack.push(Block::If(Dependency {
                            expr,
                            origin: Origin::If {
                                file: path.to_string(),
                                line: n,
                            },
                        })),
                        Err(e) => {
                            self.warnings.push(format!("{path}:{n}: {e}"));
                            stack.push(Block::If(Dependency {
                                expr: Expr::Sym("y".into()),
                                origin: Origin::If {
                                    file: path.to_string(),
                                    line: n,
                                },
                            }));
                        }
                    }
                    cur = Current::None;
                }
                "endif" => {
                    pop(
                        stack,
                        |b| matches!(b, Block::If(_)),
                        &mut self.warnings,
                        path,
                        n,
                        kw,
                    );
                    cur = Current::None;
                }
                "source" | "rsource" | "osource" | "orsource" => {
                    let mut target = rest
                        .trim()
                        .trim_matches('"')
                        .replace("$(SRCARCH)", arch)
                        .replace("$(ARCH)", arch);
                    if kw.starts_with("rs") || kw.starts_with("ors") {
                        target = if dir.is_empty() {
                            target
                        } else {
                            format!("{dir}/{target}")
                        };
                    }
                    if target.contains("$(") || target.contains('*') {
                        if !kw.starts_with('o') {
                            self.warnings
                                .push(format!("{path}:{n}: cannot follow `{kw} {rest}`"));
                        }
                    } else if kw.starts_with('o') && load(&target).is_none() {
                        // optional source, absent: fine
                    } else {
                        self.file(load, &target, arch, stack, depth + 1);
                    }
                    cur = Current::None;
                }
                "comment" | "mainmenu" => cur = Current::Other,
                "help" | "---help---" => {
                    // Help text: the following lines indented at least as deep
                    // as its first line (which may be level with `help`
                    // itself), and blank lines in between.
                    let mut first: Option<usize> = None;
                    while i < lines.len() {
                        let t = &lines[i].1;
                        if t.trim().is_empty() {
                            i += 1;
                            continue;
                        }
                        let ind = indent(t);
                        match first {
                            None => {
                                if ind == 0 {
                                    break;
                                }
                                first = Some(ind);
                            }
                            Some(f) if ind < f => break,
                            _ => {}
                        }
                        i += 1;
                    }
                }
                "depends" => {
                    let expr_text = rest.strip_prefix("on").map(str::trim).unwrap_or(rest);
                    let expr = match parse_expr(expr_text) {
                        Ok(e) => e,
                        Err(e) => {
                            self.warnings.push(format!("{path}:{n}: {e}"));
                            continue;
                        }
                    };
                    match &cur {
                        Current::Entry(sym, idx) => {
                            if let Some(d) = self.defs.get_mut(sym).and_then(|v| v.get_mut(*idx)) {
                                d.depends.push(Dependency {
                                    expr,
                                    origin: Origin::Own,
                                });
                            }
                        }
                        Current::Menu => {
                            if let Some(Block::Menu { deps, .. }) = stack.last_mut() {
                                deps.push(expr);
                            }
                        }
                        Current::Choice => {
                            if let Some(Block::Choice { deps, .. }) = stack.last_mut() {
                                deps.push(expr);
                            }
                        }
                        _ => {}
                    }
                }
                "bool" | "tristate" | "string" | "int" | "hex" | "def_bool" | "def_tristate"
                | "prompt" | "boolean" => {
                    if let Current::Entry(sym, idx) = &cur {
                        let (has_prompt, cond) = if kw.starts_with("def_") {
                            (false, None)
                        } else {
                            prompt_condition(rest)
                        };
                        let cond = cond.map(parse_expr);
                        if let Some(d) = self.defs.get_mut(sym).and_then(|v| v.get_mut(*idx)) {
                            if kw != "prompt" {
                                d.kind =
                                    Some(kw.trim_start_matches("def_").replace("boolean", "bool"));
                            }
                            d.has_prompt |= has_prompt;
                            match cond {
                                Some(Ok(expr)) => d.depends.push(Dependency {
                                    expr,
                                    origin: Origin::Prompt,
                                }),
                                Some(Err(e)) => self.warnings.push(format!("{path}:{n}: {e}")),
                                None => {}
                            }
                        }
                    }
                }
                "select" | "imply" => {
                    if let (Current::Entry(by, _), "select") = (&cur, kw) {
                        let (target, cond) = select_target(rest);
                        let cond = cond.and_then(|c| parse_expr(c).ok());
                        self.selects.entry(target).or_default().push(Select {
                            by: by.clone(),
                            cond,
                        });
                    }
                }
                _ => {}
            }
        }
    }

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

fn inherited(stack: &[Block]) -> Vec<Dependency> {
    let mut out = Vec::new();
    for b in stack {
        match b {
            Block::If(d) => out.push(d.clone()),
            Block::Menu {
                title,
                file,
                line,
                deps,
            } => {
                for e in deps {
                    out.push(Dependency {
                        expr: e.clone(),
                        origin: Origin::Menu {
                            title: title.clone(),
                            file: file.clone(),
                            line: *line,
                        },
                    });
                }
            }
            Block::Choice { file, line, deps } => {
                for e in deps {
                    out.push(Dependency {
                        expr: e.clone(),
                        origin: Origin::Menu {
                            title: "choice".into(),
                            file: file.clone(),
                            line: *line,
                        },
                    });
                }
            }
        }
    }
    out
}

fn pop(
    stack: &mut Vec<Block>,
    want: impl Fn(&Block) -> bool,
    warnings: &mut Vec<String>,
    path: &str,
    n: usize,
    kw: &str,
) {
    match stack.last() {
        Some(b) if want(b) => {
            stack.pop();
        }
        _ => warnings.push(format!("{path}:{n}: `{kw}` without its opening block")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        Config::parse(text)
    }

    #[test]
    fn config_reads_set_unset_and_absent() {
        let c =
            cfg("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=m\nCONFIG_S=\"x y\"\nCONFIG_N=32\n");
        assert_eq!(c.tri("A"), Tri::Y);
        assert_eq!(c.tri("B"), Tri::N);
        assert_eq!(c.tri("C"), Tri::M);
        assert_eq!(c.tri("Z"), Tri::N);
        assert_eq!(c.get("S"), "\"x y\"");
        assert_eq!(c.get("N"), "32");
    }

    #[test]
    fn expressions_use_tristate_logic() {
        let c = cfg("CONFIG_A=y\nCONFIG_B=m\nCONFIG_N=32\nCONFIG_S=\"abc\"\n");
        let ev = |s: &str| parse_expr(s).unwrap().eval(&c);
        assert_eq!(ev("A && B"), Tri::M);
        assert_eq!(ev("A || C"), Tri::Y);
        assert_eq!(ev("!B"), Tri::M);
        assert_eq!(ev("!C && (A || B)"), Tri::Y);
        assert_eq!(ev("B = m"), Tri::Y);
        assert_eq!(ev("B != y"), Tri::Y);
        assert_eq!(ev("N >= 16"), Tri::Y);
        assert_eq!(ev("N < 0x10"), Tri::N);
        assert_eq!(ev("S = \"abc\""), Tri::Y);
        assert_eq!(ev("ARCH_X || COMPILE_TEST"), Tri::N);
        assert_eq!(
            parse_expr("A && (B || !C)").unwrap().symbols(),
            vec!["A", "B", "C"]
        );
        assert_eq!(
            parse_expr("A && (B || !C)").unwrap().to_string(),
            "A && (B || !C)"
        );
    }

    #[test]
    fn macros_are_taken_as_true_and_kept_for_display() {
        let e = parse_expr("$(cc-option,-ffunction-sections -fdata-sections) && A").unwrap();
        assert_eq!(
            e.to_string(),
            "$(cc-option,-ffunction-sections -fdata-sections) && A"
        );
        assert_eq!(e.symbols(), vec!["A"]);
        assert_eq!(e.eval(&cfg("CONFIG_A=y\n")), Tri::Y);
        let e = parse_expr("$(success,$(NM) --help | head -n 1 | grep -qi llvm)").unwrap();
        assert_eq!(e.eval(&cfg("")), Tri::Y);
    }

    #[test]
    fn bad_expressions_are_errors() {
        assert!(parse_expr("A && (B").is_err());
        assert!(parse_expr("A B").is_err());
    }

    fn tree(files: &[(&str, &str)]) -> Kconfig {
        let files: BTreeMap<String, String> = files
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Kconfig::load(&|p: &str| files.get(p).cloned(), "Kconfig", "arm64")
    }

    #[test]
    fn dependencies_come_from_the_entry_its_blocks_and_sourced_files() {
        let k = tree(&[
            (
                "Kconfig",
                "mainmenu \"x\"\nsource \"drivers/Kconfig\"\nsource \"arch/$(SRCARCH)/Kconfig\"\n",
            ),
            (
                "arch/arm64/Kconfig",
                "config ARM64\n\tdef_bool y\n\tselect OF\n",
            ),
            (
                "drivers/Kconfig",
                "menu \"Device Drivers\"\n\tdepends on HAS_IOMEM\n\nmenuconfig ATA\n\ttristate \"ATA\"\n\tdepends on BLOCK\n\thelp\n\t  This text says depends on NOTHING\n\t  and config FAKE.\n\nif ATA\nconfig LEVEL_HELP\n\tbool \"x\"\n\thelp\n\tHelp level with the keyword:\n\tsource to the driver, if you have one.\n\nconfig SATA_AHCI\n\ttristate \"AHCI\"\n\tdepends on PCI\n\tselect SATA_HOST\nconfig HIDDEN\n\tbool\n\tdefault y if PCI\nconfig COND_PROMPT\n\tbool \"cond\" if EXPERT\nendif\nendmenu\n",
            ),
        ]);
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);
        assert!(!k.defs.contains_key("FAKE"), "help text must be skipped");
        let ahci = &k.defs["SATA_AHCI"][0];
        assert_eq!(ahci.file, "drivers/Kconfig");
        assert_eq!(ahci.line, 18);
        assert!(ahci.has_prompt);
        let deps: Vec<String> = ahci.depends.iter().map(|d| d.expr.to_string()).collect();
        assert_eq!(deps, vec!["HAS_IOMEM", "ATA", "PCI"]);
        assert!(
            matches!(ahci.depends[0].origin, Origin::Menu { ref title, .. } if title == "Device Drivers")
        );
        assert!(matches!(
            ahci.depends[1].origin,
            Origin::If { line: 11, .. }
        ));
        assert!(matches!(ahci.depends[2].origin, Origin::Own));
        assert!(!k.defs["HIDDEN"][0].has_prompt);
        assert_eq!(
            k.defs["COND_PROMPT"][0].depends.last().unwrap().origin,
            Origin::Prompt
        );
        assert_eq!(k.selects["SATA_HOST"][0].by, "SATA_AHCI");
        assert_eq!(k.selects["OF"][0].by, "ARM64");
        let ata = &k.defs["ATA"][0];
        assert_eq!(
            ata.depends
                .iter()
                .map(|d| d.expr.to_string())
                .collect::<Vec<_>>(),
            vec!["HAS_IOMEM", "BLOCK"]
        );

        let c = cfg("CONFIG_HAS_IOMEM=y\nCONFIG_BLOCK=y\nCONFIG_ATA=m\n");
        let unmet = k.unmet("SATA_AHCI", Tri::M, &c);
        assert_eq!(
            unmet[0]
                .1
                .iter()
                .map(|d| d.expr.to_string())
                .collect::<Vec<_>>(),
            vec!["PCI"]
        );
    }

    #[test]
    fn unbalanced_blocks_and_missing_files_are_warnings_not_failures() {
        let k = tree(&[(
            "Kconfig",
            "source \"missing/Kconfig\"\nosource \"also/missing\"\nendif\nconfig A\n\tbool \"a\"\n",
        )]);
        assert_eq!(k.warnings.len(), 2, "{:?}", k.warnings);
        assert!(k.defs.contains_key("A"));
    }
}
