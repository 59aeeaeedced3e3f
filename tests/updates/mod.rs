//! Updates on a NAS with a ZFS pool (issue 38): a repository on the PC
//! that apt takes for Debian's security archive (Origin Debian, Label
//! Debian-Security, Codename <release>-security) offers a newer
//! linux-image-amd64 and a newer version of a small package installed
//! beside it. The user's own `apt-get install linux-image-amd64` is refused
//! (setup held the kernel when it made the pool), apt's daily upgrade job
//! (apt-daily-upgrade.service: `apt.systemd.daily install`, which runs
//! unattended-upgrade as `[system] updates = "security"` set it up) takes
//! the small package and leaves the kernel, status says the kernel update
//! waits and when updates last ran, and the hourly check raises
//! `kernel-update-held`. The boot after it runs the same kernel, with the
//! pool imported and served (checked by the caller).

use super::{Board, sudo};
use std::path::Path;

/// The repository, made on the PC with its own dpkg-deb: a package at
/// version 1 installed, its version 2 and the kernel metapackage at the
/// installed version plus `+nasforge1` in the index.
const MAKE_REPOSITORY: &str = r#"set -e
r=/var/tmp/nasforge-update
rm -rf $r && mkdir -p $r/parts && cd $r
deb() {
  mkdir -p tree/$1-$2/DEBIAN
  printf "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: nasforge e2e <e2e@example.invalid>\nDescription: a security update in the e2e test\n" $1 $2 $3 >tree/$1-$2/DEBIAN/control
  dpkg-deb --root-owner-group -Zgzip --build tree/$1-$2 $1_$2_$3.deb >/dev/null
}
deb nasforge-e2e-fix 1 all
dpkg -i nasforge-e2e-fix_1_all.deb >/dev/null
rm nasforge-e2e-fix_1_all.deb
deb nasforge-e2e-fix 2 all
deb linux-image-amd64 $(dpkg-query -W -f "\${Version}" linux-image-amd64)+nasforge1 amd64
for f in *.deb; do
  dpkg-deb -f $f
  echo "Filename: ./$f"
  echo "Size: $(stat -c %s $f)"
  echo "SHA256: $(sha256sum $f | cut -d " " -f 1)"
  echo
done >Packages
. /etc/os-release
{
  echo "Origin: Debian"
  echo "Label: Debian-Security"
  echo "Suite: stable-security"
  echo "Codename: $VERSION_CODENAME-security"
  echo "Date: $(date -u -R -d yesterday)"
  echo "SHA256:"
  echo " $(sha256sum Packages | cut -d " " -f 1) $(stat -c %s Packages) Packages"
} >Release
echo "deb [trusted=yes] file:$r ./" >parts/nasforge-update.list
cp parts/nasforge-update.list /etc/apt/sources.list.d/
apt-get -q update -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$r/parts -o APT::Get::List-Cleanup=false"#;

/// Runs the scene on a PC whose setup made a ZFS pool; returns the kernel
/// it runs, which the next boot must run too.
pub fn security_update_leaves_the_held_kernel(pc: &Board, key: &Path) -> String {
    let kernel = sudo(pc, key, "uname -r").trim().to_string();
    let held = sudo(pc, key, "apt-mark showhold");
    assert!(
        held.lines().any(|l| l == "linux-image-amd64")
            && held.lines().any(|l| l == format!("linux-image-{kernel}")),
        "setup held the kernel's packages (running {kernel}):\n{held}"
    );
    let before = sudo(pc, key, "dpkg-query -W linux-image-amd64");
    let made = sudo(pc, key, MAKE_REPOSITORY);
    eprintln!("e2e: the security repository on the PC:\n{made}");
    let policy = sudo(pc, key, "apt-cache policy linux-image-amd64");
    assert!(policy.contains("+nasforge1"), "{policy}");

    let (ok, refused) = pc.ssh(key, "sudo -S apt-get install -y linux-image-amd64");
    assert!(
        !ok && refused.contains("Held packages were changed"),
        "apt refuses the held kernel:\n{refused}"
    );

    let daily = sudo(
        pc,
        key,
        "systemctl start apt-daily-upgrade.service; systemctl status --no-pager -n 0 apt-daily-upgrade.service; tail -n 30 /var/log/unattended-upgrades/unattended-upgrades.log",
    );
    eprintln!("e2e: apt's daily upgrade job:\n{daily}");
    let after = sudo(
        pc,
        key,
        "dpkg-query -W nasforge-e2e-fix linux-image-amd64; ls /var/lib/apt/periodic/upgrade-stamp",
    );
    assert!(
        after.contains("nasforge-e2e-fix\t2") && after.contains(before.trim()),
        "the security update taken, the kernel left as it was ({before}):\n{after}\n{daily}"
    );

    let status = sudo(pc, key, "nasforge-setup status");
    let updates = status
        .lines()
        .skip_while(|l| *l != "Updates:")
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("e2e: status of the updates:\n{updates}");
    assert!(
        updates.contains(&format!("kernel {kernel}: held ("))
            && updates.contains("WAITING: linux-image-amd64 ")
            && updates.contains("+nasforge1 (installed ")
            && updates.contains("security updates: automatic (unattended-upgrades), last run "),
        "{status}"
    );
    sudo(pc, key, "nasforge-setup alert --check");
    let alerts = sudo(pc, key, "cat /var/log/nasforge-alerts.log");
    assert!(
        alerts.contains("kernel-update-held on ") && alerts.contains("is held back for ZFS"),
        "{alerts}"
    );
    kernel
}

/// After a reboot: the same kernel, the newer one still not installed.
pub fn same_kernel_after_the_reboot(pc: &Board, key: &Path, kernel: &str) {
    let now = sudo(pc, key, "uname -r; dpkg-query -W linux-image-amd64");
    assert!(
        now.starts_with(kernel) && !now.contains("+nasforge1"),
        "the PC boots {kernel} with the update held back:\n{now}"
    );
}
