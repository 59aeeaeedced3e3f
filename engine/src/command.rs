//! A command line as the engine records, prints and runs it, and what a
//! command that only reads returns: the ground every floor that runs or
//! asks something stands on.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cmd {
    pub argv: Vec<String>,
    /// Text in stdout that means failure although the exit status is 0
    /// (pdbedit prints "failed" per account and exits 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fails_if_stdout_has: Option<String>,
    /// A device path the command works on that may be gone when the step
    /// is re-run: an old partition that the interrupted run's whole-disk
    /// wipefs already removed. The command is skipped when it is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_if_present: Option<String>,
}

impl Cmd {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Cmd {
        Cmd {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            fails_if_stdout_has: None,
            only_if_present: None,
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted: Vec<String> = self.argv.iter().map(|a| shell_quote(a)).collect();
        f.write_str(&quoted.join(" "))
    }
}

pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What a command that only reads said: its exit status and output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub status: i32,
    pub stdout: String,
}
