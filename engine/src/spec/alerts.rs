//! The recipe's `[alerts]` section: where the NAS reports a failing disk,
//! a degraded array or a full filesystem (mail through an SMTP relay, a
//! webhook, an ntfy topic), and the disk temperature smartd warns over.
//! Every value ends up in a config file (msmtprc, smartd.conf) or on a
//! command line, so each is checked to be one line of plain characters.

use super::storage::is_mail_address;
use super::{SpecProblem, problem};
use serde::{Deserialize, Serialize};

/// smartd warns at this disk temperature (°C) when the recipe names none.
pub const DEFAULT_TEMPERATURE: i64 = 50;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Alerts {
    /// Where mail goes; needs `[alerts.smtp]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Receives a POST of JSON `{event, host, subject, message, time}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// An ntfy topic URL: a POST with Title/Priority/Tags headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfy: Option<String>,
    /// °C over which smartd warns; [`DEFAULT_TEMPERATURE`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp: Option<Smtp>,
}

#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Smtp {
    pub host: String,
    /// Default from `tls`: 587, 465 or 25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default)]
    pub tls: Tls,
    /// The sender; `nasforge@<hostname>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Kept root-only in the image by the builder, never in the board's
    /// copy of the recipe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tls {
    /// Plain connection upgraded with STARTTLS (submission, port 587).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption (a relay on the local network, port 25).
    Off,
}

/// Never prints the password, so a debug line, a log or a panic cannot
/// leak it.
impl std::fmt::Debug for Smtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smtp")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("from", &self.from)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl Tls {
    pub fn default_port(self) -> u16 {
        match self {
            Tls::Starttls => 587,
            Tls::Tls => 465,
            Tls::Off => 25,
        }
    }

    /// The mode as a recipe writes it.
    pub fn word(self) -> &'static str {
        match self {
            Tls::Starttls => "starttls",
            Tls::Tls => "tls",
            Tls::Off => "off",
        }
    }
}

impl Smtp {
    /// The port to connect to: the recipe's, else the one `tls` implies.
    pub fn port(&self) -> u16 {
        self.port
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(self.tls.default_port())
    }
}

impl Alerts {
    pub fn temperature(&self) -> i64 {
        self.temperature.unwrap_or(DEFAULT_TEMPERATURE)
    }

    /// Where alerts go, one line per channel: what a review shows.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(email), Some(smtp)) = (&self.email, &self.smtp) {
            let login = smtp
                .user
                .as_ref()
                .map(|u| format!(", logging in as {u}"))
                .unwrap_or_default();
            out.push(format!(
                "Alerts by email to {email} through {}:{} ({}){login}",
                smtp.host,
                smtp.port(),
                smtp.tls.word()
            ));
        }
        if let Some(url) = &self.webhook {
            out.push(format!("Alerts posted as JSON to {}", masked_url(url)));
        }
        if let Some(url) = &self.ntfy {
            out.push(format!("Alerts pushed to ntfy at {}", masked_url(url)));
        }
        out
    }

    /// The section as the board may see it: without the SMTP password,
    /// which the builder keeps in a root-only file instead.
    pub fn without_password(&self) -> Alerts {
        let mut copy = self.clone();
        if let Some(smtp) = &mut copy.smtp {
            smtp.password = None;
        }
        copy
    }
}

/// The lowest and highest `temperature` accepted: below, an idle disk in a
/// warm room would warn all day; above, no disk is still within its rating.
const TEMPERATURES: std::ops::RangeInclusive<i64> = 30..=90;

/// What is wrong with `alerts`, each problem under its recipe key: the
/// rules a recipe's `[alerts]` and the wizard's alerts screen both pass.
pub fn problems(alerts: &Alerts) -> Vec<SpecProblem> {
    let mut out = Vec::new();
    check_alerts(alerts, &mut out);
    out
}

/// Why `text` is not an address mail can go to, if it is not.
pub fn mail_problem(text: &str) -> Option<String> {
    (!is_mail_address(text) || !text.contains('@')).then(|| format!("`{}` is not a mail address; write one address such as \"me@example.com\" (letters, digits and . _ % + - @)", text.escape_debug()))
}

pub(super) fn check_alerts(alerts: &Alerts, out: &mut Vec<SpecProblem>) {
    if let Some(email) = &alerts.email {
        if let Some(why) = mail_problem(email) {
            out.push(problem("alerts.email", why));
        }
        if alerts.smtp.is_none() {
            out.push(problem("alerts.email", "mail needs a relay to send it: add [alerts.smtp] with host = \"smtp.example.com\" (and user, password if the relay asks for them)"));
        }
    } else if alerts.smtp.is_some() {
        out.push(problem(
            "alerts.smtp",
            "[alerts.smtp] is set but no address to mail: add email = \"me@example.com\" to [alerts], or remove [alerts.smtp]",
        ));
    }
    for (key, url) in [("webhook", &alerts.webhook), ("ntfy", &alerts.ntfy)] {
        if let Some(url) = url
            && let Some(why) = url_problem(url)
        {
            out.push(problem(format!("alerts.{key}"), why));
        }
    }
    if let Some(t) = alerts.temperature
        && !TEMPERATURES.contains(&t)
    {
        out.push(problem("alerts.temperature", format!("{t} °C is not a disk temperature to warn at; give a number of degrees Celsius from {} to {}, e.g. temperature = 50", TEMPERATURES.start(), TEMPERATURES.end())));
    }
    if let Some(smtp) = &alerts.smtp {
        check_smtp(smtp, out);
    }
}

fn check_smtp(smtp: &Smtp, out: &mut Vec<SpecProblem>) {
    if !is_host_name(&smtp.host) {
        out.push(problem("alerts.smtp.host", format!("`{}` is not a host name; write the relay's name or address, e.g. host = \"smtp.example.com\"", smtp.host.escape_debug())));
    }
    if let Some(port) = smtp.port
        && !(1..=65535).contains(&port)
    {
        out.push(problem("alerts.smtp.port", format!("{port} is not a TCP port; use 1 to 65535, usually 587 (starttls), 465 (tls) or 25 (off)")));
    }
    if let Some(from) = &smtp.from
        && (!is_mail_address(from) || !from.contains('@'))
    {
        out.push(problem("alerts.smtp.from", format!("`{}` is not a mail address; write the sender the relay accepts, e.g. from = \"nas@example.com\"", from.escape_debug())));
    }
    if let Some(user) = &smtp.user
        && !is_one_line(user)
    {
        out.push(problem(
            "alerts.smtp.user",
            "the user name must be one line of printable characters without spaces",
        ));
    }
    if let Some(password) = &smtp.password {
        if smtp.user.is_none() {
            out.push(problem(
                "alerts.smtp.password",
                "a password needs the user name it belongs to: add user = \"...\" to [alerts.smtp]",
            ));
        }
        if password.is_empty() || password.chars().any(char::is_control) {
            out.push(problem(
                "alerts.smtp.password",
                "the password must be one line without control characters; remove it if the relay needs none",
            ));
        }
    }
}

/// A webhook's or ntfy's URL as reviews and logs show it: its host, not
/// the path, query or login where its token is (an ntfy topic's name is
/// all it takes to read its alerts). A checksum of the whole URL still
/// tells two URLs apart, so a changed token shows as a change.
pub fn masked_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if !authority.contains('@') && tail.trim_start_matches('/').is_empty() {
        return url.to_string();
    }
    format!(
        "{scheme}://{host}/… (token hidden, URL #{:08x})",
        crc32fast::hash(url.as_bytes())
    )
}

/// Problems with a webhook or ntfy URL, which goes to curl as it is.
pub fn url_problem(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Some(format!(
            "`{}` is not a web address nasforge can post to; it must start with https:// (or http:// on the local network), e.g. \"https://ntfy.sh/my-nas-topic\"",
            url.escape_debug()
        ));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || !url.chars().all(|c| c.is_ascii_graphic()) {
        return Some(format!(
            "`{}` must name a host after the scheme and hold no spaces, control or non-ASCII characters (percent-encode them)",
            url.escape_debug()
        ));
    }
    None
}

/// A DNS name or an IP address: what msmtp's `host` takes, on one line.
fn is_host_name(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || (!host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                (1..=63).contains(&label.len())
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            }))
}

fn is_one_line(value: &str) -> bool {
    !value.is_empty() && value.chars().all(|c| !c.is_control() && !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        let alerts: Alerts = toml::from_str(text).unwrap();
        let mut out = Vec::new();
        check_alerts(&alerts, &mut out);
        out.into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_full_section_passes_and_defaults_follow_tls() {
        let text = "email = \"me@example.com\"\nwebhook = \"https://example.com/h\"\nntfy = \"http://ntfy.lan/nas\"\ntemperature = 45\n[smtp]\nhost = \"smtp.example.com\"\ntls = \"tls\"\nuser = \"me@example.com\"\npassword = \"s3cret pass\"\n";
        assert_eq!(problems(text), Vec::<String>::new());
        let alerts: Alerts = toml::from_str(text).unwrap();
        assert_eq!(alerts.smtp.as_ref().unwrap().port(), 465);
        assert_eq!(alerts.temperature(), 45);
        assert_eq!(alerts.without_password().smtp.unwrap().password, None);
        let plain: Alerts = toml::from_str("ntfy = \"https://ntfy.sh/x\"").unwrap();
        assert_eq!(plain.temperature(), DEFAULT_TEMPERATURE);
        assert_eq!(
            alerts.describe(),
            [
                "Alerts by email to me@example.com through smtp.example.com:465 (tls), logging in as me@example.com".to_string(),
                format!(
                    "Alerts posted as JSON to https://example.com/… (token hidden, URL #{:08x})",
                    crc32fast::hash(b"https://example.com/h")
                ),
                format!(
                    "Alerts pushed to ntfy at http://ntfy.lan/… (token hidden, URL #{:08x})",
                    crc32fast::hash(b"http://ntfy.lan/nas")
                ),
            ]
        );
        let shown = format!("{alerts:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("password: Some(\"(set)\")"),
            "{shown}"
        );
    }

    #[test]
    fn a_urls_token_is_never_shown_but_a_changed_one_shows_as_a_change() {
        for (url, shown) in [
            ("https://ntfy.sh/my-secret-topic", "https://ntfy.sh/…"),
            (
                "https://hooks.example/services/T0/B0/XyZ",
                "https://hooks.example/…",
            ),
            (
                "http://nas:s3cret@10.0.0.2:8080/hook",
                "http://10.0.0.2:8080/…",
            ),
            ("https://hooks.example?token=abc", "https://hooks.example/…"),
        ] {
            let masked = masked_url(url);
            assert!(
                masked.starts_with(&format!("{shown} (token hidden, URL #")),
                "{masked}"
            );
            for secret in ["my-secret-topic", "XyZ", "s3cret", "abc", "nas:"] {
                assert!(!masked.contains(secret), "{masked}");
            }
        }
        assert_ne!(
            masked_url("https://ntfy.sh/topic-a"),
            masked_url("https://ntfy.sh/topic-b")
        );
        assert_eq!(masked_url("http://10.0.0.2:8080/"), "http://10.0.0.2:8080/");
    }

    #[test]
    fn each_mistake_names_its_key_and_the_fix() {
        let cases = [
            (
                "email = \"me@example.com\"",
                "alerts.email: mail needs a relay",
            ),
            (
                "email = \"root\"\n[smtp]\nhost = \"h\"",
                "alerts.email: `root` is not a mail address",
            ),
            (
                "[smtp]\nhost = \"h\"",
                "alerts.smtp: [alerts.smtp] is set but no address",
            ),
            (
                "webhook = \"ftp://x/y\"",
                "alerts.webhook: `ftp://x/y` is not a web address",
            ),
            (
                "ntfy = \"https:///topic\"",
                "alerts.ntfy: `https:///topic` must name a host",
            ),
            (
                "ntfy = \"https://n/a b\"",
                "alerts.ntfy: `https://n/a b` must name a host",
            ),
            (
                "temperature = 120",
                "alerts.temperature: 120 °C is not a disk temperature",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"h\"\nport = 0",
                "alerts.smtp.port: 0 is not a TCP port",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"h\"\nport = 70000",
                "alerts.smtp.port: 70000 is not a TCP port",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"smtp.x\\nauth off\"",
                "alerts.smtp.host: `smtp.x\\nauth off` is not a host name",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"h\"\npassword = \"p\"",
                "alerts.smtp.password: a password needs the user name",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"h\"\nuser = \"u\"\npassword = \"p\\nq\"",
                "alerts.smtp.password: the password must be one line",
            ),
            (
                "email = \"a@b.c\"\n[smtp]\nhost = \"h\"\nfrom = \"nas\"",
                "alerts.smtp.from: `nas` is not a mail address",
            ),
        ];
        for (text, want) in cases {
            let p = problems(text);
            assert_eq!(p.len(), 1, "{text}: {p:?}");
            assert!(p[0].starts_with(want), "{text}: {p:?}");
        }
    }
}
