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

/// The sibling files a file of a directory module names: `super::x` and
/// `crate::<its module>::x`, single or in a `{...}` group, where `x` is
/// another file or directory beside it (not `mod.rs`, whose items every
/// child may use).
fn sibling_arrows(code: &str, parent: &[String], siblings: &[String]) -> Vec<(usize, String)> {
    let line_of = |i: usize| code[..i].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut prefixes = vec!["super::".to_string()];
    if !parent.is_empty() {
        prefixes.push(format!("crate::{}::", parent.join("::")));
    }
    let mut out = Vec::new();
    for prefix in &prefixes {
        for (i, _) in code.match_indices(prefix.as_str()) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let after = &code[i + prefix.len()..];
            let names: Vec<String> = match after.strip_prefix('{') {
                Some(group) => {
                    let mut names = Vec::new();
                    let mut depth = 0;
                    let mut start = 0;
                    for (j, c) in group.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => {
                                names.push(ident(&group[start..j]));
                                break;
                            }
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                names.push(ident(&group[start..j]));
                                start = j + 1;
                            }
                            _ => {}
                        }
                    }
                    names
                }
                None => vec![ident(after)],
            };
            for name in names {
                if siblings.contains(&name) {
                    out.push((line_of(i), name));
                }
            }
        }
    }
    out
}

/// Every cycle among the files of one directory module (`care/grow.rs`
/// uses `replace`, which uses `grow`), as `dir: a → b → a (file:line, ...)`.
/// Files beside each other may lean on one another one way only; what both
/// need goes into the module's `mod.rs` or a file of its own.
pub fn file_cycles(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let mut by_dir: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        if name != "mod" && name != "lib" && name != "main" {
            by_dir
                .entry(file.parent().unwrap().to_path_buf())
                .or_default()
                .push(file);
        }
    }
    let mut out = Vec::new();
    for (dir, files) in by_dir {
        let mut siblings: Vec<String> = files
            .iter()
            .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                siblings.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        let parent = module_path(root, &dir.join("mod.rs"));
        let mut edges: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
        for file in &files {
            let me = file.file_stem().unwrap().to_string_lossy().into_owned();
            let code = production(&fs::read_to_string(file).unwrap());
            for (line, to) in sibling_arrows(&code, &parent, &siblings) {
                if to != me {
                    edges.entry(me.clone()).or_default().push((to, line));
                }
            }
        }
        let rel = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
        let mut seen = std::collections::BTreeSet::new();
        for start in edges.keys() {
            let mut path = vec![start.clone()];
            if let Some(cycle) = find_cycle(&edges, &mut path)
                && seen.insert(canonical(&cycle))
            {
                let hops: Vec<String> = cycle
                    .windows(2)
                    .map(|w| {
                        let line = edges[&w[0]].iter().find(|(t, _)| *t == w[1]).unwrap().1;
                        format!("{rel}/{}.rs:{line}", w[0])
                    })
                    .collect();
                out.push(format!(
                    "{rel}: {} ({}): files beside each other lean on one another one way only",
                    cycle.join(" → "),
                    hops.join(", ")
                ));
            }
        }
    }
    out
}

fn find_cycle(
    edges: &BTreeMap<String, Vec<(String, usize)>>,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let last = path.last().unwrap().clone();
    for (next, _) in edges.get(&last).into_iter().flatten() {
        if *next == path[0] {
            let mut cycle = path.clone();
            cycle.push(next.clone());
            return Some(cycle);
        }
        if !path.contains(next) {
            path.push(next.clone());
            if let Some(c) = find_cycle(edges, path) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

/// A cycle's members sorted, so each cycle is said once.
fn canonical(cycle: &[String]) -> Vec<String> {
    let mut members = cycle[..cycle.len() - 1].to_vec();
    members.sort();
    members
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
        assert!(file_cycles(src).is_empty(), "{:?}", file_cycles(src));
        let missing = "```floors src/\n0: board\n```\n";
        assert!(
            violations(src, &floors(missing, "src/"), &[])
                .iter()
                .any(|v| v.ends_with(
                    "module `kernel` is on no floor: add it to docs/architecture.md's floors"
                )),
        );
    }

    #[test]
    fn files_that_use_each_other_are_a_cycle_named_with_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        fs::create_dir_all(src.join("care")).unwrap();
        fs::write(
            src.join("care/mod.rs"),
            "mod grow;\nmod replace;\nmod survey;\npub fn numbered() {}\n",
        )
        .unwrap();
        fs::write(
            src.join("care/grow.rs"),
            "use super::{numbered, replace::usable};\n",
        )
        .unwrap();
        fs::write(
            src.join("care/replace.rs"),
            "//! super::grow in a comment\n\nfn f() {\n    crate::care::grow::numbered();\n}\n",
        )
        .unwrap();
        fs::write(
            src.join("care/survey.rs"),
            "use super::replace;\n#[cfg(test)]\nmod tests {\n    use super::super::grow;\n}\n",
        )
        .unwrap();
        assert_eq!(
            file_cycles(src),
            vec!["care: grow → replace → grow (care/grow.rs:1, care/replace.rs:4): files beside each other lean on one another one way only".to_string()]
        );
        fs::write(src.join("care/replace.rs"), "use super::numbered;\n").unwrap();
        assert!(file_cycles(src).is_empty(), "{:?}", file_cycles(src));
    }
}
