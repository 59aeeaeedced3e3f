//! Reading a Kconfig tree: entries, the `if`/`menu`/`choice` blocks around
//! them, `source` statements, and help text skipped by indentation.

use super::parser::parse_expr;
use super::{Definition, Dependency, Expr, Kconfig, Origin, Select};
use std::path::Path;

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

/// A file loader: the text of a path relative to the tree's top.
type Load<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Where a line is, for definitions and warnings.
struct At<'a> {
    path: &'a str,
    line: usize,
}

/// Lines with `\`-continuations joined, each with its first line's number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
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
    lines
}

/// Help text: the lines after `help` indented at least as deep as its first
/// line (which may be level with `help` itself), and blank lines in
/// between. Returns the index of the first line after it.
fn skip_help(lines: &[(usize, String)], mut i: usize) -> usize {
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
    i
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

    fn file(&mut self, load: &Load, path: &str, arch: &str, stack: &mut Vec<Block>, depth: usize) {
        if depth > 64 {
            self.warnings
                .push(format!("{path}: `source` nested too deeply"));
            return;
        }
        let Some(text) = load(path) else {
            self.warnings.push(format!("cannot read {path}"));
            return;
        };
        let lines = logical_lines(&text);
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
            let at = At { path, line: n };
            match kw {
                "config" | "menuconfig" => cur = self.entry(rest, stack, &at),
                "choice" | "menu" | "if" => cur = self.open(kw, rest, stack, &at),
                "endchoice" | "endmenu" | "endif" => {
                    self.close(kw, stack, &at);
                    cur = Current::None;
                }
                "source" | "rsource" | "osource" | "orsource" => {
                    let optional = kw.starts_with('o');
                    match self.source_target(kw, rest, arch, &at) {
                        // An optional source that is absent is fine.
                        Some(t) if !(optional && load(&t).is_none()) => {
                            self.file(load, &t, arch, stack, depth + 1)
                        }
                        _ => {}
                    }
                    cur = Current::None;
                }
                "comment" | "mainmenu" => cur = Current::Other,
                "help" | "---help---" => i = skip_help(&lines, i),
                "depends" => self.depends(rest, &cur, stack, &at),
                "bool" | "tristate" | "string" | "int" | "hex" | "def_bool" | "def_tristate"
                | "prompt" | "boolean" => self.kind(kw, rest, &cur, &at),
                "select" => self.select(rest, &cur),
                _ => {}
            }
        }
    }

    /// A `config SYM` entry, under the blocks around it.
    fn entry(&mut self, rest: &str, stack: &[Block], at: &At) -> Current {
        let sym = rest.split_whitespace().next().unwrap_or("").to_string();
        let depends = inherited(stack);
        self.defs.entry(sym.clone()).or_default().push(Definition {
            file: at.path.to_string(),
            line: at.line,
            kind: None,
            has_prompt: false,
            depends,
        });
        let idx = self.defs[&sym].len() - 1;
        Current::Entry(sym, idx)
    }

    /// `choice`, `menu "title"` or `if EXPR`: a block its entries inherit
    /// dependencies from.
    fn open(&mut self, kw: &str, rest: &str, stack: &mut Vec<Block>, at: &At) -> Current {
        let (file, line) = (at.path.to_string(), at.line);
        match kw {
            "choice" => {
                stack.push(Block::Choice {
                    file,
                    line,
                    deps: vec![],
                });
                Current::Choice
            }
            "menu" => {
                let title = rest.trim_matches('"').to_string();
                stack.push(Block::Menu {
                    title,
                    file,
                    line,
                    deps: vec![],
                });
                Current::Menu
            }
            _ => {
                let expr = parse_expr(rest).unwrap_or_else(|e| {
                    self.warnings.push(format!("{file}:{line}: {e}"));
                    Expr::Sym("y".into())
                });
                stack.push(Block::If(Dependency {
                    expr,
                    origin: Origin::If { file, line },
                }));
                Current::None
            }
        }
    }

    fn close(&mut self, kw: &str, stack: &mut Vec<Block>, at: &At) {
        let want: fn(&Block) -> bool = match kw {
            "endchoice" => |b| matches!(b, Block::Choice { .. }),
            "endmenu" => |b| matches!(b, Block::Menu { .. }),
            _ => |b| matches!(b, Block::If(_)),
        };
        pop(stack, want, &mut self.warnings, at.path, at.line, kw);
    }

    /// The file a `source "file"` line reads in place, inside the current
    /// blocks (`rsource`: relative to this file; `osource`: optional); `None`
    /// when its name needs macros this reader does not expand.
    fn source_target(&mut self, kw: &str, rest: &str, arch: &str, at: &At) -> Option<String> {
        let dir = at
            .path
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default();
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
                self.warnings.push(format!(
                    "{}:{}: cannot follow `{kw} {rest}`",
                    at.path, at.line
                ));
            }
            return None;
        }
        Some(target)
    }

    /// `depends on EXPR`, for the entry, menu or choice it follows.
    fn depends(&mut self, rest: &str, cur: &Current, stack: &mut [Block], at: &At) {
        let expr_text = rest.strip_prefix("on").map(str::trim).unwrap_or(rest);
        let expr = match parse_expr(expr_text) {
            Ok(e) => e,
            Err(e) => {
                self.warnings.push(format!("{}:{}: {e}", at.path, at.line));
                return;
            }
        };
        match cur {
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

    /// A type line (`tristate "prompt" if COND`, `def_bool y`) or `prompt`:
    /// the entry's kind, whether it has a prompt, and the prompt's condition.
    fn kind(&mut self, kw: &str, rest: &str, cur: &Current, at: &At) {
        let Current::Entry(sym, idx) = cur else {
            return;
        };
        let (has_prompt, cond) = if kw.starts_with("def_") {
            (false, None)
        } else {
            prompt_condition(rest)
        };
        let cond = cond.map(parse_expr);
        if let Some(d) = self.defs.get_mut(sym).and_then(|v| v.get_mut(*idx)) {
            if kw != "prompt" {
                d.kind = Some(kw.trim_start_matches("def_").replace("boolean", "bool"));
            }
            d.has_prompt |= has_prompt;
            match cond {
                Some(Ok(expr)) => d.depends.push(Dependency {
                    expr,
                    origin: Origin::Prompt,
                }),
                Some(Err(e)) => self.warnings.push(format!("{}:{}: {e}", at.path, at.line)),
                None => {}
            }
        }
    }

    /// `select SYM if COND` in an entry.
    fn select(&mut self, rest: &str, cur: &Current) {
        if let Current::Entry(by, _) = cur {
            let (target, cond) = select_target(rest);
            let cond = cond.and_then(|c| parse_expr(c).ok());
            self.selects.entry(target).or_default().push(Select {
                by: by.clone(),
                cond,
            });
        }
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
