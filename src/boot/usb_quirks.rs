//! `[storage] usb_quirks`: the recipe's USB bridges kept off the `uas`
//! driver, written at build time as `usb-storage.quirks=VID:PID:u` on the
//! kernel command line, merged with the entries already there.

use nasforge_engine::spec::UsbQuirk;

pub const KEY: &str = "usb-storage.quirks";

/// The `usb-storage.quirks=` word holding the entries of `current` (the
/// word's value now, if any) and the recipe's; None when there is nothing
/// to add. An entry already there for a bridge keeps its flags, with `u`
/// added when it lacks it.
pub fn word(current: Option<&str>, quirks: &[UsbQuirk]) -> Option<String> {
    let mut entries: Vec<String> = current
        .unwrap_or("")
        .split(',')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect();
    let before = entries.clone();
    for q in quirks {
        let id = format!("{q}:");
        match entries
            .iter_mut()
            .find(|e| e.to_ascii_lowercase().starts_with(&id))
        {
            // `u` (IGNORE_UAS) added to the flags it has for other trouble.
            Some(e) if !e[id.len()..].contains(['u', 'U']) => e.push('u'),
            Some(_) => {}
            None => entries.push(q.kernel_entry()),
        }
    }
    (entries != before).then(|| format!("{KEY}={}", entries.join(",")))
}

/// The value of `key=` among whitespace-separated `words` (the last one,
/// as the kernel takes it).
pub fn value<'a>(words: &'a str, key: &str) -> Option<&'a str> {
    words
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> UsbQuirk {
        s.parse().unwrap()
    }

    #[test]
    fn merges_with_what_the_command_line_has() {
        assert_eq!(
            word(None, &[q("152d:0578"), q("174c:55aa")]).as_deref(),
            Some("usb-storage.quirks=152d:0578:u,174c:55aa:u")
        );
        let line = "console=tty1 usb-storage.quirks=0bc2:2312:u rootwait";
        assert_eq!(
            word(value(line, KEY), &[q("152d:0578")]).as_deref(),
            Some("usb-storage.quirks=0bc2:2312:u,152d:0578:u")
        );
        assert_eq!(
            word(Some("152D:0578:ut"), &[q("152d:0578")]),
            None,
            "already there, flags kept"
        );
        assert_eq!(
            word(Some("152d:0578:r"), &[q("152d:0578")]).as_deref(),
            Some("usb-storage.quirks=152d:0578:ru")
        );
        assert_eq!(word(None, &[]), None);
    }
}
