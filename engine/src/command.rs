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
    /// What the command reads on stdin (an alert's message for msmtp or
    /// curl); without it, stdin is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

impl Cmd {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Cmd {
        Cmd {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            fails_if_stdout_has: None,
            only_if_present: None,
            stdin: None,
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Asks the machine something without changing it: the one way every floor
/// runs a command whose answer it reads (zpool, wipefs, smartctl). The
/// runner is an `Ask`; so is [`System`] for code that only reads; tests
/// answer through the runner's recorder.
pub trait Ask {
    /// A non-zero exit status is part of the answer, not an error: smartctl
    /// reports a failing disk through it.
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError>;
}

#[derive(Debug, thiserror::Error)]
#[error("`{cmd}` could not be started: {source}; is its package installed?")]
pub struct SpawnError {
    pub cmd: String,
    pub source: std::io::Error,
}

/// Runs each command as it is.
pub struct System;

impl Ask for System {
    fn query(&mut self, cmd: &Cmd) -> Result<Query, SpawnError> {
        use std::process::{Command, Stdio};
        let spawn_error = |source| SpawnError {
            cmd: cmd.to_string(),
            source,
        };
        let output = match &cmd.stdin {
            None => Command::new(&cmd.argv[0])
                .args(&cmd.argv[1..])
                .stdin(Stdio::null())
                .output(),
            Some(input) => Command::new(&cmd.argv[0])
                .args(&cmd.argv[1..])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    if let Some(mut pipe) = child.stdin.take() {
                        // A command that exits early (a bad URL) closes its
                        // end; its exit status says why, not the broken pipe.
                        let _ = std::io::Write::write_all(&mut pipe, input.as_bytes());
                    }
                    child.wait_with_output()
                }),
        }
        .map_err(spawn_error)?;
        Ok(Query {
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_reaches_the_command_and_a_failure_is_an_answer() {
        let cmd = Cmd {
            stdin: Some("a message\n".into()),
            ..Cmd::new(&["sh", "-c", "cat; echo refused >&2; exit 3"])
        };
        let answer = System.query(&cmd).unwrap();
        assert_eq!(
            answer,
            Query {
                status: 3,
                stdout: "a message\n".into(),
                stderr: "refused\n".into(),
            }
        );
        let closed = System.query(&Cmd::new(&["cat"])).unwrap();
        assert_eq!(closed.stdout, "", "no stdin: closed, not inherited");
    }

    #[test]
    fn a_program_that_is_not_there_names_itself() {
        let err = System
            .query(&Cmd::new(&["nasforge-no-such-tool", "--flag"]))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`nasforge-no-such-tool --flag` could not be started: "),
            "{err}"
        );
        assert!(
            err.to_string().ends_with("is its package installed?"),
            "{err}"
        );
    }
}
