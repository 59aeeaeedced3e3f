//! Names for the PCI storage controllers NAS boards use, from the data table
//! `controllers.tsv` beside this file (edit the table, not this code).

const TABLE: &str = include_str!("controllers.tsv");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub name: &'static str,
    /// A caveat worth showing in the plan; None when there is nothing to say.
    pub note: Option<&'static str>,
    /// The kernel module a SAS HBA needs; None for SATA chips, which the
    /// generic ahci driver takes by their PCI class.
    pub sas_driver: Option<&'static str>,
}

struct Row {
    id: &'static str,
    name: &'static str,
    note: &'static str,
    sas_driver: &'static str,
}

fn rows() -> impl Iterator<Item = Row> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let mut cols = line.split('\t').map(str::trim);
            Row {
                id: cols.next().unwrap_or_default(),
                name: cols.next().unwrap_or_default(),
                note: cols.next().unwrap_or_default(),
                sas_driver: cols.next().unwrap_or_default(),
            }
        })
}

/// The exact chip when the table knows it, else the vendor's name.
pub fn lookup(vendor: u16, device: u16) -> Option<Known> {
    let exact = format!("{vendor:04x}:{device:04x}");
    let vendor_only = format!("{vendor:04x}");
    let find = |id: &str| {
        rows().find(|row| row.id == id).map(|row| Known {
            name: row.name,
            note: (!row.note.is_empty()).then_some(row.note),
            sas_driver: (!row.sas_driver.is_empty()).then_some(row.sas_driver),
        })
    };
    find(&exact).or_else(|| find(&vendor_only))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::hardware;

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
    fn names_lsi_sas_hbas_with_their_driver() {
        let sas1068 = lookup(0x1000, 0x0054).unwrap();
        assert_eq!(
            (sas1068.name, sas1068.sas_driver, sas1068.note),
            ("LSI SAS1068", Some("mptsas"), None)
        );
        assert_eq!(lookup(0x1000, 0x0072).unwrap().sas_driver, Some("mpt3sas"));
        let megaraid = lookup(0x1000, 0x0079).unwrap();
        assert_eq!(megaraid.sas_driver, Some("megaraid_sas"));
        assert!(
            megaraid.note.unwrap().contains("IT firmware"),
            "RAID volumes hide the disks from md and ZFS"
        );
        let fallback = lookup(0x1000, 0x1234).unwrap();
        assert_eq!((fallback.name, fallback.sas_driver), ("LSI/Broadcom", None));
        assert_eq!(lookup(0x197b, 0x0585).unwrap().sas_driver, None);
    }

    #[test]
    fn every_row_is_well_formed() {
        for Row {
            id,
            name,
            sas_driver,
            ..
        } in rows()
        {
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
            assert!(
                sas_driver.is_empty() || hardware::SAS_DRIVERS.contains(&sas_driver),
                "{id}: {sas_driver} is not a SAS HBA driver discovery knows"
            );
        }
    }
}
