//! A crate's floor plan held: the fenced block ```` ```floors <dir> ```` in
//! docs/architecture.md lists each floor's modules, and every `use crate::`,
//! `use super::` and inline `crate::`/`super::` path of production code (test
//! modules left out) must go from a module to one on a lower floor, never
//! across or up. A module with no floor, or an arrow the wrong way, is
//! reported with the file and line it is written on.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Module name → floor, from the fenced block whose info string is
/// `floors <dir>` in the markdown text.
pub fn floors(markdown: &str, dir: &str) -> BTreeMap<String, usize> {
    let fence = format!("```floors {dir}\n");
    let start = markdown
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```floors {dir} block in docs/architecture.md"))
        + fence.len();
    let block = &markdown[start..start + markdown[start..].find("```").unwrap()];
    let mut out = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (floor, modules) = line.split_once(':').expect("a floor line is `N: modules`");
        let floor: usize = floor.trim().parse().expect("a floor is a number");
        for m in modules.split_whitespace() {
            assert!(
                out.insert(m.to_string(), floor).is_none(),
                "{m} is on two floors"
            );
        }
    }
    out
}

/// Production code of one file: comments blanked and `#[cfg(test)]` items
/// (a `mod` block, a `mod x;`, a `use`) blanked, line numbers kept.
fn production(src: &str) -> String {
    let mut text: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(at) = text.find("#[cfg(test)]") {
        let rest = &text[at..];
        let end = match (rest.find(';'), rest.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => at + semi + 1,
            (_, Some(brace)) => {
                let mut depth = 0;
                let mut end = text.len();
                for (i, c) in text[at + brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + brace + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(semi), None) => at + semi + 1,
            (None, None) => text.len(),
        };
        let blank: String = text[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        text.replace_range(at..end, &blank);
    }
    text
}

/// The module path of a file under `root`: `kernel/build/cache.rs` is
/// `kernel::build::cache`, `kernel/mod.rs` is `kernel`, `lib.rs` the root.
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The top-level modules a piece of production code names, each with its
/// line: `crate::x`, `super::…::x` resolved against `module`, and the
/// members of `use crate::{x, y::z}` groups.
fn arrows(code: &str, module: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident_start = |i: usize| {
        i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':')
    };
    let line_of = |i: usize| code[..i].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        if !ident_start(i) {
            continue;
        }
        let after = &code[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 0;
            let mut item = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item = true,
                    c if item && (c.is_ascii_alphabetic() || c == '_') => {
                        out.push((line_of(i), ident(&group[j..])));
                        item = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push((line_of(i), ident(after)));
        }
    }
    for (i, _) in code.match_indices("super::") {
        if !ident_start(i) {
            continue;
        }
        let mut base = module.to_vec();
        let mut after = &code[i..];
        while let Some(rest) = after.strip_prefix("super::") {
            base.pop();
            after = rest;
        }
        let name = match base.first() {
            Some(top) => top.clone(),
            None => ident(after),
        };
        out.push((line_of(i), name));
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every arrow that breaks the plan, as `file:line: message`.
pub fn violations(root: &Path, floors: &BTreeMap<String, usize>, skip: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let mut out = Vec::new();
    let mut unplaced = std::collections::BTreeSet::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if skip.contains(&rel.as_str()) {
            continue;
        }
        let module = module_path(root, &file);
        let Some(top) = module.first() else { continue };
        let Some(&floor) = floors.get(top) else {
            if !unplaced.insert(top.clone()) {
                continue;
            }
            out.push(format!(
                "{}: module `{top}` is on no floor: add it to docs/architecture.md's floors",
                file.display()
            ));
            continue;
        };
        let code = production(&fs::read_to_string(&file).unwrap());
        for (line, target) in arrows(&code, &module) {
            if target == *top {
                continue;
            }
            match floors.get(&target) {
                Some(&to) if to < floor => {}
                Some(&to) => out.push(format!(
                    "{}:{line}: `{top}` (floor {floor}) uses `{target}` (floor {to}): a module uses only lower floors",
                    file.display()
                )),
                None => out.push(format!(
                    "{}:{line}: `{top}` uses `{target}`, which is on no floor",
                    file.display()
                )),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backwards_arrow_fails_with_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        fs::create_dir_all(src.join("kernel")).unwrap();
        fs::write(src.join("lib.rs"), "pub mod board;\npub mod kernel;\n").unwrap();
        fs::write(
            src.join("board.rs"),
            "//! crate::kernel in a comment is no arrow\nuse serde::Deserialize;\n\npub fn f() -> usize {\n    crate::kernel::caps::N\n}\n#[cfg(test)]\nmod tests {\n    use crate::kernel::caps;\n}\n",
        )
        .unwrap();
        fs::write(
            src.join("kernel/mod.rs"),
            "pub mod caps;\nuse crate::{board, kernel::caps};\n",
        )
        .unwrap();
        fs::write(
            src.join("kernel/caps.rs"),
            "use super::super::board::Model;\nuse super::caps;\n",
        )
        .unwrap();
        let plan = "```floors src/\n1: kernel\n0: board\n```\n";
        assert_eq!(
            violations(src, &floors(plan, "src/"), &[]),
            vec![format!(
                "{}:5: `board` (floor 0) uses `kernel` (floor 1): a module uses only lower floors",
                src.join("board.rs").display()
            )]
        );
        let across = "```floors src/\n0: kernel board\n```\n";
        let found = violations(src, &floors(across, "src/"), &[]);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[1].ends_with("kernel/caps.rs:1: `kernel` (floor 0) uses `board` (floor 0): a module uses only lower floors"), "{found:?}");
        let missing = "```floors src/\n0: board\n```\n";
        assert!(
            violations(src, &floors(missing, "src/"), &[])
                .iter()
                .any(|v| v.ends_with(
                    "module `kernel` is on no floor: add it to docs/architecture.md's floors"
                )),
        );
    }
}
