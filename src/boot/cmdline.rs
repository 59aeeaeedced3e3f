//! `cmdline.txt`: the kernel command line, which the firmware reads as one
//! line. Edits keep it one line and leave untouched words where they are.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmdline {
    words: Vec<String>,
    /// Whatever followed the first line (normally just "\n"), kept as found.
    tail: String,
    original: String,
}

impl Cmdline {
    pub fn parse(text: &str) -> Cmdline {
        let (first, tail) = match text.find('\n') {
            Some(i) => (&text[..i], &text[i..]),
            None => (text, ""),
        };
        let first = first.trim_end_matches('\r');
        let tail = if text[..text.find('\n').unwrap_or(text.len())].ends_with('\r') {
            format!("\r{tail}")
        } else {
            tail.to_string()
        };
        Cmdline {
            words: first.split_whitespace().map(String::from).collect(),
            tail,
            original: text.to_string(),
        }
    }

    /// Lines after the first, which the firmware ignores.
    pub fn ignored_lines(&self) -> usize {
        self.tail.lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// `word` as given (`key=value` or a flag) is added unless already there.
    /// A `key=value` whose key is present with another value replaces it
    /// (the last such word, which is the one the kernel takes), so no
    /// earlier value misleads whoever reads the file (except `console=`,
    /// which may repeat).
    pub fn append(&mut self, word: &str) -> bool {
        if self.words.iter().any(|w| w == word) {
            return false;
        }
        if let Some((key, _)) = word.split_once('=')
            && key != "console"
            && let Some(w) = self
                .words
                .iter_mut()
                .rfind(|w| w.split_once('=').is_some_and(|(k, _)| k == key))
        {
            *w = word.to_string();
            return true;
        }
        self.words.push(word.to_string());
        true
    }

    /// `key=value` removes exactly that word; a bare `key` removes the flag and
    /// every `key=...`.
    pub fn remove(&mut self, pattern: &str) -> bool {
        let before = self.words.len();
        if pattern.contains('=') {
            self.words.retain(|w| w != pattern);
        } else {
            self.words
                .retain(|w| w != pattern && !w.starts_with(&format!("{pattern}=")));
        }
        self.words.len() != before
    }

    pub fn render(&self) -> String {
        let line = self.words.join(" ");
        let original_first = self
            .original
            .split('\n')
            .next()
            .unwrap_or("")
            .trim_end_matches('\r');
        if original_first
            .split_whitespace()
            .eq(self.words.iter().map(String::as_str))
        {
            return self.original.clone();
        }
        format!(
            "{line}{}",
            if self.tail.is_empty() {
                "\n"
            } else {
                &self.tail
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIOS: &str = "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot\n";

    #[test]
    fn append_and_remove_keep_one_line() {
        let mut c = Cmdline::parse(PIOS);
        assert!(c.append("systemd.unit=multi-user.target"));
        assert!(c.remove("quiet"));
        assert!(!c.append("rootwait"));
        let out = c.render();
        assert_eq!(out.lines().count(), 1);
        assert!(
            out.ends_with(
                "init=/usr/lib/raspberrypi-sys-mods/firstboot systemd.unit=multi-user.target\n"
            ),
            "{out}"
        );
        assert!(!out.contains(" quiet "));
    }

    #[test]
    fn a_key_with_a_new_value_replaces_the_old_but_consoles_repeat() {
        let mut c = Cmdline::parse(PIOS);
        c.append("rootfstype=btrfs");
        c.append("console=ttyAMA0");
        let out = c.render();
        assert!(out.contains("rootfstype=btrfs fsck.repair"), "{out}");
        assert!(
            out.contains("console=tty1") && out.ends_with("console=ttyAMA0\n"),
            "{out}"
        );
    }

    #[test]
    fn a_repeated_key_gets_its_new_value_in_the_word_the_kernel_reads() {
        let mut c = Cmdline::parse("loglevel=3 quiet loglevel=4\n");
        assert!(c.append("loglevel=7"));
        assert_eq!(c.render(), "loglevel=3 quiet loglevel=7\n");
    }

    #[test]
    fn bare_key_removes_every_form() {
        let mut c = Cmdline::parse("a=1 b a=2 c\n");
        assert!(c.remove("a"));
        assert_eq!(c.render(), "b c\n");
    }

    #[test]
    fn unchanged_file_is_byte_identical() {
        let odd = "a  b\tc\r\n";
        let mut c = Cmdline::parse(odd);
        assert!(!c.append("b"));
        assert_eq!(c.render(), odd);
    }

    #[test]
    fn counts_lines_the_firmware_ignores() {
        assert_eq!(Cmdline::parse("a b\nc d\n").ignored_lines(), 1);
        assert_eq!(Cmdline::parse(PIOS).ignored_lines(), 0);
    }
}
