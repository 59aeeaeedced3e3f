//! Armbian's `/boot/armbianEnv.txt`: `key=value` lines read by U-Boot's boot
//! script. `overlays=` is a space-separated list of device-tree overlays named
//! without their `overlay_prefix`.

#[derive(Debug, Clone)]
pub struct ArmbianEnv {
    text: String,
}

impl ArmbianEnv {
    pub fn parse(text: &str) -> ArmbianEnv {
        ArmbianEnv {
            text: text.to_string(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.text.lines().rev().find_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(key)?
                .strip_prefix('=')
        })
    }

    pub fn overlays(&self) -> Vec<String> {
        self.get("overlays")
            .map(|v| v.split_whitespace().map(String::from).collect())
            .unwrap_or_default()
    }

    /// Adds the overlays not already listed, keeping the existing ones and
    /// their order; returns what was added.
    pub fn add_overlays(&mut self, wanted: &[String]) -> Vec<String> {
        let current = self.overlays();
        let added: Vec<String> = wanted
            .iter()
            .filter(|w| !current.contains(w))
            .cloned()
            .collect();
        if added.is_empty() {
            return added;
        }
        let all: Vec<String> = current.into_iter().chain(added.iter().cloned()).collect();
        self.set("overlays", &all.join(" "));
        added
    }

    /// `extraargs=`, the words U-Boot's boot script adds to the kernel
    /// command line, with `words` added as cmdline.txt edits add them (a
    /// `key=value` replaces that key's value); returns what changed.
    pub fn add_extraargs(&mut self, words: &[String]) -> Vec<String> {
        let mut args = super::cmdline::Cmdline::parse(self.get("extraargs").unwrap_or(""));
        let added: Vec<String> = words.iter().filter(|w| args.append(w)).cloned().collect();
        if !added.is_empty() {
            self.set("extraargs", args.render().trim_end());
        }
        added
    }

    /// Replaces the last `key=` line (the one U-Boot's `env import` keeps),
    /// or adds one at the end.
    fn set(&mut self, key: &str, value: &str) {
        let new_line = format!("{key}={value}");
        let prefix = format!("{key}=");
        let last = self
            .text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with(&prefix))
            .map(|(i, _)| i)
            .last();
        let mut out = String::with_capacity(self.text.len() + new_line.len() + 1);
        match last {
            Some(idx) => {
                for (i, piece) in self.text.split_inclusive('\n').enumerate() {
                    if i == idx {
                        let eol = &piece[piece.trim_end_matches(['\r', '\n']).len()..];
                        out.push_str(&new_line);
                        out.push_str(eol);
                    } else {
                        out.push_str(piece);
                    }
                }
            }
            None => {
                out.push_str(&self.text);
                if !self.text.is_empty() && !self.text.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&new_line);
                out.push('\n');
            }
        }
        self.text = out;
    }

    pub fn render(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: &str = "verbosity=1\nbootlogo=false\noverlay_prefix=rockchip-rk3588\nfdtfile=rockchip/rk3588-rock-5b.dtb\noverlays=uart7-m2\nrootdev=UUID=0e5a\nrootfstype=ext4\n";

    #[test]
    fn adds_to_the_existing_list_without_dropping_entries() {
        let mut e = ArmbianEnv::parse(ENV);
        assert_eq!(e.add_overlays(&["sata1".into()]), vec!["sata1"]);
        assert_eq!(
            e.render(),
            ENV.replace("overlays=uart7-m2\n", "overlays=uart7-m2 sata1\n")
        );
        assert!(
            e.add_overlays(&["sata1".into()]).is_empty(),
            "second run changes nothing"
        );
    }

    #[test]
    fn extraargs_gain_a_word_or_a_new_value_for_its_key() {
        let mut e = ArmbianEnv::parse(ENV);
        let quirk = "usb-storage.quirks=152d:0578:u".to_string();
        assert_eq!(
            e.add_extraargs(std::slice::from_ref(&quirk)),
            vec![quirk.clone()]
        );
        assert_eq!(e.render(), format!("{ENV}extraargs={quirk}\n"));
        assert!(e.add_extraargs(std::slice::from_ref(&quirk)).is_empty());
        let mut e = ArmbianEnv::parse(&format!(
            "{ENV}extraargs=quiet usb-storage.quirks=aaaa:bbbb:u\n"
        ));
        e.add_extraargs(std::slice::from_ref(&quirk));
        assert_eq!(
            e.get("extraargs"),
            Some("quiet usb-storage.quirks=152d:0578:u")
        );
    }

    #[test]
    fn adds_the_line_when_there_is_none() {
        let mut e = ArmbianEnv::parse("verbosity=1\nrootfstype=ext4");
        e.add_overlays(&["sata1".into()]);
        assert_eq!(e.render(), "verbosity=1\nrootfstype=ext4\noverlays=sata1\n");
        assert_eq!(e.get("overlays"), Some("sata1"));
    }
}
