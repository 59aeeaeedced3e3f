//! `share add|remove` as edits of nasforge.toml's text: the user's comments,
//! order and layout stay; only the one share is added or taken out.

use super::Confirm;
use anyhow::{Context as _, bail};
use clap::Args;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value, value};

#[derive(Args)]
pub struct NewShare {
    /// The share's name, as clients see it.
    name: String,
    /// Its directory, under an array's mount; created when missing.
    #[arg(long, value_name = "DIR")]
    path: String,
    /// Users who may open it over SMB (they must exist: `user add`).
    #[arg(long, value_name = "USER,...", value_delimiter = ',')]
    smb_users: Vec<String>,
    /// Anyone on the network may read it over SMB without a password.
    #[arg(long)]
    guest: bool,
    /// Export it over NFS to these clients ("192.168.1.0/24", space-separated).
    #[arg(long, value_name = "CLIENTS")]
    nfs: Option<String>,
    /// Clients may only read.
    #[arg(long)]
    read_only: bool,
    #[command(flatten)]
    pub confirm: Confirm,
}

fn document(text: &str) -> anyhow::Result<DocumentMut> {
    text.parse().context("nasforge.toml does not read as TOML")
}

pub fn add(text: &str, new: &NewShare) -> anyhow::Result<String> {
    if new.smb_users.is_empty() && !new.guest && new.nfs.is_none() {
        bail!("say who reaches the share: --smb-users USER,..., --guest, or --nfs CLIENTS");
    }
    let mut doc = document(text)?;
    if names(&doc)
        .iter()
        .any(|n| n.eq_ignore_ascii_case(&new.name))
    {
        bail!(
            "a share named '{}' is already in nasforge.toml (Samba ignores case); remove it first with `nasforge-setup share remove {}`, or edit the file",
            new.name,
            new.name
        );
    }
    let mut share = Table::new();
    share["name"] = value(new.name.as_str());
    share["path"] = value(new.path.as_str());
    if !new.smb_users.is_empty() || new.guest {
        let mut smb = InlineTable::new();
        smb.insert(
            "users",
            Value::Array(new.smb_users.iter().collect::<Array>()),
        );
        if new.guest {
            smb.insert("guest", true.into());
        }
        if new.read_only {
            smb.insert("readonly", true.into());
        }
        share["smb"] = value(smb);
    }
    if let Some(clients) = &new.nfs {
        let mut nfs = InlineTable::new();
        nfs.insert("clients", clients.as_str().into());
        if new.read_only {
            nfs.insert("readonly", true.into());
        }
        share["nfs"] = value(nfs);
    }
    match doc.get_mut("shares") {
        None => {
            let mut all = ArrayOfTables::new();
            all.push(share);
            doc.insert("shares", Item::ArrayOfTables(all));
        }
        Some(Item::ArrayOfTables(all)) => all.push(share),
        Some(Item::Value(Value::Array(all))) => all.push(share.into_inline_table()),
        Some(_) => {
            bail!("`shares` in nasforge.toml is neither [[shares]] tables nor a list of them")
        }
    }
    Ok(doc.to_string())
}

pub fn remove(text: &str, name: &str) -> anyhow::Result<String> {
    let mut doc = document(text)?;
    let all = names(&doc);
    let Some(index) = all.iter().position(|n| n.eq_ignore_ascii_case(name)) else {
        bail!(
            "there is no share '{name}' in nasforge.toml; its shares are: {}",
            if all.is_empty() {
                "none".to_string()
            } else {
                all.join(", ")
            }
        );
    };
    let left = match doc.get_mut("shares") {
        Some(Item::ArrayOfTables(tables)) => {
            tables.remove(index);
            tables.len()
        }
        Some(Item::Value(Value::Array(list))) => {
            list.remove(index);
            list.len()
        }
        _ => unreachable!("names() found the share in one of these"),
    };
    if left == 0 {
        doc.remove("shares");
    }
    Ok(doc.to_string())
}

/// The names of the shares, in order, in either form a recipe may use.
fn names(doc: &DocumentMut) -> Vec<String> {
    let name = |v: Option<&str>| v.unwrap_or_default().to_string();
    match doc.get("shares") {
        Some(Item::ArrayOfTables(tables)) => tables
            .iter()
            .map(|t| name(t.get("name").and_then(Item::as_str)))
            .collect(),
        Some(Item::Value(Value::Array(list))) => list
            .iter()
            .map(|v| {
                name(
                    v.as_inline_table()
                        .and_then(|t| t.get("name"))
                        .and_then(Value::as_str),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nasforge_engine::spec::DeviceRecipe;
    use std::path::Path;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        share: NewShare,
    }

    fn new_share(args: &[&str]) -> NewShare {
        Cli::parse_from(std::iter::once("x").chain(args.iter().copied())).share
    }

    const TEXT: &str = "# my NAS\n[storage]\nmode = \"unattended\" # built at first boot\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n\n# the family's files\n[[shares]]\nname = \"media\"\npath = \"/srv/data/media\"\nsmb = { users = [\"admin\"] }\n";

    #[test]
    fn a_share_is_added_after_the_others_and_every_comment_stays() {
        let share = new_share(&[
            "photos",
            "--path",
            "/srv/data/photos",
            "--smb-users",
            "admin,bob",
            "--nfs",
            "10.0.0.0/8",
            "--read-only",
        ]);
        let out = add(TEXT, &share).unwrap();
        assert!(out.starts_with(TEXT), "{out}");
        assert!(out.ends_with("[[shares]]\nname = \"photos\"\npath = \"/srv/data/photos\"\nsmb = { users = [\"admin\", \"bob\"], readonly = true }\nnfs = { clients = \"10.0.0.0/8\", readonly = true }\n"), "{out}");
        let recipe = DeviceRecipe::parse(&out, Path::new("nasforge.toml")).unwrap();
        assert_eq!(recipe.shares.len(), 2);
        let again = add(
            &out,
            &new_share(&["PHOTOS", "--path", "/srv/data/x", "--guest"]),
        )
        .unwrap_err();
        assert!(
            again.to_string().contains("already in nasforge.toml"),
            "{again}"
        );
        let nobody = add(TEXT, &new_share(&["x", "--path", "/srv/data/x"])).unwrap_err();
        assert!(nobody.to_string().contains("--smb-users"), "{nobody}");
    }

    #[test]
    fn a_share_is_removed_and_the_rest_of_the_file_stays() {
        let with = add(
            TEXT,
            &new_share(&["photos", "--path", "/srv/data/photos", "--guest"]),
        )
        .unwrap();
        let out = remove(&with, "media").unwrap();
        assert!(
            out.starts_with("# my NAS\n[storage]\nmode = \"unattended\" # built at first boot\n"),
            "{out}"
        );
        assert!(!out.contains("media") && out.contains("photos"), "{out}");
        let last = remove(&out, "photos").unwrap();
        assert!(!last.contains("shares"), "{last}");
        DeviceRecipe::parse(&last, Path::new("nasforge.toml")).unwrap();
        let missing = remove(TEXT, "nope").unwrap_err().to_string();
        assert!(missing.contains("its shares are: media"), "{missing}");
    }

    #[test]
    fn a_list_of_inline_shares_is_edited_in_its_own_form() {
        let text = TEXT.replace("[[shares]]\nname = \"media\"\npath = \"/srv/data/media\"\nsmb = { users = [\"admin\"] }\n", "")
            .replace("# my NAS\n", "# my NAS\nshares = [{ name = \"media\", path = \"/srv/data/media\", smb = { users = [\"admin\"] } }]\n");
        let out = add(
            &text,
            &new_share(&["photos", "--path", "/srv/data/photos", "--guest"]),
        )
        .unwrap();
        let recipe = DeviceRecipe::parse(&out, Path::new("nasforge.toml")).unwrap();
        assert_eq!(recipe.shares[1].name, "photos");
        let back = remove(&out, "photos").unwrap();
        assert_eq!(
            DeviceRecipe::parse(&back, Path::new("n"))
                .unwrap()
                .shares
                .len(),
            1
        );
    }
}
