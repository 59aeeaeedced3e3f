//! The Samba password, read without echo from the terminal (twice) or from
//! standard input; it goes only to the engine, which stages its hash.

use anyhow::{Context as _, bail};
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::AsRawFd as _;

pub fn from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    Ok(strip_newline(line))
}

pub fn prompt_twice(what: &str) -> anyhow::Result<String> {
    let tty = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .context("no terminal to type the password on; pipe it in with --password-stdin")?;
    let first = hidden(&tty, &format!("{what}: "))?;
    let second = hidden(&tty, "Again: ")?;
    if first != second {
        bail!("the two passwords differ; nothing was changed");
    }
    Ok(first)
}

/// One line from the terminal with echo off, restored whatever happens.
fn hidden(tty: &File, prompt: &str) -> anyhow::Result<String> {
    let fd = tty.as_raw_fd();
    // SAFETY: termios is plain data, filled in by tcgetattr before use.
    let mut term: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open terminal for the duration of the call.
    if unsafe { libc::tcgetattr(fd, &mut term) } != 0 {
        bail!(
            "cannot read the terminal's settings: {}",
            std::io::Error::last_os_error()
        );
    }
    let saved = term;
    term.c_lflag &= !libc::ECHO;
    term.c_lflag |= libc::ECHONL;
    // SAFETY: as above; `term` is a valid termios from tcgetattr.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &term) } != 0 {
        bail!(
            "cannot turn the terminal's echo off: {}",
            std::io::Error::last_os_error()
        );
    }
    let mut line = String::new();
    let read = (|| {
        let mut out = tty;
        out.write_all(prompt.as_bytes())?;
        out.flush()?;
        BufReader::new(tty).read_line(&mut line)
    })();
    // SAFETY: restores the settings read above on the same terminal.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
    read.context("cannot read the password from the terminal")?;
    Ok(strip_newline(line))
}

fn strip_newline(mut line: String) -> String {
    while line.ends_with(['\n', '\r']) {
        line.pop();
    }
    line
}
