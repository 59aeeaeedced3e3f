//! `nasforge-setup alert`: what mdadm's monitor, smartd, ZED and the timers run,
//! and what a person runs to test the channels. The events, the spool and
//! the deliveries are the engine's ([`nasforge_engine::alerts`]); this
//! prints how each delivery went and refreshes the status file on the boot
//! partition, so an event shows there even without an `[alerts]` section.

use anyhow::{Context as _, bail};
use clap::ArgGroup;
use nasforge_engine::alerts::{self, Delivery, Event, Kind};
use nasforge_engine::journal::Journal;
use nasforge_engine::machine::disks::Host;
use nasforge_engine::runner;
use nasforge_engine::status;

#[derive(clap::Args)]
#[command(group(
    ArgGroup::new("what")
        .required(true)
        .args(["test", "event", "mdadm", "smartd", "zed", "retry", "check"])
))]
pub struct AlertArgs {
    /// Send a test alert by each channel in [alerts]; exits 1 if one
    /// failed (that copy stays queued and is retried).
    #[arg(long)]
    test: bool,
    /// Raise an event: degraded, member-failed, rebuild-started,
    /// rebuild-finished, smart-failure, smart-prefail, temperature,
    /// filesystem-full, setup-failed, apply-failed, data-errors or test.
    #[arg(long, value_name = "KIND")]
    event: Option<String>,
    /// The event's subject [default: one that says what KIND means]
    #[arg(long, requires = "event")]
    subject: Option<String>,
    /// The event's text.
    #[arg(long, requires = "event")]
    message: Option<String>,
    /// mdadm's monitor event (mdadm.conf's PROGRAM passes these).
    #[arg(long, num_args = 2..=3, value_names = ["EVENT", "MD-DEVICE", "COMPONENT"])]
    mdadm: Option<Vec<String>>,
    /// smartd's warning, read from its SMARTD_* environment (-M exec).
    #[arg(long)]
    smartd: bool,
    /// ZED's pool event, read from its ZEVENT_* environment (the zedlet
    /// /etc/zfs/zed.d/all-nasforge.sh runs this).
    #[arg(long)]
    zed: bool,
    /// Try the queued alerts again (run every 10 minutes by a timer).
    #[arg(long)]
    retry: bool,
    /// Raise filesystem-full for each array over 90 % full, and
    /// kernel-update-held for a kernel update the ZFS hold keeps back
    /// (hourly timer).
    #[arg(long)]
    check: bool,
}

pub fn run(host: &Host, args: &AlertArgs) -> anyhow::Result<()> {
    let hostname = nasforge_engine::machine::hostname(host);
    let mut runner = runner::for_host(host, None, false)?;
    let deliveries = if args.retry {
        alerts::retry(host, runner.as_mut())?
    } else if args.check {
        let mounts = alerts::array_mounts(host);
        let mut sent = alerts::check(host, &mounts, &alerts::Statvfs(host), runner.as_mut())?;
        sent.extend(alerts::check_kernel(host, runner.as_mut())?);
        sent
    } else {
        let Some(event) = event(host, args, &hostname)? else {
            return Ok(());
        };
        let sent = alerts::raise(host, &event, runner.as_mut())?;
        if args.test && sent.is_empty() {
            bail!(
                "no alert channel is set up, so the test was only logged in {}; add email, webhook or ntfy to [alerts] in nasforge.toml (docs/recipe.md)",
                nasforge_engine::paths::ALERTS_LOG
            );
        }
        sent
    };
    // Status reads every disk's SMART data, which wakes a disk hd-idle put
    // to sleep: the hourly check that found nothing leaves it alone.
    if !args.retry && (!args.check || !deliveries.is_empty()) {
        refresh_status(host);
    }
    report(&deliveries)
}

/// The event the arguments describe; None for an mdadm notice that needs
/// nobody (logged only).
fn event(host: &Host, args: &AlertArgs, hostname: &str) -> anyhow::Result<Option<Event>> {
    if args.test {
        return Ok(Some(Event::new(
            Kind::Test,
            hostname,
            "",
            &format!(
                "A test from `nasforge-setup alert --test` on {hostname}: alerts reach you here."
            ),
        )));
    }
    if let Some(kind) = &args.event {
        let kind = Kind::parse(kind).with_context(|| {
            let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            format!("`{kind}` is not an event; use one of {}", all.join(", "))
        })?;
        let subject = args.subject.as_deref().unwrap_or("");
        let message = args.message.as_deref().unwrap_or(kind.subject());
        return Ok(Some(Event::new(kind, hostname, subject, message)));
    }
    if let Some(words) = &args.mdadm {
        // Setup makes the system's mirror on one disk and adds the other
        // after a reboot: mdadm's monitor sees it degraded, then rebuilding,
        // and none of that is news to anyone.
        let setting_up = || {
            nasforge_engine::journal::Journal::load(&nasforge_engine::journal::path(host))
                .ok()
                .flatten()
                .is_some_and(|j| !j.is_complete())
        };
        if words.get(1).is_some_and(|a| alerts::is_system_mirror(a)) && setting_up() {
            alerts::log(
                host,
                &format!(
                    "mdadm: {} (setup is mirroring the system; no alert needed)",
                    words.join(" ")
                ),
            );
            return Ok(None);
        }
        let event = alerts::from_mdadm(words, hostname);
        if event.is_none() {
            alerts::log(
                host,
                &format!("mdadm: {} (no alert needed)", words.join(" ")),
            );
        }
        return Ok(event);
    }
    if args.zed {
        return Ok(zed_event(host, hostname));
    }
    match alerts::from_smartd(&|name: &str| std::env::var(name).ok(), hostname) {
        Some(event) => Ok(Some(event)),
        None => bail!(
            "SMARTD_FAILTYPE is not set: smartd runs `alert --smartd` with its warning in the environment"
        ),
    }
}

/// ZED's event; for a finished scrub or resilver, judged with the pool's
/// `zpool status`. None (logged) for the events that need nobody.
fn zed_event(host: &Host, hostname: &str) -> Option<Event> {
    let env = |name: &str| std::env::var(name).ok();
    let subclass = env("ZEVENT_SUBCLASS").unwrap_or_default();
    let pool = env("ZEVENT_POOL").unwrap_or_default();
    let status = (alerts::zed_needs_status(&subclass) && !pool.is_empty())
        .then(|| {
            nasforge_engine::machine::zfs::read(host, "zpool", &["status", "-P", "-p", &pool])
                .ok()
                .flatten()
        })
        .flatten();
    let event = alerts::from_zed(&env, status.as_deref(), hostname);
    if event.is_none() {
        alerts::log(
            host,
            &format!("zed: {subclass} of pool {pool} (no alert needed)"),
        );
    }
    event
}

/// One line per delivery; an error when any failed (it stays queued).
fn report(deliveries: &[Delivery]) -> anyhow::Result<()> {
    for d in deliveries {
        match &d.result {
            Ok(()) => println!("nasforge-setup: {}: sent \"{}\"", d.channel, d.subject),
            Err(e) => println!("nasforge-setup: {}: FAILED: {e}", d.channel),
        }
    }
    let failed = deliveries.iter().filter(|d| d.result.is_err()).count();
    if failed > 0 {
        bail!(
            "{failed} delivery(ies) failed; they stay queued in {} and are retried every 10 minutes (log: {})",
            nasforge_engine::paths::ALERTS_SPOOL,
            nasforge_engine::paths::ALERTS_LOG
        );
    }
    Ok(())
}

/// Raises an event from nasforge itself (setup or apply failed); a failure
/// to record it is said, never fatal to the caller.
pub fn notify(host: &Host, kind: Kind, message: &str) {
    let event = Event::new(kind, &nasforge_engine::machine::hostname(host), "", message);
    let raised = runner::for_host(host, None, false)
        .and_then(|mut runner| alerts::raise(host, &event, runner.as_mut()));
    match raised {
        Ok(deliveries) => {
            let _ = report(&deliveries);
        }
        Err(e) => eprintln!("nasforge-setup: could not queue the {kind} alert: {e}"),
    }
}

/// The status file on the boot partition, with the latest alerts below it.
fn refresh_status(host: &Host) {
    let journal = Journal::load(&nasforge_engine::journal::path(host))
        .ok()
        .flatten();
    let status = match runner::for_host(host, None, false) {
        Ok(mut runner) => status::collect(host, journal.as_ref(), runner.as_mut()),
        Err(e) => {
            eprintln!("nasforge-setup: cannot read the status: {e}");
            return;
        }
    };
    if let Err(e) = status::write_file(host, &status) {
        eprintln!("nasforge-setup: could not write the status file: {e}");
    }
}
