//! The rules of the wizard's alerts screen: the recipe's own checks of an
//! address and a URL, said for the screen's field. What the screen makes
//! is the engine's [`nasforge_engine::spec::Alerts`] itself, checked by
//! `spec::alerts::problems` as a recipe's `[alerts]` is.

use nasforge_engine::spec::alerts::{mail_problem, url_problem as engine_url};

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
