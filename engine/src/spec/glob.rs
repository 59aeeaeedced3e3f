//! The pattern language of the disk rules (`model`, `serial`, `wwn`,
//! `controller`): shell-style globs, checked here with the rest of the
//! recipe and compared with each disk by [`crate::matching`].

/// Checks a pattern's syntax, so a typo is reported before any disk is read.
pub fn check_glob(pattern: &str) -> Result<(), &'static str> {
    let p: Vec<char> = pattern.chars().collect();
    let mut depth = 0usize;
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '[' => i = class_end(&p, i).ok_or("a '[' is not closed by ']'")?,
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    if depth > 0 {
        return Err("a '{' is not closed by '}'");
    }
    Ok(())
}

/// Index of the `]` closing the class that opens at `open`: the first `]`
/// after at least one member, so `[]]` is a class holding `]`.
fn class_end(p: &[char], open: usize) -> Option<usize> {
    p.iter()
        .skip(open + 2)
        .position(|&c| c == ']')
        .map(|i| i + open + 2)
}

/// The alternatives of the `{...}` whose body starts at `p[0]`, split at
/// its top-level commas, and what follows its closing `}`. Classes are
/// skipped whole, so `[,]` is a literal comma.
fn alternatives(p: &[char]) -> Option<(Vec<&[char]>, &[char])> {
    let mut alts = Vec::new();
    let (mut depth, mut start, mut i) = (0usize, 0, 0);
    while i < p.len() {
        match p[i] {
            '[' => i = class_end(p, i)?,
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            '}' => {
                alts.push(&p[start..i]);
                return Some((alts, &p[i + 1..]));
            }
            ',' if depth == 0 => {
                alts.push(&p[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A pattern that matches exactly one of `values` and nothing else: the
/// wizard names the disks the user chose by serial this way. Characters
/// the glob syntax uses are put in classes of their own (`[*]`).
pub fn any_of(values: &[&str]) -> String {
    let literal = |v: &str| -> String {
        v.chars()
            .map(|c| {
                if "*?[]{},".contains(c) {
                    format!("[{c}]")
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    match values {
        [one] => literal(one),
        _ => format!(
            "{{{}}}",
            values
                .iter()
                .map(|v| literal(v))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// Shell-style glob (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`, `{a,b}`),
/// case-insensitive, because model strings come in whatever case the vendor
/// chose.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    matches_from(&p, &t)
}

fn matches_from(p: &[char], t: &[char]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some('*') => (0..=t.len()).any(|skip| matches_from(&p[1..], &t[skip..])),
        Some('?') => !t.is_empty() && matches_from(&p[1..], &t[1..]),
        Some('{') => match alternatives(&p[1..]) {
            Some((alts, rest)) => alts.iter().any(|alt| {
                let joined: Vec<char> = alt.iter().chain(rest).copied().collect();
                matches_from(&joined, t)
            }),
            // An unclosed brace (check_glob reports it) stands for itself.
            None => t.first() == Some(&'{') && matches_from(&p[1..], &t[1..]),
        },
        Some('[') => {
            let Some(close) = class_end(p, 0) else {
                return false;
            };
            let Some(&c) = t.first() else { return false };
            let (negate, set) = match p[1] {
                '!' | '^' => (true, &p[2..close]),
                _ => (false, &p[1..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && matches_from(&p[close + 1..], &t[1..])
        }
        Some(&c) => t.first() == Some(&c) && matches_from(&p[1..], &t[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_like_a_shell() {
        assert!(glob("WDC WD40*", "WDC WD40EFRX-68N32N0"));
        assert!(glob("wdc*", "WDC WD40EFRX"));
        assert!(glob("ST?000*", "ST4000NM0023"));
        assert!(glob("sd[a-c]", "sdb"));
        assert!(!glob("sd[!a-c]", "sdb"));
        assert!(glob("*", ""));
        assert!(!glob("Samsung*", "WDC WD40EFRX"));
        assert!(glob("0x5000c500*", "0x5000c500a1b2c3d4"));
    }

    #[test]
    fn rejects_unclosed_brackets() {
        assert!(check_glob("ST[0-9").is_err());
        assert!(check_glob("ST[]]x").is_ok());
        assert!(check_glob("WDC*").is_ok());
        assert!(check_glob("{WD-1,WD-2").is_err());
        assert!(check_glob("{WD-1,WD-[}]2}").is_ok());
    }

    #[test]
    fn braces_match_any_alternative() {
        assert!(glob("{WDC*,ST4000*}", "ST4000NM0023"));
        assert!(glob("{WDC*,ST4000*}", "WDC WD40EFRX"));
        assert!(!glob("{WDC*,ST4000*}", "Samsung SSD"));
        assert!(glob("sd{a,b{x,y}}1", "sdby1"));
        assert!(!glob("sd{a,b}", "sdab"), "one alternative, not a sequence");
    }

    #[test]
    fn any_of_matches_exactly_the_values_given() {
        let serials = ["WD-WCC7K0000001", "WD-WCC7K0000003", "odd*,{serial}?"];
        let pattern = any_of(&serials);
        assert!(check_glob(&pattern).is_ok(), "{pattern}");
        for s in serials {
            assert!(glob(&pattern, s), "{pattern} should match {s}");
        }
        for other in ["WD-WCC7K0000002", "odd-thing,{serial}x", "WD-WCC7K000000"] {
            assert!(!glob(&pattern, other), "{pattern} should not match {other}");
        }
        assert_eq!(any_of(&["WD-1"]), "WD-1");
    }
}
