//! One event to one channel: the msmtp or curl command line and what it
//! reads on stdin, sent through the runner every command goes through.

use super::{Event, one_line};
use crate::command::Cmd;
use crate::paths::MSMTPRC;
use crate::runner::{RunError, Runner};
use crate::steps::Action;
use crate::steps::alerts::{Email, Routing};
use serde::{Deserialize, Serialize};

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

/// Runs the command through `runner`; an error says why it failed without
/// repeating the command line, whose URL may carry a token. Each command
/// has its own time limit (msmtprc's `timeout`, curl's `--max-time`), so a
/// dead relay cannot hang an alert.
pub fn send(runner: &mut dyn Runner, argv: Vec<String>, stdin: Vec<u8>) -> Result<(), String> {
    let program = argv[0].clone();
    let cmd = Cmd {
        stdin: Some(String::from_utf8_lossy(&stdin).into_owned()),
        ..Cmd::new(&argv)
    };
    runner.apply(&Action::Run(cmd)).map_err(|e| match e {
        RunError::Failed { status, stderr, .. } => format!(
            "`{program}` failed (exit status: {status}): {}",
            one_line(stderr.trim())
        ),
        RunError::Spawn(e) => format!(
            "`{program}` could not be started: {}; is its package installed?",
            e.source
        ),
        other => other.to_string(),
    })
}

/// curl, quiet but for errors, failing on an HTTP error status, within
/// time limits; `-q` first so no user's ~/.curlrc changes it. Everything
/// else comes on stdin as curl's own config (`--config -`): a webhook or
/// ntfy URL carries a token, and a command line is readable by every user
/// of the board (`ps`), stdin is not. The body goes as `data-raw`, which
/// never reads a file, even when the message starts with `@`.
fn curl(url: &str, headers: &[String], body: &[u8]) -> (Vec<String>, Vec<u8>) {
    let argv = [
        "curl",
        "-q",
        "--silent",
        "--show-error",
        "--fail",
        "--connect-timeout",
        "10",
        "--max-time",
        "30",
        "--config",
        "-",
    ]
    .map(String::from)
    .to_vec();
    let mut config = format!("url = {}\n", quoted(url));
    for h in headers {
        config += &format!("header = {}\n", quoted(h));
    }
    config += &format!("data-raw = {}\n", quoted(&String::from_utf8_lossy(body)));
    (argv, config.into_bytes())
}

/// A string as curl's config file quotes it: inside double quotes, with
/// the escapes curl reads back (`\\`, `\"`, `\n`, `\r`, `\t`, `\v`).
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
            Some(curl(url, &["Content-Type: application/json".into()], &body))
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
            Some(curl(url, &headers, event.message.as_bytes()))
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
    fn a_failed_send_says_why_without_the_url_and_the_message_goes_on_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let mut runner =
            crate::runner::SystemRunner::new(crate::machine::disks::Host::new(dir.path()), None)
                .unwrap();
        runner.echo = false;
        let got = dir.path().join("got");
        let argv = [
            "sh",
            "-c",
            r#"cat > "$0"; echo "relay said no" >&2; exit 7"#,
            got.to_str().unwrap(),
            "https://hooks.example.com/secret-token",
        ]
        .map(String::from)
        .to_vec();
        let err = send(&mut runner, argv, b"the alert\n".to_vec()).unwrap_err();
        assert_eq!(err, "`sh` failed (exit status: 7): relay said no");
        assert_eq!(std::fs::read_to_string(&got).unwrap(), "the alert\n");

        let missing = ["nasforge-no-such-mailer".to_string()].to_vec();
        let err = send(&mut runner, missing, Vec::new()).unwrap_err();
        assert!(
            err.starts_with("`nasforge-no-such-mailer` could not be started: ")
                && err.ends_with("is its package installed?"),
            "{err}"
        );
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
        assert_eq!(argv[..2], ["curl", "-q"]);
        assert_eq!(argv[argv.len() - 2..], ["--config", "-"]);
        assert!(argv.contains(&"--max-time".to_string()));
        assert!(
            !argv.iter().any(|a| a.contains("example.com")),
            "no URL on the command line: {argv:?}"
        );
        let config = String::from_utf8(stdin).unwrap();
        assert!(
            config.starts_with("url = \"https://example.com/h\"\nheader = \"Content-Type: application/json\"\ndata-raw = \"{\\\"event\\\":\\\"degraded\\\""),
            "{config}"
        );
        let (argv, stdin) = command(Channel::Ntfy, &routing(), &event()).unwrap();
        assert!(!argv.iter().any(|a| a.contains("ntfy.sh")), "{argv:?}");
        let config = String::from_utf8(stdin).unwrap();
        assert!(config.contains("header = \"Priority: high\"\n"), "{config}");
        assert!(
            config.contains(
                "header = \"Title: [nas] Array data is degraded Bcc: evil@example.com\"\n"
            ),
            "{config}"
        );
        assert!(
            config.ends_with("data-raw = \"md127 lost sdb1.\"\n"),
            "{config}"
        );
        assert!(command(Channel::Ntfy, &Routing::default(), &event()).is_none());
    }

    /// The real curl reads the config back: URL, headers and a body with
    /// quotes, backslashes, newlines and a leading `@` arrive byte for byte
    /// at a local HTTP server.
    #[test]
    fn curl_reads_the_url_headers_and_body_from_its_stdin_config() {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_string());
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .unwrap();
            (head, body)
        });
        let body = "@/etc/shadow \"quoted\" back\\slash\nline two\ttab";
        let (argv, stdin) = curl(
            &format!("http://127.0.0.1:{port}/hook/s3cret-token?x=1"),
            &["Title: a \"title\"".to_string()],
            body.as_bytes(),
        );
        let dir = tempfile::tempdir().unwrap();
        let mut runner =
            crate::runner::SystemRunner::new(crate::machine::disks::Host::new(dir.path()), None)
                .unwrap();
        runner.echo = false;
        send(&mut runner, argv, stdin).unwrap();
        let (head, got) = server.join().unwrap();
        assert_eq!(head[0], "POST /hook/s3cret-token?x=1 HTTP/1.1", "{head:?}");
        assert!(head.contains(&"Title: a \"title\"".to_string()), "{head:?}");
        assert_eq!(String::from_utf8(got).unwrap(), body);
    }
}
