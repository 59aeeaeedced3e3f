//! Raspberry Pi `config.txt`, edited the way a careful person would: a setting
//! is changed where it is already in effect for the board, added to the
//! board's own section otherwise, and every other byte is kept. Running the
//! same edit twice changes nothing.
//!
//! The firmware reads the file top to bottom. A model filter (`[pi5]`, `[cm4]`,
//! `[all]`, ...) replaces the previous model filter; other filters (`[HDMI:1]`,
//! `[gpio4=1]`, `[tryboot]`, `[0x1234abcd]`, ...) add conditions; `[all]` clears
//! everything. A line is "in effect for a board" when the model filter selects
//! that board and no condition is active.

use std::collections::BTreeMap;

/// Lines longer than this are silently ignored by the firmware (seen by sdm).
pub const MAX_LINE: usize = 98;

const MODEL_FILTERS: &[&str] = &[
    "all", "none", "pi0", "pi0w", "pi02", "pi1", "pi2", "pi3", "pi3+", "pi4", "pi400", "pi5",
    "pi500", "cm0", "cm1", "cm3", "cm3+", "cm4", "cm4s", "cm5",
];

#[derive(Debug, Clone)]
struct Line {
    text: String,
    /// The line ending exactly as found ("\n", "\r\n" or "" on a last line without one).
    eol: String,
}

#[derive(Debug, Clone)]
pub struct ConfigTxt {
    lines: Vec<Line>,
    newline: &'static str,
}

/// One setting a line makes. `dtparam=a=1,b` makes two.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Setting {
    key: String,
    value: String,
}

/// Where the reader is while walking the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Filter {
    /// None means `[all]`.
    model: Option<String>,
    conditions: BTreeMap<String, String>,
}

impl Filter {
    fn apply_header(&mut self, name: &str) {
        let name = name.trim().to_ascii_lowercase();
        if name == "all" {
            *self = Filter::default();
        } else if MODEL_FILTERS.contains(&name.as_str()) || name.starts_with("board-type=") {
            self.model = Some(name);
        } else {
            let kind = name.split([':', '=']).next().unwrap_or("").to_string();
            let kind = if name.starts_with("0x") {
                "serial".to_string()
            } else {
                kind
            };
            self.conditions.insert(kind, name);
        }
    }

    fn in_effect_for(&self, filters: &[String]) -> bool {
        self.conditions.is_empty()
            && self
                .model
                .as_ref()
                .is_none_or(|m| filters.iter().any(|f| f == m))
    }
}

fn header(text: &str) -> Option<&str> {
    let t = text.trim();
    t.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
}

/// A dtparam's name as the Pi 5 firmware reads it: its overlay README
/// documents `nvme` as an alias of `pciex1`.
fn canonical(name: &str) -> &str {
    if name == "nvme" { "pciex1" } else { name }
}

/// The settings on a line, aliases under their canonical names.
fn settings(text: &str) -> Vec<Setting> {
    let t = text.trim();
    if t.is_empty() || t.starts_with('#') || header(t).is_some() {
        return vec![];
    }
    let (key, value) = match t.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim()),
        None => match t.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => (t, ""),
        },
    };
    match key {
        "dtparam" => value
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let (name, val) = p.split_once('=').unwrap_or((p, "on"));
                let name = name.trim();
                let name = canonical(name);
                let val = if val.trim().is_empty() {
                    "on"
                } else {
                    val.trim()
                };
                Setting {
                    key: format!("dtparam:{name}"),
                    value: val.to_string(),
                }
            })
            .collect(),
        // Overlays stack; two lines loading the same overlay with different
        // parameters are both wanted, so the whole line is the key.
        "dtoverlay" => vec![Setting {
            key: format!("dtoverlay:{value}"),
            value: value.to_string(),
        }],
        _ => vec![Setting {
            key: key.to_string(),
            value: value.to_string(),
        }],
    }
}

/// One change made to the file, for the build's manifest and output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    Added { line: String, section: String },
    Replaced { old: String, new: String },
}

impl std::fmt::Display for Edit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Edit::Added { line, section } => write!(f, "added `{line}` to [{section}]"),
            Edit::Replaced { old, new } => write!(f, "replaced `{old}` with `{new}`"),
        }
    }
}

impl ConfigTxt {
    pub fn parse(text: &str) -> ConfigTxt {
        let mut lines = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let (line, eol, next) = match rest.find('\n') {
                Some(i) if i > 0 && rest.as_bytes()[i - 1] == b'\r' => {
                    (&rest[..i - 1], "\r\n", &rest[i + 1..])
                }
                Some(i) => (&rest[..i], "\n", &rest[i + 1..]),
                None => (rest, "", ""),
            };
            lines.push(Line {
                text: line.to_string(),
                eol: eol.to_string(),
            });
            rest = next;
        }
        let crlf = lines.iter().filter(|l| l.eol == "\r\n").count();
        let lf = lines.iter().filter(|l| l.eol == "\n").count();
        ConfigTxt {
            lines,
            newline: if crlf > lf { "\r\n" } else { "\n" },
        }
    }

    pub fn render(&self) -> String {
        self.lines
            .iter()
            .map(|l| format!("{}{}", l.text, l.eol))
            .collect()
    }

    /// The filter in force at each line (after that line's own header).
    fn filters(&self) -> Vec<Filter> {
        let mut f = Filter::default();
        self.lines
            .iter()
            .map(|l| {
                if let Some(h) = header(&l.text) {
                    f.apply_header(h);
                }
                f.clone()
            })
            .collect()
    }

    /// The value a board ends up with for `line`'s setting(s): the last line in
    /// effect wins. Keys are `dtparam:<name>`, `dtoverlay:<line>` or the key.
    pub fn effective(&self, key: &str, filters: &[String]) -> Option<String> {
        let states = self.filters();
        let mut value = None;
        for (line, state) in self.lines.iter().zip(&states) {
            if state.in_effect_for(filters) {
                for s in settings(&line.text) {
                    if s.key == key {
                        value = Some(s.value);
                    }
                }
            }
        }
        value
    }

    /// Makes `wanted` (one config.txt line) true for a board selected by
    /// `filters`; `section` is the board's own section for new lines.
    pub fn set(&mut self, wanted: &str, filters: &[String], section: &str) -> Vec<Edit> {
        let wanted = wanted.trim();
        let mut edits = Vec::new();
        let mut missing = Vec::new();
        for want in settings(wanted) {
            let states = self.filters();
            let mut found = false;
            for (i, state) in states.iter().enumerate() {
                if !state.in_effect_for(filters) {
                    continue;
                }
                let line_settings = settings(&self.lines[i].text);
                if !line_settings.iter().any(|s| s.key == want.key) {
                    continue;
                }
                found = true;
                if line_settings
                    .iter()
                    .any(|s| s.key == want.key && s.value != want.value)
                {
                    let old = self.lines[i].text.clone();
                    let new = rewrite(&old, &want);
                    self.lines[i].text = new.clone();
                    edits.push(Edit::Replaced { old, new });
                }
            }
            if !found {
                missing.push(want);
            }
        }
        if missing.is_empty() {
            return edits;
        }
        // dtparam lines with several parameters are added as written when all
        // of them are missing, else one line per missing parameter.
        let new_lines: Vec<String> = if missing.len() == settings(wanted).len() {
            vec![wanted.to_string()]
        } else {
            missing.iter().map(setting_line).collect()
        };
        self.insert(&new_lines, section);
        edits.extend(new_lines.into_iter().map(|line| Edit::Added {
            line,
            section: section.to_string(),
        }));
        edits
    }

    fn insert(&mut self, new_lines: &[String], section: &str) {
        let states = self.filters();
        let own = Filter {
            model: Some(section.to_string()),
            conditions: BTreeMap::new(),
        };
        // After the last line of the last block of the board's own section,
        // skipping the blank lines that separate sections.
        let last = states.iter().rposition(|s| *s == own);
        let nl = self.newline.to_string();
        let mk = |text: &str| Line {
            text: text.to_string(),
            eol: nl.clone(),
        };
        if let Some(mut at) = last {
            while at > 0 && self.lines[at].text.trim().is_empty() && states[at - 1] == own {
                at -= 1;
            }
            if self.lines[at].eol.is_empty() {
                self.lines[at].eol = nl.clone();
            }
            for (k, l) in new_lines.iter().enumerate() {
                self.lines.insert(at + 1 + k, mk(l));
            }
            return;
        }
        if let Some(l) = self.lines.last_mut()
            && l.eol.is_empty()
        {
            l.eol = nl.clone();
        }
        if self.lines.last().is_some_and(|l| !l.text.trim().is_empty()) {
            self.lines.push(mk(""));
        }
        self.lines.push(mk(&format!("[{section}]")));
        self.lines.extend(new_lines.iter().map(|l| mk(l)));
        // Back to [all], so a line someone appends later with `echo >>`
        // applies to every board, as it did before.
        self.lines.push(mk(""));
        self.lines.push(mk("[all]"));
    }

    /// Lines the firmware will ignore because they are too long.
    pub fn long_lines(&self) -> Vec<(usize, String)> {
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.text.len() > MAX_LINE && !l.text.trim_start().starts_with('#'))
            .map(|(i, l)| (i + 1, l.text.clone()))
            .collect()
    }
}

fn setting_line(s: &Setting) -> String {
    match s.key.split_once(':') {
        Some(("dtparam", name)) if s.value == "on" => format!("dtparam={name}"),
        Some(("dtparam", name)) => format!("dtparam={name}={}", s.value),
        Some(("dtoverlay", _)) => format!("dtoverlay={}", s.value),
        _ => format!("{}={}", s.key, s.value),
    }
}

/// The same line with one setting's value changed and everything else kept.
fn rewrite(line: &str, want: &Setting) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    match want.key.split_once(':') {
        Some(("dtparam", name)) => {
            let t = line.trim();
            let params = t.split_once('=').map_or("", |(_, v)| v);
            let rewritten: Vec<String> = params
                .split(',')
                .map(|p| {
                    let pname = p.split_once('=').map_or(p, |(n, _)| n).trim();
                    if canonical(pname) == name {
                        if want.value == "on" {
                            pname.to_string()
                        } else {
                            format!("{pname}={}", want.value)
                        }
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            format!("{indent}dtparam={}", rewritten.join(","))
        }
        _ => format!("{indent}{}", setting_line(want)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pi5() -> Vec<String> {
        vec!["pi5".to_string()]
    }

    fn apply(text: &str, lines: &[&str]) -> (String, Vec<Edit>) {
        let mut c = ConfigTxt::parse(text);
        let mut edits = Vec::new();
        for l in lines {
            edits.extend(c.set(l, &pi5(), "pi5"));
        }
        (c.render(), edits)
    }

    const PIOS: &str = "# For more options and information see\n# http://rptl.io/configtxt\n\ndtparam=audio=on\n\n[cm4]\notg_mode=1\n\n[cm5]\ndtoverlay=dwc2,dr_mode=host\n\n[all]\n";

    #[test]
    fn adds_a_new_board_section_and_returns_to_all() {
        let (out, edits) = apply(PIOS, &["dtparam=pciex1", "dtparam=pciex1_gen=3"]);
        assert_eq!(
            out,
            format!("{PIOS}\n[pi5]\ndtparam=pciex1\ndtparam=pciex1_gen=3\n\n[all]\n")
        );
        assert_eq!(edits.len(), 2);
    }

    #[test]
    fn is_idempotent() {
        let (once, _) = apply(PIOS, &["dtparam=pciex1", "dtparam=pciex1_gen=3"]);
        let (twice, edits) = apply(&once, &["dtparam=pciex1", "dtparam=pciex1_gen=3"]);
        assert_eq!(once, twice);
        assert!(edits.is_empty());
    }

    #[test]
    fn replaces_a_conflicting_gen_in_effect_instead_of_duplicating() {
        let text = "[pi5]\n# keep me\ndtparam=pciex1\ndtparam=pciex1_gen=2\n\n[all]\narm_boost=1\n";
        let (out, edits) = apply(text, &["dtparam=pciex1", "dtparam=pciex1_gen=3"]);
        assert_eq!(
            out,
            "[pi5]\n# keep me\ndtparam=pciex1\ndtparam=pciex1_gen=3\n\n[all]\narm_boost=1\n"
        );
        assert_eq!(
            edits,
            vec![Edit::Replaced {
                old: "dtparam=pciex1_gen=2".into(),
                new: "dtparam=pciex1_gen=3".into()
            }]
        );
    }

    #[test]
    fn appends_to_an_existing_board_section() {
        let text = "[pi4]\narm_boost=1\n\n[pi5]\ndtoverlay=vc4-kms-v3d\n\n[all]\nenable_uart=1\n";
        let (out, _) = apply(text, &["dtparam=pciex1"]);
        assert_eq!(
            out,
            "[pi4]\narm_boost=1\n\n[pi5]\ndtoverlay=vc4-kms-v3d\ndtparam=pciex1\n\n[all]\nenable_uart=1\n"
        );
    }

    #[test]
    fn a_later_all_section_overriding_the_board_is_fixed_too() {
        let text = "[pi5]\ndtparam=pciex1_gen=3\n[all]\ndtparam=pciex1_gen=1\n";
        let (out, edits) = apply(text, &["dtparam=pciex1_gen=3"]);
        assert_eq!(
            out,
            "[pi5]\ndtparam=pciex1_gen=3\n[all]\ndtparam=pciex1_gen=3\n"
        );
        assert_eq!(edits.len(), 1);
        let c = ConfigTxt::parse(&out);
        assert_eq!(
            c.effective("dtparam:pciex1_gen", &pi5()).as_deref(),
            Some("3")
        );
    }

    #[test]
    fn other_boards_sections_and_conditional_sections_are_left_alone() {
        let text = "[pi4]\ndtparam=pciex1_gen=2\n[HDMI:1]\ndtparam=pciex1_gen=1\n[all]\n";
        let (out, _) = apply(text, &["dtparam=pciex1_gen=3"]);
        assert!(out.starts_with(text), "{out}");
        assert!(
            out.ends_with("[pi5]\ndtparam=pciex1_gen=3\n\n[all]\n"),
            "{out}"
        );
    }

    #[test]
    fn keeps_crlf_line_endings() {
        let text = "# hi\r\n[pi5]\r\ndtparam=pciex1_gen=2\r\n[all]\r\n";
        let (out, _) = apply(text, &["dtparam=pciex1", "dtparam=pciex1_gen=3"]);
        assert_eq!(
            out,
            "# hi\r\n[pi5]\r\ndtparam=pciex1_gen=3\r\ndtparam=pciex1\r\n[all]\r\n"
        );
    }

    #[test]
    fn handles_a_missing_trailing_newline() {
        let (out, _) = apply("dtparam=audio=on", &["dtparam=pciex1"]);
        assert_eq!(out, "dtparam=audio=on\n\n[pi5]\ndtparam=pciex1\n\n[all]\n");
        let (out, _) = apply("[pi5]\narm_boost=1", &["dtparam=pciex1"]);
        assert_eq!(out, "[pi5]\narm_boost=1\ndtparam=pciex1\n");
    }

    #[test]
    fn the_nvme_alias_counts_as_pciex1_and_pcie_is_no_alias() {
        let text = "[all]\ndtparam=nvme\n";
        let (out, edits) = apply(text, &["dtparam=pciex1"]);
        assert_eq!(out, text);
        assert!(edits.is_empty());
        let (out, _) = apply("dtparam=nvme=off\n", &["dtparam=pciex1"]);
        assert_eq!(out, "dtparam=nvme\n");
        let (out, edits) = apply("[all]\ndtparam=pcie\n", &["dtparam=pciex1"]);
        assert_eq!(
            out,
            "[all]\ndtparam=pcie\n\n[pi5]\ndtparam=pciex1\n\n[all]\n"
        );
        assert_eq!(edits.len(), 1);
    }

    #[test]
    fn combined_dtparam_lines_change_only_the_one_parameter() {
        let (out, _) = apply(
            "[pi5]\ndtparam=pciex1,pciex1_gen=2,audio=on\n",
            &["dtparam=pciex1_gen=3"],
        );
        assert_eq!(out, "[pi5]\ndtparam=pciex1,pciex1_gen=3,audio=on\n");
    }

    #[test]
    fn cm4_lines_go_in_the_cm4_section() {
        let mut c = ConfigTxt::parse(PIOS);
        c.set(
            "dtoverlay=dwc2,dr_mode=host",
            &["pi4".into(), "cm4".into()],
            "cm4",
        );
        assert!(
            c.render()
                .contains("[cm4]\notg_mode=1\ndtoverlay=dwc2,dr_mode=host\n\n[cm5]"),
            "{}",
            c.render()
        );
    }

    #[test]
    fn reports_lines_the_firmware_would_ignore() {
        let long = format!("dtoverlay={}", "x".repeat(95));
        let c = ConfigTxt::parse(&format!("# {}\n{long}\n", "y".repeat(120)));
        assert_eq!(c.long_lines(), vec![(2, long)]);
    }
}
