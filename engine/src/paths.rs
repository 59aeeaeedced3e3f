//! The board's files that more than one part of the engine names: what the
//! image builder installs, setup writes and the `alert` command reads.

pub const MSMTPRC: &str = "/etc/nasforge/msmtprc";
/// The SMTP relay's password, root-only; written by the image builder.
pub const PASSWORD_FILE: &str = "/etc/nasforge/smtp-password";
/// Where each channel goes; written by setup from `[alerts]`.
pub const ROUTING: &str = "/etc/nasforge/alerts.json";
/// Alerts waiting for a channel to take them.
pub const ALERTS_SPOOL: &str = "/var/lib/nasforge/alerts";
/// Every alert, delivered or not.
pub const ALERTS_LOG: &str = "/var/log/nasforge-alerts.log";
/// mdadm.conf's `PROGRAM`: runs `nasforge-setup alert --mdadm "$@"`.
pub const MDADM_EVENT: &str = "/usr/lib/nasforge/mdadm-event";
/// smartd's `-M exec`: runs `nasforge-setup alert --smartd`.
pub const SMARTD_EVENT: &str = "/usr/lib/nasforge/smartd-event";
pub const SMARTD_CONF: &str = "/etc/smartd.conf";
/// ZED's zedlet: runs `nasforge-setup alert --zed` for the pool events
/// that matter. In /etc/zfs/zed.d, where Debian's zfs-zed links the
/// zedlets it enables; `all-` makes ZED run it for every event class.
pub const ZEDLET: &str = "/etc/zfs/zed.d/all-nasforge.sh";
/// apt's settings for `[system] updates = "security"`: unattended-upgrades
/// from Debian's security archive, and when it may reboot. Written by the
/// image builder; status reads whether it is there.
pub const UPDATES_CONF: &str = "/etc/apt/apt.conf.d/52nasforge-updates";
/// The guard setup writes beside the kernel hold, among the scripts
/// Debian's kernel packages run before they unpack (`run-parts
/// --exit-on-error`, the new release as the argument): it refuses a kernel
/// whose ZFS modules are not installed. Status says whether it is there.
pub const KERNEL_GUARD: &str = "/etc/kernel/preinst.d/nasforge-zfs";
