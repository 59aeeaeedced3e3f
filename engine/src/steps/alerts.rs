//! What setup writes for alerts: the routing the `alert` command reads,
//! msmtp's configuration, and smartd.conf with its self-test schedule.

use super::{Action, Cmd, Guard, Step};
use crate::paths::{MSMTPRC, PASSWORD_FILE, ROUTING, SMARTD_CONF, SMARTD_EVENT};
use crate::spec::{Alerts, DEFAULT_TEMPERATURE, Smtp, Tls};
use serde::{Deserialize, Serialize};

/// Where each channel goes, read by `nasforge-setup alert` at every event,
/// so neither the boot partition nor a valid recipe is needed then.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<Email>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Email {
    pub to: String,
    pub from: String,
}

fn from_address(smtp: &Smtp, hostname: &str) -> String {
    smtp.from
        .clone()
        .unwrap_or_else(|| format!("nasforge@{hostname}"))
}

/// The routing for `[alerts]` (none: every channel off).
pub fn routing(alerts: Option<&Alerts>, hostname: &str) -> Routing {
    let Some(alerts) = alerts else {
        return Routing::default();
    };
    Routing {
        email: alerts
            .email
            .as_ref()
            .zip(alerts.smtp.as_ref())
            .map(|(to, smtp)| Email {
                to: to.clone(),
                from: from_address(smtp, hostname),
            }),
        webhook: alerts.webhook.clone(),
        ntfy: alerts.ntfy.clone(),
    }
}

/// msmtp's configuration for the relay. The password stays in its own
/// root-only file, read by `passwordeval` when msmtp connects, so this
/// file (and the setup journal that records it) never holds it.
pub fn msmtprc(smtp: &Smtp, hostname: &str, has_password: bool) -> String {
    let tls = match smtp.tls {
        Tls::Starttls => "tls on\ntls_starttls on\n",
        Tls::Tls => "tls on\ntls_starttls off\n",
        Tls::Off => "tls off\n",
    };
    let auth = match (&smtp.user, has_password) {
        // msmtp's `auth on` refuses every method that would send the
        // password in clear over a link without TLS; `tls = "off"` is for a
        // relay on the home network, where PLAIN is what such relays take.
        (Some(user), true) => {
            let method = if smtp.tls == Tls::Off { "plain" } else { "on" };
            format!("auth {method}\nuser {user}\npasswordeval cat {PASSWORD_FILE}\n")
        }
        _ => "auth off\n".to_string(),
    };
    format!(
        "# Written by nasforge-setup from [alerts.smtp] in nasforge.toml.\n\
         defaults\n\
         timeout 30\n\
         tls_trust_file /etc/ssl/certs/ca-certificates.crt\n\
         \n\
         account nasforge\n\
         host {}\n\
         port {}\n\
         {tls}\
         from {}\n\
         {auth}\
         \n\
         account default : nasforge\n",
        smtp.host,
        smtp.port(),
        from_address(smtp, hostname),
    )
}

/// smartd watches every disk: health, attributes and error logs (`-a`),
/// a short self-test every Sunday at 02:00 and a long one on the 1st of
/// each month at 03:00, a warning from `temperature` °C (logged from 5
/// below); a sleeping disk is not woken for a check. Warnings go to
/// nasforge's handler, not to a mailer.
pub fn smartd_conf(temperature: i64) -> String {
    format!(
        "# Written by nasforge-setup; `temperature` in [alerts] of nasforge.toml sets the limit.\n\
         DEVICESCAN -a -o on -S on -n standby,q -s (S/../../7/02|L/../01/./03) -W 4,{},{temperature} -m <nomailer> -M exec {SMARTD_EVENT}\n",
        temperature - 5
    )
}

/// The id of the smartd step, which [`add_steps`] sets to the recipe's
/// temperature.
pub const SMARTD_STEP: &str = "smartd";

pub fn smartd_step(temperature: i64) -> Step {
    Step {
        id: SMARTD_STEP.into(),
        title: format!(
            "Watch disk health with smartd: weekly short and monthly long self-tests, a warning over {temperature} °C"
        ),
        guard: Guard::Always,
        actions: vec![
            Action::WriteFile {
                path: SMARTD_CONF.into(),
                contents: smartd_conf(temperature),
                mode: 0o644,
            },
            super::enable(&["smartmontools.service"], false),
            Action::Run(Cmd::new(&["systemctl", "restart", "smartmontools.service"])),
        ],
        always: vec![],
    }
}

/// The steps' smartd limit set from `[alerts]`, and the step that writes
/// where alerts go. `has_password`: the builder left the relay's password
/// in [`PASSWORD_FILE`].
pub fn add_steps(
    steps: &mut Vec<Step>,
    alerts: Option<&Alerts>,
    hostname: &str,
    has_password: bool,
) {
    let temperature = alerts.map_or(DEFAULT_TEMPERATURE, Alerts::temperature);
    for step in steps.iter_mut().filter(|s| s.id == SMARTD_STEP) {
        *step = smartd_step(temperature);
    }
    steps.push(routing_step(alerts, hostname, has_password));
}

fn routing_step(alerts: Option<&Alerts>, hostname: &str, has_password: bool) -> Step {
    let routing = routing(alerts, hostname);
    let mut channels: Vec<&str> = Vec::new();
    let mut actions = vec![Action::WriteFile {
        path: ROUTING.into(),
        contents: serde_json::to_string_pretty(&routing).expect("plain data") + "\n",
        // Webhook and ntfy URLs often carry their access token.
        mode: 0o600,
    }];
    match alerts.and_then(|a| a.smtp.as_ref()) {
        Some(smtp) if routing.email.is_some() => {
            channels.push("mail");
            actions.push(Action::WriteFile {
                path: MSMTPRC.into(),
                contents: msmtprc(smtp, hostname, has_password),
                mode: 0o600,
            });
        }
        _ => actions.push(Action::RemoveFile {
            path: MSMTPRC.into(),
        }),
    }
    if routing.webhook.is_some() {
        channels.push("webhook");
    }
    if routing.ntfy.is_some() {
        channels.push("ntfy");
    }
    Step {
        id: "alerts".into(),
        title: if channels.is_empty() {
            "Record alerts in the log and the status file (no [alerts] channel)".into()
        } else {
            format!("Send alerts by {}", channels.join(", "))
        },
        guard: Guard::Always,
        actions,
        always: vec![],
    }
}

/// The zedlet installed at [`crate::paths::ZEDLET`].
pub fn zedlet() -> &'static str {
    include_str!("../../../files/board/all-nasforge.sh")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smtp(text: &str) -> Smtp {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn msmtprc_follows_tls_and_reads_the_password_from_its_file() {
        let rc = msmtprc(
            &smtp("host = \"smtp.example.com\"\nuser = \"me@example.com\"\npassword = \"pw\""),
            "nas",
            true,
        );
        assert!(
            rc.contains("host smtp.example.com\nport 587\ntls on\ntls_starttls on\nfrom nasforge@nas\nauth on\nuser me@example.com\npasswordeval cat /etc/nasforge/smtp-password\n"),
            "{rc}"
        );
        assert!(!rc.contains("pw\n") && rc.ends_with("account default : nasforge\n"));
        let rc = msmtprc(
            &smtp("host = \"mx\"\ntls = \"tls\"\nfrom = \"nas@example.com\""),
            "nas",
            false,
        );
        assert!(
            rc.contains("port 465\ntls on\ntls_starttls off\nfrom nas@example.com\nauth off\n"),
            "{rc}"
        );
        let rc = msmtprc(
            &smtp("host = \"10.0.0.2\"\ntls = \"off\"\nport = 2525\nuser = \"u\""),
            "nas",
            false,
        );
        assert!(rc.contains("host 10.0.0.2\nport 2525\ntls off\n"), "{rc}");
        assert!(
            rc.contains("auth off\n") && !rc.contains("passwordeval"),
            "{rc}"
        );
        let rc = msmtprc(
            &smtp("host = \"10.0.0.2\"\ntls = \"off\"\nuser = \"u\""),
            "nas",
            true,
        );
        assert!(
            rc.contains("tls off\n") && rc.contains("auth plain\nuser u\n"),
            "{rc}"
        );
    }

    #[test]
    fn smartd_tests_weekly_and_monthly_and_warns_at_the_limit() {
        assert_eq!(
            smartd_conf(50).lines().nth(1).unwrap(),
            "DEVICESCAN -a -o on -S on -n standby,q -s (S/../../7/02|L/../01/./03) -W 4,45,50 -m <nomailer> -M exec /usr/lib/nasforge/smartd-event"
        );
    }

    #[test]
    fn steps_take_the_recipes_limit_and_write_the_routing() {
        let alerts: Alerts = toml::from_str("email = \"me@example.com\"\nntfy = \"https://ntfy.sh/nas\"\ntemperature = 45\n[smtp]\nhost = \"smtp.example.com\"").unwrap();
        let mut steps = vec![smartd_step(DEFAULT_TEMPERATURE)];
        add_steps(&mut steps, Some(&alerts), "nas", false);
        let text: Vec<String> = steps
            .iter()
            .flat_map(|s| s.actions.iter().map(|a| a.to_string()))
            .collect();
        assert!(steps[0].title.ends_with("over 45 °C"), "{}", steps[0].title);
        assert_eq!(steps[1].title, "Send alerts by mail, ntfy");
        assert!(
            text.iter().any(|t| t.contains("/etc/nasforge/msmtprc")),
            "{text:?}"
        );
        let r = routing(Some(&alerts), "nas");
        assert_eq!(
            r.email,
            Some(Email {
                to: "me@example.com".into(),
                from: "nasforge@nas".into()
            })
        );

        let mut steps = vec![];
        add_steps(&mut steps, None, "nas", false);
        assert_eq!(steps.len(), 1);
        assert!(steps[0].title.contains("no [alerts] channel"));
        assert!(matches!(&steps[0].actions[1], Action::RemoveFile { path } if path == MSMTPRC));
    }
}
