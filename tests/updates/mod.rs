//! Updates on a NAS with a ZFS pool (issue 38): Debian's security
//! archive, stood in for by one made on the PC at the recipe's
//! `updates_mirror` (laid out and signed as Debian's is: Origin Debian,
//! Label Debian-Security, Codename <release>-security, a key apt trusts),
//! offers a newer linux-image-amd64 and a newer version of a small package
//! installed beside it. apt reads it through the source the build listed
//! (images built from [base] debian list no security suite of their own).
//! The user's own `apt-get install linux-image-amd64` is refused (setup
//! held the kernel when it made the pool), apt's daily upgrade job
//! (apt-daily-upgrade.service: `apt.systemd.daily install`, which runs
//! unattended-upgrade as `[system] updates = "security"` set it up) takes
//! the small package and leaves the kernel, status says the kernel update
//! waits and when updates last ran, and the hourly check raises
//! `kernel-update-held`. The boot after it runs the same kernel, with the
//! pool imported and served (checked by the caller).

use super::common::repo;
use super::{Board, sudo};
use std::path::Path;
use std::process::Command;

/// Where the PC's recipe says Debian's security archive is.
pub const MIRROR: &str = "file:///var/tmp/nasforge-security";

/// The archive, made on the PC with its own dpkg-deb: a package at version
/// 1 installed, its version 2 and the kernel metapackage at the installed
/// version plus `+nasforge1` in the index of `main`, and the components the
/// image's line names beside it, empty; its Release is signed on the host.
const MAKE_ARCHIVE: &str = r#"set -e
r=/var/tmp/nasforge-security
. /etc/os-release
s=dists/$VERSION_CODENAME-security
rm -rf $r && mkdir -p $r/pool $r/parts && cd $r
deb() {
  mkdir -p tree/$1-$2/DEBIAN
  printf "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: nasforge e2e <e2e@example.invalid>\nDescription: a security update in the e2e test\n" $1 $2 $3 >tree/$1-$2/DEBIAN/control
  dpkg-deb --root-owner-group -Zgzip --build tree/$1-$2 pool/$1_$2_$3.deb >/dev/null
}
deb nasforge-e2e-fix 1 all
dpkg -i pool/nasforge-e2e-fix_1_all.deb >/dev/null
rm pool/nasforge-e2e-fix_1_all.deb
deb nasforge-e2e-fix 2 all
deb linux-image-amd64 $(dpkg-query -W -f "\${Version}" linux-image-amd64)+nasforge1 amd64
for c in main contrib non-free-firmware; do
  mkdir -p $s/$c/binary-amd64
  : >$s/$c/binary-amd64/Packages
done
for f in pool/*.deb; do
  dpkg-deb -f $f
  echo "Filename: $f"
  echo "Size: $(stat -c %s $f)"
  echo "SHA256: $(sha256sum $f | cut -d " " -f 1)"
  echo
done >$s/main/binary-amd64/Packages
{
  echo "Origin: Debian"
  echo "Label: Debian-Security"
  echo "Suite: stable-security"
  echo "Codename: $VERSION_CODENAME-security"
  echo "Date: $(date -u -R -d yesterday)"
  echo "Architectures: amd64"
  echo "Components: main contrib non-free-firmware"
  echo "SHA256:"
  for p in $s/*/binary-amd64/Packages; do
    echo " $(sha256sum $p | cut -d " " -f 1) $(stat -c %s $p) ${p#$s/}"
  done
} >$s/Release"#;

/// apt's lists of the archive, read through the line the build wrote:
/// only that source, so nothing else is fetched.
const UPDATE: &str = "r=/var/tmp/nasforge-security; cp /etc/apt/sources.list.d/nasforge-security.list $r/parts/ && apt-get -q update -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$r/parts -o APT::Get::List-Cleanup=false";

/// Writes `text` (a signature or a key: ASCII, no single quote to end
/// `sudo`'s quoting) to `path` on the PC.
fn put(pc: &Board, key: &Path, path: &str, text: &str) {
    assert!(!text.contains('\'') && text.ends_with('\n'), "{text}");
    sudo(pc, key, &format!("cat >{path} <<\"END\"\n{text}END"));
}

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
    let listed = sudo(
        pc,
        key,
        ". /etc/os-release; echo $VERSION_CODENAME; cat /etc/apt/sources.list.d/nasforge-security.list",
    );
    let codename = listed.lines().next().unwrap_or_default();
    assert!(
        listed.contains(&format!(
            "\ndeb {MIRROR} {codename}-security main contrib non-free-firmware\n"
        )),
        "the build listed the security suite the image lacked, on the recipe's archive:\n{listed}"
    );
    let before = sudo(pc, key, "dpkg-query -W linux-image-amd64");
    sudo(pc, key, MAKE_ARCHIVE);
    let release = sudo(
        pc,
        key,
        &format!("cat /var/tmp/nasforge-security/dists/{codename}-security/Release"),
    );
    eprintln!("e2e: the security archive on the PC:\n{release}");
    let signer = tempfile::tempdir().unwrap();
    let home = repo::key(signer.path(), "security");
    put(
        pc,
        key,
        &format!("/var/tmp/nasforge-security/dists/{codename}-security/InRelease"),
        &repo::clearsign(&home, &release),
    );
    put(
        pc,
        key,
        "/etc/apt/trusted.gpg.d/nasforge-e2e-security.asc",
        &repo::public_key(&home),
    );
    let updated = sudo(pc, key, UPDATE);
    assert!(
        !updated.contains("W:") && !updated.contains("E:"),
        "apt takes the archive, signed, through the listed source:\n{updated}"
    );
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
            && updates.contains("kernel installs: refused without their ZFS modules (/etc/kernel/preinst.d/nasforge-zfs)")
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

/// Debian's newest amd64 kernel package, downloaded from this machine's apt
/// sources (Debian bookworm, like the PC) into `dir`: its path and release.
fn newer_kernel_package(dir: &Path) -> (std::path::PathBuf, String) {
    let depends = super::run(Command::new("apt-cache").args(["depends", "linux-image-amd64"]));
    let depends = String::from_utf8_lossy(&depends.stdout).into_owned();
    let package = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && p.ends_with("-amd64"))
        .unwrap_or_else(|| panic!("linux-image-amd64 depends on a kernel:\n{depends}"))
        .to_string();
    let got = super::run(
        Command::new("apt-get")
            .args(["download", &package])
            .current_dir(dir),
    );
    assert!(got.status.success(), "{}", super::printed(&got));
    let deb = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .expect("apt-get download wrote the .deb");
    let release = package["linux-image-".len()..].to_string();
    (deb, release)
}

/// A kernel installed in spite of the hold, by hand from Debian's own
/// package, is refused before it unpacks: no ZFS modules are built for it.
/// Nothing of it is installed and the boot links stay on the running one.
pub fn a_kernel_without_its_modules_is_refused(pc: &Board, key: &Path, kernel: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (deb, release) = newer_kernel_package(dir.path());
    assert_ne!(
        release, kernel,
        "this machine's apt lists (bookworm-security) offer a kernel newer than the PC's"
    );
    let sent = Command::new("ssh")
        .args(pc.ssh_args(key))
        .arg("cat >/var/tmp/kernel.deb")
        .stdin(std::fs::File::open(&deb).unwrap())
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", super::printed(&sent));
    let links = "readlink -f /vmlinuz /initrd.img";
    let before = sudo(pc, key, links);
    let (ok, said) = pc.ssh(key, "sudo -S dpkg -i /var/tmp/kernel.deb");
    eprintln!("e2e: dpkg -i of {release}:\n{said}");
    assert!(
        !ok && said.contains(&format!(
            "nasforge: refusing to install the kernel {release}: this NAS's ZFS pools"
        )),
        "{said}"
    );
    let after = sudo(
        pc,
        key,
        &format!(
            "rm /var/tmp/kernel.deb; {links}; ls /boot; dpkg-query -W -f \"\\${{db:Status-Status}}\\n\" linux-image-{release} || true"
        ),
    );
    assert!(
        after.starts_with(&before)
            && !after.contains(&format!("vmlinuz-{release}"))
            && !after
                .lines()
                .any(|l| l == "installed" || l == "half-installed"),
        "nothing of {release} installed, the boot links as they were ({before}):\n{after}"
    );
    let audit = sudo(pc, key, "dpkg --audit");
    assert_eq!(audit.trim(), "", "nothing is left for dpkg to finish");
}

/// After a reboot: the same kernel, the newer one still not installed.
pub fn same_kernel_after_the_reboot(pc: &Board, key: &Path, kernel: &str) {
    let now = sudo(pc, key, "uname -r; dpkg-query -W linux-image-amd64");
    assert!(
        now.starts_with(kernel) && !now.contains("+nasforge1"),
        "the PC boots {kernel} with the update held back:\n{now}"
    );
}
