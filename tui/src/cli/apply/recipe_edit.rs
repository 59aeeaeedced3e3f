//! `share add|remove`: the new share as a table of the recipe, added to or
//! taken out of nasforge.toml's text by [`recipe_shares`].

use super::Confirm;
use anyhow::bail;
use clap::Args;
use nasforge_setup::recipe_shares;
use toml_edit::{Array, InlineTable, Table, Value, value};

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

pub fn add(text: &str, new: &NewShare) -> anyhow::Result<String> {
    if new.smb_users.is_empty() && !new.guest && new.nfs.is_none() {
        bail!("say who reaches the share: --smb-users USER,..., --guest, or --nfs CLIENTS");
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
    recipe_shares::push(text, &new.name, share)
}

pub fn remove(text: &str, name: &str) -> anyhow::Result<String> {
    recipe_shares::remove(text, name)
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
