//! One event to one channel: the msmtp or curl command line and what it
//! reads on stdin, and the seam ([`Exec`]) that runs it.

use super::{Event, one_line};
use crate::paths::MSMTPRC;
use crate::steps::alerts::{Email, Routing};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Email,
    Webhook,
    Ntfy,
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Email => "email",
            Channel::Webhook => "webhook",
            Channel::Ntfy => "ntfy",
        })
    }
}

impl Routing {
    /// The channels set up, in the order they are tried.
    pub fn channels(&self) -> Vec<Channel> {
        [
            (Channel::Email, self.email.is_some()),
            (Channel::Webhook, self.webhook.is_some()),
            (Channel::Ntfy, self.ntfy.is_some()),
        ]
        .into_iter()
        .filter_map(|(c, on)| on.then_some(c))
        .collect()
    }
}

/// Runs a delivery command with `stdin`; an error says why it failed.
pub trait Exec {
    fn run(&mut self, argv: &[String], stdin: &[u8]) -> Result<(), String>;
}

/// Runs the command for real. Each has its own time limit (msmtprc's
/// `timeout`, curl's `--max-time`), so a dead relay cannot hang an alert.
pub struct SystemExec;

impl Exec for SystemExec {
    fn run(&mut self, argv: &[String], stdin: &[u8]) -> Result<(), String> {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "`{}` could not be started: {e}; is its package installed?",
                    argv[0]
                )
            })?;
        if let Some(mut input) = child.stdin.take() {
            // A command that exits early (bad URL) closes its end; its exit
            // status says why, not the broken pipe.
            let _ = input.write_all(stdin);
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "`{}` failed ({}): {}",
                argv[0],
                out.status,
                one_line(stderr.trim())
            ))
        }
    }
}

/// curl, quiet but for errors, failing on an HTTP error status, within
/// time limits; `-q` first so no user's ~/.curlrc changes it.
fn curl(url: &str, headers: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "curl",
        "-q",
        "--silent",
        "--show-error",
        "--fail",
        "--connect-timeout",
        "10",
        "--max-time",
        "30",
        "--data-binary",
        "@-",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for h in headers {
        argv.push("-H".into());
        argv.push(h.clone());
    }
    argv.push(url.to_string());
    argv
}

/// The command that sends `event` by `channel`, and its stdin; None when
/// the routing no longer has that channel.
pub fn command(
    channel: Channel,
    routing: &Routing,
    event: &Event,
) -> Option<(Vec<String>, Vec<u8>)> {
    match channel {
        Channel::Email => {
            let email = routing.email.as_ref()?;
            let argv = ["msmtp", "-C", MSMTPRC, "-t"].map(String::from).to_vec();
            Some((argv, mail(email, event).into_bytes()))
        }
        Channel::Webhook => {
            let url = routing.webhook.as_ref()?;
            let body = serde_json::to_vec(event).expect("plain data");
            Some((curl(url, &["Content-Type: application/json".into()]), body))
        }
        Channel::Ntfy => {
            let url = routing.ntfy.as_ref()?;
            let headers = [
                format!("Title: {}", ascii_header(&subject(event))),
                format!(
                    "Priority: {}",
                    if event.kind.urgent() {
                        "high"
                    } else {
                        "default"
                    }
                ),
                format!(
                    "Tags: {}",
                    if event.kind.urgent() {
                        "warning"
                    } else {
                        "information_source"
                    }
                ),
            ];
            Some((curl(url, &headers), event.message.clone().into_bytes()))
        }
    }
}

fn subject(event: &Event) -> String {
    format!("[{}] {}", event.host, one_line(&event.subject))
}

/// Header values on one line of ASCII: mail headers would otherwise need
/// RFC 2047 encoding, and curl sends HTTP headers as bytes.
fn ascii_header(text: &str) -> String {
    one_line(text)
        .chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect()
}

/// The message `msmtp -t` sends: recipients from the To: header; msmtp
/// adds Date and Message-ID.
fn mail(email: &Email, event: &Event) -> String {
    format!(
        "From: {}\nTo: {}\nSubject: {}\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n{}\n\n-- \nnasforge on {}, event {} at {}\n",
        email.from,
        email.to,
        ascii_header(&subject(event)),
        event.message.trim_end(),
        event.host,
        event.kind,
        crate::clock::utc(event.time),
    )
}

#[cfg(test)]
mod tests {
    use super::super::Kind;
    use super::*;

    fn event() -> Event {
        Event {
            kind: Kind::Degraded,
            host: "nas".into(),
            subject: "Array data is degraded\nBcc: evil@example.com".into(),
            message: "md127 lost sdb1.".into(),
            time: 0,
        }
    }

    fn routing() -> Routing {
        Routing {
            email: Some(Email {
                to: "me@example.com".into(),
                from: "nas@example.com".into(),
            }),
            webhook: Some("https://example.com/h".into()),
            ntfy: Some("https://ntfy.sh/nas".into()),
        }
    }

    #[test]
    fn mail_goes_through_msmtp_with_headers_on_one_line() {
        let (argv, stdin) = command(Channel::Email, &routing(), &event()).unwrap();
        assert_eq!(argv, ["msmtp", "-C", "/etc/nasforge/msmtprc", "-t"]);
        let text = String::from_utf8(stdin).unwrap();
        assert!(
            text.starts_with("From: nas@example.com\nTo: me@example.com\nSubject: [nas] Array data is degraded Bcc: evil@example.com\n"),
            "{text}"
        );
        assert!(text.contains("\n\nmd127 lost sdb1.\n\n-- \nnasforge on nas, event degraded at 1970-01-01 00:00 UTC\n"), "{text}");
    }

    #[test]
    fn webhook_posts_json_and_ntfy_posts_text_with_headers() {
        let (argv, stdin) = command(Channel::Webhook, &routing(), &event()).unwrap();
        assert_eq!(argv.last().unwrap(), "https://example.com/h");
        assert!(argv.contains(&"--max-time".to_string()) && argv[1] == "-q");
        let json: serde_json::Value = serde_json::from_slice(&stdin).unwrap();
        assert_eq!(json["event"], "degraded");
        assert_eq!(json["host"], "nas");
        assert_eq!(json["time"], 0);
        let (argv, stdin) = command(Channel::Ntfy, &routing(), &event()).unwrap();
        assert!(argv.contains(&"Priority: high".to_string()), "{argv:?}");
        assert!(
            argv.contains(&"Title: [nas] Array data is degraded Bcc: evil@example.com".to_string())
        );
        assert_eq!(stdin, b"md127 lost sdb1.");
        assert!(command(Channel::Ntfy, &Routing::default(), &event()).is_none());
    }
}
