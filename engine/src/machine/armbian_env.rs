//! Armbian's `/boot/armbianEnv.txt`: `key=value` lines read by U-Boot's boot
//! script. `overlays=` is a space-separated list of device-tree overlays named
//! without their `overlay_prefix`; `extraargs=` words U-Boot adds to the
//! kernel command line. The builder edits it in the image and setup on the
//! board, both here.

use super::usb_quirk::{UsbQuirk, merged};

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

    /// `extraargs=` with `quirks` merged into its `usb-storage.quirks=`
    /// word ([`merged`]); returns the new `extraargs=` value, None when it
    /// had them all.
    pub fn add_usb_quirks(&mut self, quirks: &[UsbQuirk]) -> Option<String> {
        let value = merged(self.get("extraargs").unwrap_or(""), quirks)?;
        self.set("extraargs", &value);
        Some(value)
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
    fn extraargs_gain_the_quirks_merged_into_the_word_the_kernel_reads() {
        let quirk: UsbQuirk = "152d:0578".parse().unwrap();
        let mut e = ArmbianEnv::parse(ENV);
        assert_eq!(
            e.add_usb_quirks(&[quirk]).as_deref(),
            Some("usb-storage.quirks=152d:0578:u")
        );
        assert_eq!(
            e.render(),
            format!("{ENV}extraargs=usb-storage.quirks=152d:0578:u\n")
        );
        assert_eq!(
            e.add_usb_quirks(&[quirk]),
            None,
            "second run changes nothing"
        );

        // The kernel takes the last of a repeated parameter: the quirk joins
        // that one, and what the first listed stays as it was.
        let mut e = ArmbianEnv::parse(&format!(
            "{ENV}extraargs=usb-storage.quirks=1111:2222:u quiet usb-storage.quirks=aaaa:bbbb:u\r\n"
        ));
        e.add_usb_quirks(&[quirk]);
        assert_eq!(
            e.get("extraargs"),
            Some("usb-storage.quirks=1111:2222:u quiet usb-storage.quirks=aaaa:bbbb:u,152d:0578:u")
        );
        assert!(
            e.render().ends_with("152d:0578:u\r\n"),
            "its line ending kept"
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
