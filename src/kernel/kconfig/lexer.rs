//! The tokens of a Kconfig expression.

use super::CmpOp;
use anyhow::{Result, bail};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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

pub(super) fn tokenize(s: &str) -> Result<Vec<Tok>> {
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
                let (text, end) = quoted(&b, i);
                out.push(Tok::Str(text));
                i = end;
            }
            '#' => break,
            '$' if b.get(i + 1) == Some(&'(') => {
                let end = macro_end(&b, i);
                out.push(Tok::Macro(b[i..end.min(b.len())].iter().collect()));
                i = end;
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

/// The text of the string quoted at `b[i]` (backslash escapes the next
/// character), and the index after its closing quote.
fn quoted(b: &[char], i: usize) -> (String, usize) {
    let q = b[i];
    let mut j = i + 1;
    let mut text = String::new();
    while j < b.len() && b[j] != q {
        if b[j] == '\\' && j + 1 < b.len() {
            j += 1;
        }
        text.push(b[j]);
        j += 1;
    }
    (text, j + 1)
}

/// The index after the `)` that closes the `$(` at `b[i]`, nested
/// parentheses included.
fn macro_end(b: &[char], i: usize) -> usize {
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
    j + 1
}
