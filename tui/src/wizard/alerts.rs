//! Where the NAS's alerts go, as chosen on the wizard's alerts screen: the
//! fields of the recipe's `[alerts]` section as the screen edits them,
//! handed over as the engine's [`spec::Alerts`] ([`AlertChoices::to_alerts`])
//! and checked by the rules a recipe's section passes.

use nasforge_engine::spec::{self, alerts::mail_problem, alerts::url_problem as engine_url};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Clone, PartialEq, Eq)]
pub struct Smtp {
    pub host: String,
    pub port: u16,
    pub tls: Tls,
    pub from: Option<String>,
    pub user: Option<String>,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertChoices {
    pub email: Option<String>,
    pub webhook: Option<String>,
    pub ntfy: Option<String>,
    pub smtp: Option<Smtp>,
}

impl AlertChoices {
    /// The engine's `[alerts]`, the temperature left to its default.
    pub fn to_alerts(&self) -> spec::Alerts {
        spec::Alerts {
            email: self.email.clone(),
            webhook: self.webhook.clone(),
            ntfy: self.ntfy.clone(),
            temperature: None,
            smtp: self.smtp.as_ref().map(|s| spec::Smtp {
                host: s.host.clone(),
                port: Some(i64::from(s.port)),
                tls: match s.tls {
                    Tls::Starttls => spec::Tls::Starttls,
                    Tls::Tls => spec::Tls::Tls,
                    Tls::Off => spec::Tls::Off,
                },
                from: s.from.clone(),
                user: s.user.clone(),
                password: s.password.clone(),
            }),
        }
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

/// Why `text` is not an address mail can go to, if it is not: the
/// recipe's rule, said for the screen's field `what`.
pub fn address_problem(what: &str, text: &str) -> Option<String> {
    mail_problem(text).map(|why| format!("{what}: {why}"))
}

/// Why `text` is not an http(s) URL curl can post to, if it is not: the
/// recipe's rule, said for the screen's field `what`.
pub fn url_problem(what: &str, text: &str) -> Option<String> {
    engine_url(text).map(|why| format!("{what}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choices_are_the_engine_s_alerts_and_debug_hides_the_password() {
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
        let alerts = choices.to_alerts();
        assert_eq!(alerts.email.as_deref(), Some("me@example.com"));
        let smtp = alerts.smtp.as_ref().unwrap();
        assert_eq!((smtp.tls, smtp.port), (spec::Tls::Tls, Some(465)));
        assert_eq!(alerts.webhook, None);
        assert_eq!(spec::alerts::problems(&alerts), []);
        assert!(!format!("{choices:?}").contains("hunter2"));
    }

    #[test]
    fn addresses_and_urls_are_checked() {
        assert_eq!(address_problem("Email", "me@example.com"), None);
        for bad in [
            "me",
            "me@",
            "@example.com",
            "me @example.com",
            "mé@example.com",
        ] {
            assert!(address_problem("Email", bad).is_some(), "{bad}");
        }
        assert_eq!(url_problem("Webhook", "https://example.com/h"), None);
        for bad in [
            "example.com",
            "https://",
            "ftp://example.com",
            "https:// x",
            "https://example.com/ü",
        ] {
            assert!(url_problem("Webhook", bad).is_some(), "{bad}");
        }
    }
}
