//! The spinner a long make shows: a step count on a terminal, a line a
//! minute in a log.

use super::say;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A spinner with a step count on a terminal; a line a minute otherwise.
pub(crate) struct Progress {
    label: &'static str,
    bar: indicatif::ProgressBar,
    tty: bool,
    start: Instant,
    last_print: std::cell::Cell<Instant>,
    steps: std::cell::Cell<u64>,
    what: String,
}

impl Progress {
    pub(crate) fn new(label: &'static str, what: &str) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .expect("valid template"),
        );
        if tty {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress {
            label,
            bar,
            tty,
            start: Instant::now(),
            last_print: std::cell::Cell::new(Instant::now()),
            steps: std::cell::Cell::new(0),
            what: what.to_string(),
        }
    }

    pub(crate) fn line(&self, line: &str) {
        // kbuild's quiet lines: "  CC      drivers/ata/ahci.o"
        let t = line.trim_start();
        let verb = t.split_whitespace().next().unwrap_or("");
        let is_step = line.starts_with("  ")
            && !verb.is_empty()
            && verb.len() <= 8
            && verb.chars().all(|c| {
                c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '[' || c == ']'
            });
        if !is_step {
            return;
        }
        self.steps.set(self.steps.get() + 1);
        let msg = format!(
            "{}: {} steps, {}",
            self.what,
            self.steps.get(),
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        if self.tty {
            self.bar.set_message(msg);
        } else if self.last_print.get().elapsed() >= Duration::from_secs(60) {
            self.last_print.set(Instant::now());
            say(
                self.label,
                format!("{msg} ({}s)", self.start.elapsed().as_secs()),
            );
        }
    }

    pub(crate) fn finish(self) {
        self.bar.finish_and_clear();
    }
}
