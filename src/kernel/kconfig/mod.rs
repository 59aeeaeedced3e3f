//! Just enough of Kconfig to explain why `make olddefconfig` dropped an
//! option: where each symbol is defined, what it depends on (its own
//! `depends on`, prompt conditions, and the enclosing `if`/`menu`/`choice`
//! blocks across `source` statements), and who `select`s it. Expressions are
//! evaluated against a `.config` with Kconfig's tristate logic (n=0, m=1,
//! y=2; `&&` is min, `||` is max, `!x` is 2-x).
//!
//! The kernel's own `scripts/kconfig` decides the values; this module only
//! explains them, so it errs on the side of reading too much (e.g. help
//! text is skipped by indentation, as Kconfig does).

mod eval;
mod expr;
mod lexer;
mod parser;
mod reader;
mod tree;

pub use expr::{CmpOp, Expr};
pub use parser::parse_expr;
pub use tree::{Definition, Dependency, Kconfig, Origin, Select};

use std::collections::BTreeMap;

/// A tristate value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tri {
    N = 0,
    M = 1,
    Y = 2,
}

impl Tri {
    fn from_value(v: &str) -> Tri {
        match v {
            "y" => Tri::Y,
            "m" => Tri::M,
            _ => Tri::N,
        }
    }
}

/// The values of a `.config` file: `CONFIG_X=v` lines; `# CONFIG_X is not
/// set` and absent symbols read as `n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub values: BTreeMap<String, String>,
}

impl Config {
    pub fn parse(text: &str) -> Config {
        let mut values = BTreeMap::new();
        for line in text.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("# CONFIG_") {
                if let Some(sym) = rest.strip_suffix(" is not set") {
                    values.insert(sym.to_string(), "n".to_string());
                }
            } else if let Some(rest) = l.strip_prefix("CONFIG_")
                && let Some((k, v)) = rest.split_once('=')
            {
                values.insert(k.to_string(), v.to_string());
            }
        }
        Config { values }
    }

    /// The value as written (`y`, `m`, `"text"`, `32`), `n` when unset.
    pub fn get(&self, sym: &str) -> &str {
        self.values.get(sym).map(String::as_str).unwrap_or("n")
    }

    pub fn tri(&self, sym: &str) -> Tri {
        Tri::from_value(self.get(sym))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        Config::parse(text)
    }

    #[test]
    fn config_reads_set_unset_and_absent() {
        let c =
            cfg("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=m\nCONFIG_S=\"x y\"\nCONFIG_N=32\n");
        assert_eq!(c.tri("A"), Tri::Y);
        assert_eq!(c.tri("B"), Tri::N);
        assert_eq!(c.tri("C"), Tri::M);
        assert_eq!(c.tri("Z"), Tri::N);
        assert_eq!(c.get("S"), "\"x y\"");
        assert_eq!(c.get("N"), "32");
    }

    #[test]
    fn expressions_use_tristate_logic() {
        let c = cfg("CONFIG_A=y\nCONFIG_B=m\nCONFIG_N=32\nCONFIG_S=\"abc\"\n");
        let ev = |s: &str| parse_expr(s).unwrap().eval(&c);
        assert_eq!(ev("A && B"), Tri::M);
        assert_eq!(ev("A || C"), Tri::Y);
        assert_eq!(ev("!B"), Tri::M);
        assert_eq!(ev("!C && (A || B)"), Tri::Y);
        assert_eq!(ev("B = m"), Tri::Y);
        assert_eq!(ev("B != y"), Tri::Y);
        assert_eq!(ev("N >= 16"), Tri::Y);
        assert_eq!(ev("N < 0x10"), Tri::N);
        assert_eq!(ev("S = \"abc\""), Tri::Y);
        assert_eq!(ev("ARCH_X || COMPILE_TEST"), Tri::N);
        assert_eq!(
            parse_expr("A && (B || !C)").unwrap().symbols(),
            vec!["A", "B", "C"]
        );
        assert_eq!(
            parse_expr("A && (B || !C)").unwrap().to_string(),
            "A && (B || !C)"
        );
    }

    #[test]
    fn macros_are_taken_as_true_and_kept_for_display() {
        let e = parse_expr("$(cc-option,-ffunction-sections -fdata-sections) && A").unwrap();
        assert_eq!(
            e.to_string(),
            "$(cc-option,-ffunction-sections -fdata-sections) && A"
        );
        assert_eq!(e.symbols(), vec!["A"]);
        assert_eq!(e.eval(&cfg("CONFIG_A=y\n")), Tri::Y);
        let e = parse_expr("$(success,$(NM) --help | head -n 1 | grep -qi llvm)").unwrap();
        assert_eq!(e.eval(&cfg("")), Tri::Y);
    }

    #[test]
    fn bad_expressions_are_errors() {
        assert!(parse_expr("A && (B").is_err());
        assert!(parse_expr("A B").is_err());
    }

    fn tree(files: &[(&str, &str)]) -> Kconfig {
        let files: BTreeMap<String, String> = files
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Kconfig::load(&|p: &str| files.get(p).cloned(), "Kconfig", "arm64")
    }

    #[test]
    fn dependencies_come_from_the_entry_its_blocks_and_sourced_files() {
        let k = tree(&[
            (
                "Kconfig",
                "mainmenu \"x\"\nsource \"drivers/Kconfig\"\nsource \"arch/$(SRCARCH)/Kconfig\"\n",
            ),
            (
                "arch/arm64/Kconfig",
                "config ARM64\n\tdef_bool y\n\tselect OF\n",
            ),
            (
                "drivers/Kconfig",
                "menu \"Device Drivers\"\n\tdepends on HAS_IOMEM\n\nmenuconfig ATA\n\ttristate \"ATA\"\n\tdepends on BLOCK\n\thelp\n\t  This text says depends on NOTHING\n\t  and config FAKE.\n\nif ATA\nconfig LEVEL_HELP\n\tbool \"x\"\n\thelp\n\tHelp level with the keyword:\n\tsource to the driver, if you have one.\n\nconfig SATA_AHCI\n\ttristate \"AHCI\"\n\tdepends on PCI\n\tselect SATA_HOST\nconfig HIDDEN\n\tbool\n\tdefault y if PCI\nconfig COND_PROMPT\n\tbool \"cond\" if EXPERT\nendif\nendmenu\n",
            ),
        ]);
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);
        assert!(!k.defs.contains_key("FAKE"), "help text must be skipped");
        let ahci = &k.defs["SATA_AHCI"][0];
        assert_eq!(ahci.file, "drivers/Kconfig");
        assert_eq!(ahci.line, 18);
        assert!(ahci.has_prompt);
        let deps: Vec<String> = ahci.depends.iter().map(|d| d.expr.to_string()).collect();
        assert_eq!(deps, vec!["HAS_IOMEM", "ATA", "PCI"]);
        assert!(
            matches!(ahci.depends[0].origin, Origin::Menu { ref title, .. } if title == "Device Drivers")
        );
        assert!(matches!(
            ahci.depends[1].origin,
            Origin::If { line: 11, .. }
        ));
        assert!(matches!(ahci.depends[2].origin, Origin::Own));
        assert!(!k.defs["HIDDEN"][0].has_prompt);
        assert_eq!(
            k.defs["COND_PROMPT"][0].depends.last().unwrap().origin,
            Origin::Prompt
        );
        assert_eq!(k.selects["SATA_HOST"][0].by, "SATA_AHCI");
        assert_eq!(k.selects["OF"][0].by, "ARM64");
        let ata = &k.defs["ATA"][0];
        assert_eq!(
            ata.depends
                .iter()
                .map(|d| d.expr.to_string())
                .collect::<Vec<_>>(),
            vec!["HAS_IOMEM", "BLOCK"]
        );

        let c = cfg("CONFIG_HAS_IOMEM=y\nCONFIG_BLOCK=y\nCONFIG_ATA=m\n");
        let unmet = k.unmet("SATA_AHCI", Tri::M, &c);
        assert_eq!(
            unmet[0]
                .1
                .iter()
                .map(|d| d.expr.to_string())
                .collect::<Vec<_>>(),
            vec!["PCI"]
        );
    }

    #[test]
    fn unbalanced_blocks_and_missing_files_are_warnings_not_failures() {
        let k = tree(&[(
            "Kconfig",
            "source \"missing/Kconfig\"\nosource \"also/missing\"\nendif\nconfig A\n\tbool \"a\"\n",
        )]);
        assert_eq!(k.warnings.len(), 2, "{:?}", k.warnings);
        assert!(k.defs.contains_key("A"));
    }
}
