//! The `shares` of nasforge.toml on the card, edited as text: the user's
//! comments, order and layout stay, and only the shares that change are
//! touched. `share add|remove` and the manage view's share list both write
//! through here.

use anyhow::{Context as _, bail};
use nasforge_engine::spec::{DeviceRecipe, Share};
use std::path::Path;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

fn document(text: &str) -> anyhow::Result<DocumentMut> {
    text.parse().context("nasforge.toml does not read as TOML")
}

/// `text` with `share` after the others, in the form the file already uses
/// (`[[shares]]` tables or a list of inline ones).
pub fn push(text: &str, name: &str, share: Table) -> anyhow::Result<String> {
    let mut doc = document(text)?;
    if names(&doc).iter().any(|n| n.eq_ignore_ascii_case(name)) {
        bail!(
            "a share named '{name}' is already in nasforge.toml (Samba ignores case); remove it first with `nasforge-setup share remove {name}`, or edit the file"
        );
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

/// `text` without the share `name` (any case); the key goes with the last.
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

/// `text` with exactly `shares`: the ones no longer listed removed, a
/// changed one rewritten where it stands, new ones added after the rest.
/// The result must read back as those shares, or nothing is returned.
pub fn set(text: &str, shares: &[Share]) -> anyhow::Result<String> {
    let mut text = text.to_string();
    let before = names(&document(&text)?);
    for gone in before
        .iter()
        .filter(|n| !shares.iter().any(|s| s.name.eq_ignore_ascii_case(n)))
    {
        text = remove(&text, gone)?;
    }
    let current = DeviceRecipe::parse(&text, Path::new("nasforge.toml"))?.shares;
    for share in shares {
        match current
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(&share.name))
        {
            Some(i) if current[i] == *share => {}
            Some(i) => text = replace(&text, i, table(share)?)?,
            None => text = push(&text, &share.name, table(share)?)?,
        }
    }
    let mut back = DeviceRecipe::parse(&text, Path::new("nasforge.toml"))?.shares;
    let mut wanted = shares.to_vec();
    back.sort_by(|a, b| a.name.cmp(&b.name));
    wanted.sort_by(|a, b| a.name.cmp(&b.name));
    if back != wanted {
        bail!("internal: nasforge.toml would not read back the chosen shares");
    }
    Ok(text)
}

fn replace(text: &str, index: usize, share: Table) -> anyhow::Result<String> {
    let mut doc = document(text)?;
    match doc.get_mut("shares") {
        Some(Item::ArrayOfTables(tables)) => {
            let old = tables.get_mut(index).context("no such share")?;
            let decor = old.decor().clone();
            *old = share;
            *old.decor_mut() = decor;
        }
        Some(Item::Value(Value::Array(list))) => {
            list.replace(index, share.into_inline_table());
        }
        _ => bail!("`shares` in nasforge.toml is neither [[shares]] tables nor a list of them"),
    }
    Ok(doc.to_string())
}

/// A share as a `[[shares]]` table as `share add` writes one: name and path
/// first, `smb` and `nfs` inline, what is left at its default left out.
fn table(share: &Share) -> anyhow::Result<Table> {
    let toml::Value::Table(fields) = toml::Value::try_from(share)? else {
        bail!("internal: a share is not a table");
    };
    let mut out = Table::new();
    let first = ["name", "path"];
    let keys = first.iter().copied().chain(
        fields
            .keys()
            .map(String::as_str)
            .filter(|k| !first.contains(k)),
    );
    for key in keys {
        if let Some(v) = fields.get(key) {
            out[key] = Item::Value(inline(v));
        }
    }
    Ok(out)
}

/// false and an empty list are what serde reads when the key is absent.
fn is_default(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Boolean(false)) || matches!(v, toml::Value::Array(a) if a.is_empty())
}

fn inline(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => s.as_str().into(),
        toml::Value::Integer(i) => (*i).into(),
        toml::Value::Float(f) => (*f).into(),
        toml::Value::Boolean(b) => (*b).into(),
        toml::Value::Datetime(d) => d.to_string().into(),
        toml::Value::Array(items) => Value::Array(items.iter().map(inline).collect::<Array>()),
        toml::Value::Table(fields) => {
            let mut t = InlineTable::new();
            for (key, v) in fields.iter().filter(|(_, v)| !is_default(v)) {
                t.insert(key, inline(v));
            }
            Value::InlineTable(t)
        }
    }
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

    const TEXT: &str = "# my NAS\n[storage]\nmode = \"unattended\" # built at first boot\n[[storage.arrays]]\nname = \"data\"\nlevel = \"raid1\"\ndisks = { count = 2 }\nfilesystem = \"ext4\"\nmount = \"/srv/data\"\n\n# the family's files\n[[shares]]\nname = \"media\"\npath = \"/srv/data/media\"\nsmb = { users = [\"admin\"] }\n\n# scans from the printer\n[[shares]]\nname = \"scans\"\npath = \"/srv/data/scans\"\nnfs = { clients = \"10.0.0.0/8\" }\n";

    fn shares(text: &str) -> Vec<Share> {
        DeviceRecipe::parse(text, Path::new("n")).unwrap().shares
    }

    #[test]
    fn only_the_shares_that_change_are_touched_and_every_comment_stays() {
        let mut wanted = shares(TEXT);
        wanted[1].nfs.as_mut().unwrap().readonly = true;
        let mut photos = wanted[0].clone();
        photos.name = "photos".into();
        photos.path = "/srv/data/photos".into();
        wanted.push(photos);
        let out = set(TEXT, &wanted).unwrap();
        assert_eq!(shares(&out), wanted);
        assert!(
            out.starts_with(&TEXT[..TEXT.find("[[shares]]\nname = \"scans\"").unwrap()]),
            "media untouched: {out}"
        );
        assert!(
            out.contains("# scans from the printer\n[[shares]]\nname = \"scans\""),
            "{out}"
        );
        assert!(
            out.contains("name = \"scans\"\npath = \"/srv/data/scans\"\nnfs = { clients = [\"10.0.0.0/8\"], readonly = true }"),
            "{out}"
        );

        let only_scans = set(&out, &wanted[1..2]).unwrap();
        assert_eq!(shares(&only_scans), &wanted[1..2]);
        assert!(
            only_scans
                .contains("# my NAS\n[storage]\nmode = \"unattended\" # built at first boot\n")
        );
        let none = set(&only_scans, &[]).unwrap();
        assert!(!none.contains("shares"), "{none}");
        assert_eq!(
            set(TEXT, &shares(TEXT)).unwrap(),
            TEXT,
            "nothing changed, nothing written"
        );
    }
}
