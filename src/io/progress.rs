//! Progress bars for long work. indicatif hides them when stderr is not a
//! terminal, so logs and tests stay clean.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{self, Read};

pub fn bytes(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Counts bytes read through it on a bar.
pub struct ProgressReader<R> {
    inner: R,
    bar: ProgressBar,
}

impl<R> ProgressReader<R> {
    pub fn new(inner: R, bar: ProgressBar) -> Self {
        ProgressReader { inner, bar }
    }
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}
