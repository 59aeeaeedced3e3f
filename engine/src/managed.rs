//! Lines nasforge owns inside files it shares with the system (/etc/fstab,
//! smb.conf): kept between marker comments and replaced as a whole, so
//! writing them twice leaves one copy.

pub const BEGIN: &str = "# >>> nasforge-setup: managed block, rewritten on each run";
pub const END: &str = "# <<< nasforge-setup";

/// `existing` with the managed block replaced by `block` (appended at the
/// end when there was none).
pub fn merge(existing: &str, block: &str) -> String {
    let mut kept = Vec::new();
    let mut inside = false;
    for line in existing.lines() {
        if line == BEGIN {
            inside = true;
        } else if line == END && inside {
            inside = false;
        } else if !inside {
            kept.push(line);
        }
    }
    while kept.last().is_some_and(|l| l.trim().is_empty()) {
        kept.pop();
    }
    let mut out = kept.join("\n");
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str(block.trim_end());
    out.push('\n');
    out.push_str(END);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_twice_keeps_one_block_and_the_users_lines() {
        let fstab = "proc /proc proc defaults 0 0\nPARTUUID=1234-02 / ext4 defaults,noatime 0 1\n";
        let once = merge(fstab, "UUID=a /srv/data ext4 defaults,nofail 0 2");
        let twice = merge(&once, "UUID=b /srv/data ext4 defaults,nofail 0 2");
        assert!(twice.starts_with(fstab));
        assert_eq!(twice.matches(BEGIN).count(), 1);
        assert!(twice.contains("UUID=b") && !twice.contains("UUID=a"));
        assert_eq!(
            merge(&twice, "UUID=b /srv/data ext4 defaults,nofail 0 2"),
            twice
        );
    }
}
