//! Where the NAS's alerts go, as chosen on the wizard's alerts screen: the
//! fields of the recipe's `[alerts]` section, kept here as the wizard's
//! own type so the screen does not wait for the engine's. The recipe the
//! wizard hands over carries them as that section ([`AlertChoices::to_recipe_toml`]).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tls {
    Starttls,
    Tls,
    Off,
}

impl Tls {
    /// The port each mode is normally served on.
    pub fn default_port(self) -> u16 {
        match self {
            Tls::Starttls => 587,
            Tls::Tls => 465,
            Tls::Off => 25,
        }
    }

    pub fn next(self) -> Tls {
        match self {
            Tls::Starttls => Tls::Tls,
            Tls::Tls => Tls::Off,
            Tls::Off => Tls::Starttls,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Tls::Starttls => "starttls",
            Tls::Tls => "tls",
            Tls::Off => "off",
        }
    }
}

#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct Smtp {
    pub host: String,
    pub port: u16,
    pub tls: Tls,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// Never prints the password, so a debug line or a panic cannot leak it.
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

/// The `[alerts]` section, with exactly the recipe's fields; the
/// temperature limit is left to the recipe's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlertChoices {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ntfy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smtp: Option<Smtp>,
}

impl AlertChoices {
    /// The section as the recipe writes it: `[alerts]` and, for email,
    /// `[alerts.smtp]`.
    pub fn to_recipe_toml(&self) -> String {
        #[derive(Serialize)]
        struct Section<'a> {
            alerts: &'a AlertChoices,
        }
        toml::to_string(&Section { alerts: self })
            .expect("strings and numbers always serialize as TOML")
    }

    pub fn has_password(&self) -> bool {
        self.smtp.as_ref().is_some_and(|s| s.password.is_some())
    }

    /// One line per channel, for the review.
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
                smtp.port,
                smtp.tls.word()
            ));
        }
        if let Some(url) = &self.webhook {
            out.push(format!("Alerts posted as JSON to {url}"));
        }
        if let Some(url) = &self.ntfy {
            out.push(format!("Alerts pushed to ntfy at {url}"));
        }
        out
    }
}

/// Why `text` is not an address mail can go to, if it is not.
pub fn address_problem(what: &str, text: &str) -> Option<String> {
    let valid = match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        }
        None => false,
    };
    (!valid || text.contains(char::is_whitespace))
        .then(|| format!("{what}: '{text}' is not an email address; write it as name@example.com."))
}

/// Why `text` is not an http(s) URL with a host, if it is not.
pub fn url_problem(what: &str, text: &str) -> Option<String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    match host {
        Some(h) if !h.is_empty() && !text.contains(char::is_whitespace) => None,
        _ => Some(format!(
            "{what}: '{text}' is not a web address; it starts with https:// (or http://) and names a host."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_has_the_recipe_shape_and_debug_hides_the_password() {
        let choices = AlertChoices {
            email: Some("me@example.com".into()),
            webhook: None,
            ntfy: Some("https://ntfy.example/nas".into()),
            smtp: Some(Smtp {
                host: "smtp.example.com".into(),
                port: 465,
                tls: Tls::Tls,
                from: None,
                user: Some("me@example.com".into()),
                password: Some("hunter2".into()),
            }),
        };
        let text = choices.to_recipe_toml();
        let back: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(back["alerts"]["email"].as_str(), Some("me@example.com"));
        assert_eq!(back["alerts"]["smtp"]["tls"].as_str(), Some("tls"));
        assert_eq!(back["alerts"]["smtp"]["port"].as_integer(), Some(465));
        assert!(back["alerts"].get("webhook").is_none(), "{text}");
        assert!(!format!("{choices:?}").contains("hunter2"));
    }

    #[test]
    fn addresses_and_urls_are_checked() {
        assert_eq!(address_problem("Email", "me@example.com"), None);
        for bad in ["me", "me@", "@example.com", "me@example", "me @example.com"] {
            assert!(address_problem("Email", bad).is_some(), "{bad}");
        }
        assert_eq!(url_problem("Webhook", "https://example.com/h"), None);
        for bad in ["example.com", "https://", "ftp://example.com", "https:// x"] {
            assert!(url_problem("Webhook", bad).is_some(), "{bad}");
        }
    }
}
