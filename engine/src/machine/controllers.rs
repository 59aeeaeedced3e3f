//! Names for the PCI storage controllers NAS boards use, from the data table
//! `controllers.tsv` beside this file (edit the table, not this code).

const TABLE: &str = include_str!("controllers.tsv");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub name: &'static str,
    /// A caveat worth showing in the plan; None when there is nothing to say.
    pub note: Option<&'static str>,
}

fn rows() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let mut cols = line.split('\t');
            let id = cols.next().unwrap_or_default().trim();
            let name = cols.next().unwrap_or_default().trim();
            let note = cols.next().unwrap_or_default().trim();
            (id, name, note)
        })
}

/// The exact chip when the table knows it, else the vendor's name.
pub fn lookup(vendor: u16, device: u16) -> Option<Known> {
    let exact = format!("{vendor:04x}:{device:04x}");
    let vendor_only = format!("{vendor:04x}");
    let find = |id: &str| {
        rows()
            .find(|(i, _, _)| *i == id)
            .map(|(_, name, note)| Known {
                name,
                note: (!note.is_empty()).then_some(note),
            })
    };
    find(&exact).or_else(|| find(&vendor_only))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_seed_controllers() {
        assert_eq!(lookup(0x197b, 0x0585).unwrap().name, "JMicron JMB585");
        assert_eq!(lookup(0x1b21, 0x1166).unwrap().name, "ASMedia ASM1166");
        let marvell = lookup(0x1b4b, 0x9215).unwrap();
        assert_eq!(marvell.name, "Marvell 88SE9215");
        assert!(marvell.note.unwrap().contains("43160"));
        assert_eq!(
            lookup(0x1b4b, 0x1234).unwrap().name,
            "Marvell",
            "vendor fallback"
        );
        assert_eq!(lookup(0x10de, 0x0001), None);
    }

    #[test]
    fn every_row_is_well_formed() {
        for (id, name, _) in rows() {
            let ok = match id.split_once(':') {
                Some((v, d)) => {
                    v.len() == 4
                        && d.len() == 4
                        && u16::from_str_radix(v, 16).is_ok()
                        && u16::from_str_radix(d, 16).is_ok()
                }
                None => id.len() == 4 && u16::from_str_radix(id, 16).is_ok(),
            };
            assert!(ok && !name.is_empty(), "bad row: {id} {name}");
        }
    }
}
