//! How Macs and Linux desktops find the NAS: avahi-daemon answers
//! `<hostname>.local` and announces, from one static service file, the SMB
//! server, the device model Finder draws, and the Time Machine shares.
//!
//! Samba could announce itself through avahi, but it publishes `sys=adVF=0x100`
//! without the `waMa=0` macOS's own servers send, and only at smbd's start;
//! one file written here says exactly what is announced and is read back by
//! `avahi-browse` in the tests. Samba's own announcement is switched off
//! (`multicast dns register = no`) so the two never collide under one name.

use crate::spec::Share;

pub const SERVICE_FILE: &str = "/etc/avahi/services/nasforge.service";

/// The model Finder is told, here and in Samba's AAPL reply (`fruit:model`):
/// Samba's own default, which its vfs.fruit conformance tests expect.
pub const MODEL: &str = "MacSamba";

pub fn service_file(shares: &[&Share]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" standalone='no'?>\n\
         <!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
         <!-- Written by nasforge-setup from the recipe's [[shares]]. -->\n\
         <service-group>\n\
         \x20 <name replace-wildcards=\"yes\">%h</name>\n\
         \x20 <service>\n\
         \x20   <type>_smb._tcp</type>\n\
         \x20   <port>445</port>\n\
         \x20 </service>\n\
         \x20 <service>\n\
         \x20   <type>_device-info._tcp</type>\n\
         \x20   <port>0</port>\n",
    );
    out += &format!("    <txt-record>model={MODEL}</txt-record>\n  </service>\n");
    let machines: Vec<&&Share> = shares
        .iter()
        .filter(|s| s.smb.as_ref().is_some_and(|smb| smb.timemachine))
        .collect();
    if !machines.is_empty() {
        // The TXT fields macOS reads to offer a disk in Time Machine's
        // settings: the server's flags, then one `dkN` per share.
        out += "  <service>\n    <type>_adisk._tcp</type>\n    <port>9</port>\n";
        out += "    <txt-record>sys=waMa=0,adVF=0x100</txt-record>\n";
        for (i, share) in machines.iter().enumerate() {
            out += &format!(
                "    <txt-record>dk{i}=adVN={},adVF=0x82</txt-record>\n",
                xml_text(&share.name)
            );
        }
        out += "  </service>\n";
    }
    out += "</service-group>\n";
    out
}

fn xml_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&apos;",
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Smb;

    fn share(name: &str, timemachine: bool) -> Share {
        Share {
            quota: None,
            name: name.into(),
            path: "/srv/data".into(),
            smb: Some(Smb {
                users: vec!["admin".into()],
                timemachine,
                timemachine_max_size: None,
                readonly: false,
                guest: false,
            }),
            nfs: None,
        }
    }

    #[test]
    fn time_machine_shares_get_a_disk_record_each() {
        let (a, b, c) = (
            share("media", false),
            share("Macs & co", true),
            share("backup", true),
        );
        let xml = service_file(&[&a, &b, &c]);
        assert!(xml.contains("<type>_smb._tcp</type>\n    <port>445</port>"));
        assert!(xml.contains("<txt-record>model=MacSamba</txt-record>"));
        assert!(xml.contains("<txt-record>sys=waMa=0,adVF=0x100</txt-record>"));
        assert!(xml.contains("<txt-record>dk0=adVN=Macs &amp; co,adVF=0x82</txt-record>"));
        assert!(xml.contains("<txt-record>dk1=adVN=backup,adVF=0x82</txt-record>"));
        assert!(!xml.contains("media"));
    }

    #[test]
    fn without_time_machine_there_is_no_disk_record() {
        let a = share("media", false);
        assert!(!service_file(&[&a]).contains("_adisk"));
    }
}
