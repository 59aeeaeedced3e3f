//! A child process fed its stdin, for the workstation's and the board's tests.

use std::io::Write;
use std::process::{Child, Command, Stdio};

/// `cmd` started with `input` on its stdin, then closed so that it sees the
/// end of its input.
pub fn spawn_with_stdin(cmd: &mut Command, input: &str) -> Child {
    let mut child = cmd
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child
}
