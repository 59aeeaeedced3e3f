//! Does a disk satisfy an array's `disks = { ... }` rules? When it does not,
//! say which rule failed, so a refusal can tell the user what to change.

use crate::disks::Disk;
use crate::spec::DiskMatch;

/// The first rule `disk` fails, in words; None when every rule holds.
pub fn mismatch(rules: &DiskMatch, disk: &Disk) -> Option<String> {
    if let Some(want) = rules.transport
        && disk.transport != Some(want)
    {
        let have = disk
            .transport
            .map_or("unknown".to_string(), |t| t.to_string());
        return Some(format!("transport is {have}, the rule wants {want}"));
    }
    if let Some(min) = rules.min_size
        && disk.size < min
    {
        return Some(format!("{} is smaller than min_size {}", disk.size, min));
    }
    if let Some(max) = rules.max_size
        && disk.size > max
    {
        return Some(format!("{} is larger than max_size {}", disk.size, max));
    }
    if let Some(want) = rules.rotational
        && disk.rotational != want
    {
        let what = if disk.rotational {
            "a spinning disk"
        } else {
            "an SSD"
        };
        return Some(format!("it is {what}, the rule wants rotational = {want}"));
    }
    let controller_names = disk
        .controller
        .as_ref()
        .map(|c| vec![c.label(), format!("{:04x}:{:04x}", c.vendor, c.device)])
        .unwrap_or_default();
    let globs = [
        (
            "model",
            &rules.model,
            disk.model.iter().cloned().collect::<Vec<_>>(),
        ),
        (
            "serial",
            &rules.serial,
            disk.serial.iter().cloned().collect(),
        ),
        ("wwn", &rules.wwn, disk.wwn.iter().cloned().collect()),
        ("controller", &rules.controller, controller_names),
    ];
    for (key, pattern, values) in globs {
        if let Some(pattern) = pattern
            && !values.iter().any(|v| glob(pattern, v))
        {
            let have = values
                .first()
                .map_or("unknown".to_string(), |v| format!("'{v}'"));
            return Some(format!("{key} {have} does not match '{pattern}'"));
        }
    }
    None
}

/// Checks a pattern's syntax, so a typo is reported before any disk is read.
pub fn check_glob(pattern: &str) -> Result<(), &'static str> {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '[' {
            let mut closed = false;
            let mut first = true;
            for c in chars.by_ref() {
                if c == ']' && !first {
                    closed = true;
                    break;
                }
                first = false;
            }
            if !closed {
                return Err("a '[' is not closed by ']'");
            }
        }
    }
    Ok(())
}

/// Shell-style glob (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`), case-insensitive,
/// because model strings come in whatever case the vendor chose.
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
        Some('[') => {
            let Some(close) = p.iter().skip(2).position(|&c| c == ']').map(|i| i + 2) else {
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
    }
}
