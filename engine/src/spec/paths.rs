//! Directory paths as both sections write them: absolute, in the one
//! spelling every file they end up in reads the same way.

use super::{SpecProblem, problem};

pub(super) fn check_absolute_dir(at: &str, path: &str, out: &mut Vec<SpecProblem>) {
    if !is_safe_path(path) {
        out.push(problem(
            at.to_string(),
            format!(
                "`{}` must be an absolute path made of letters, digits and . _ - /, without empty, `.` or `..` parts, e.g. \"/srv/data\"",
                path.escape_debug()
            ),
        ));
    }
}

/// Paths go unquoted into fstab, smb.conf (which expands `%`), exports
/// (where `,` and `(` start options) and command lines, each with its own
/// escapes; a set of characters none of them treats specially is the one
/// spelling they all read the same way.
pub(super) fn is_safe_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    path.len() < 4096
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        && (rest.is_empty()
            || rest
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != ".."))
}

/// `path` is strictly below `dir`.
pub fn is_under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
        || (dir == "/" && path != "/")
}
