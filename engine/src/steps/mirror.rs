//! The system mirrored onto a second disk at first boot: the running root
//! becomes an md RAID1 over both disks, and each disk gets an EFI system
//! partition with the same loader, so the PC boots with either pulled.
//!
//! The order is the usual degraded-mirror-then-add, arranged so that a
//! power cut at any point boots a whole system: the second disk is
//! partitioned and given the loader, a one-disk RAID1 (metadata 1.2, the
//! copy in slot 0, which GRUB reads first) gets a new filesystem and a copy
//! of the running root, and only then does a marker file on the copy switch
//! the boot over. The loader never changes: the GRUB configuration the
//! image was built with (files/debian/layout-pc.sh) boots the filesystem
//! holding the marker when there is one, else the old root. Once the PC
//! runs from the mirror, the old root partition is wiped and joins it.

use super::{Action, Cmd, Guard, Step, run};
use crate::planner::{Alert, MirrorPlan};
use crate::spec::SYSTEM_MIRROR_NAME;
use crate::storage::{mdadm, partition};

/// GPT's type for a Linux RAID member.
const LINUX_RAID: &str = "A19D880F-05FC-4D3B-A006-743F0F84911E";
const EFI_SYSTEM: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";

/// The file whose presence on a root filesystem tells GRUB to boot it:
/// named after the root it replaces, so no other disk's mirror (another
/// nasforge PC's disk put in this one) ever qualifies. GRUB's side is in
/// files/debian/layout-pc.sh.
pub fn marker(root_uuid: &str) -> String {
    format!("/etc/nasforge/system-mirror.{root_uuid}")
}

pub fn device() -> String {
    format!("/dev/md/{SYSTEM_MIRROR_NAME}")
}

pub(super) fn steps(
    m: &MirrorPlan,
    uuid: &str,
    hostname: &str,
    alert: &Alert,
    out: &mut Vec<Step>,
) {
    let new = m.disk.stable_path();
    let old = m.system.stable_path();
    let new_esp = partition::partition_path(&new, 1);
    let new_root = partition::partition_path(&new, 2);
    let old_root = partition::partition_path(&old, 2);
    let md = device();
    let marker = marker(&m.root_uuid);
    if m.erase {
        out.push(super::wipe_step(&m.disk));
    }
    out.push(Step {
        id: format!("system-mirror:partition:{}", m.disk.name),
        title: format!(
            "Partition {} ({}) as {} is: its EFI system partition, then the mirror's half",
            m.disk.name,
            m.disk.summary(),
            m.system.name
        ),
        guard: Guard::MirrorDisk {
            device: new.clone(),
            disk: m.disk.identity(),
        },
        actions: vec![
            Action::Run(Cmd {
                stdin: Some(table(m)),
                ..Cmd::new(&[
                    "sfdisk",
                    "--quiet",
                    "--wipe",
                    "always",
                    "--wipe-partitions",
                    "always",
                    &new,
                ])
            }),
            Action::RereadPartitions {
                device: new.clone(),
            },
            run(&["udevadm", "settle"]),
        ],
        always: vec![],
    });
    out.push(Step {
        id: "system-mirror:esp".into(),
        title: format!(
            "Make {new_esp} an EFI system partition with the loader of {}",
            m.system.name
        ),
        guard: Guard::Always,
        actions: vec![
            run(&["mkfs.vfat", "-F", "32", "-s", "4", "-n", "NFESP2", &new_esp]),
            run(&["sh", "-euc", COPY_LOADER, "sh", &new_esp]),
        ],
        always: vec![],
    });
    let create = [
        "mdadm",
        "--create",
        &md,
        "--run",
        &format!("--homehost={hostname}"),
        &format!("--name={SYSTEM_MIRROR_NAME}"),
        "--metadata=1.2",
        "--level=1",
        "--raid-devices=2",
        "--bitmap=internal",
        // The copy takes slot 0: GRUB reads a RAID1 from its first member
        // that answers, and never asks whether that member is up to date.
        &new_root,
        "missing",
    ];
    out.push(Step {
        id: "system-mirror:array".into(),
        title: format!("Create the RAID1 {md} on {new_root}, its second half to come"),
        guard: Guard::ArrayExists {
            device: md.clone(),
            members: vec![new_root.clone()],
        },
        actions: vec![
            run(&["udevadm", "settle"]),
            run(&["udevadm", "control", "--stop-exec-queue"]),
            run(&create),
        ],
        always: vec![
            run(&["udevadm", "control", "--start-exec-queue"]),
            run(&["udevadm", "settle"]),
        ],
    });
    out.push(Step {
        id: "system-mirror:mkfs".into(),
        title: format!("Make the mirror's ext4 root filesystem on {md}"),
        guard: Guard::Filesystem {
            device: md.clone(),
            uuid: uuid.to_string(),
        },
        actions: vec![run(&["mkfs.ext4", "-F", "-L", "system", "-U", uuid, &md])],
        always: vec![],
    });
    out.push(Step {
        id: "system-mirror:initramfs".into(),
        title: "Write mdadm.conf and an initramfs that starts the mirror, from either disk".into(),
        guard: Guard::Always,
        actions: vec![
            Action::CaptureToFile {
                path: mdadm::CONF.into(),
                header: mdadm::conf_header(hostname, alert, false),
                cmd: Cmd::new(&["mdadm", "--detail", "--scan"]),
                drop: vec!["spares=".into()],
                first: vec![],
            },
            // The image builds its initramfs with MODULES=dep, which takes
            // the drivers of the disks the root is on when it is built: now
            // only the old disk's, later only those of the halves present.
            // The hook names both disks' drivers, so either boots alone.
            run(&[
                "sh",
                "-euc",
                DRIVERS_HOOK,
                "sh",
                DRIVERS_HOOK_PATH,
                &old,
                &new,
            ]),
            // The copy made next carries this initramfs: built before it.
            run(&["update-initramfs", "-u", "-k", "all"]),
        ],
        always: vec![],
    });
    out.push(Step {
        id: "system-mirror:switch".into(),
        title: format!("Copy the running system onto {md}, switch the boot to it and reboot"),
        guard: Guard::OnMirror {
            marker: marker.clone(),
        },
        actions: vec![
            run(&[
                "sh",
                "-euc",
                COPY_SYSTEM,
                "sh",
                &md,
                &new_root,
                &m.root_uuid,
                uuid,
                &marker,
            ]),
            Action::Reboot,
        ],
        always: vec![],
    });
    out.push(Step {
        id: "system-mirror:release".into(),
        title: format!(
            "Wipe the old root partition {old_root}, now that the system runs from {md}"
        ),
        guard: Guard::OldRoot {
            marker,
            array: md.clone(),
            partition: old_root.clone(),
        },
        actions: vec![
            // Bytes 1024 on of the old ext4 survive mdadm's superblock at
            // 4 KiB: GRUB and blkid would go on finding the old root there.
            run(&["wipefs", "--all", "--force", &old_root]),
            run(&[
                "sfdisk",
                "--no-reread",
                "--no-tell-kernel",
                "--part-type",
                &old,
                "2",
                LINUX_RAID,
            ]),
        ],
        always: vec![],
    });
    out.push(Step {
        id: "system-mirror:add".into(),
        title: format!(
            "Add {old_root} to {md}: the mirror resyncs onto {}",
            m.system.name
        ),
        guard: Guard::Care(super::CareGuard::Added {
            array: md.clone(),
            member: old_root.clone(),
        }),
        actions: vec![run(&["mdadm", &md, "--add", &old_root])],
        always: vec![],
    });
}

/// sfdisk's script: the system disk's two partitions at the same sectors,
/// the second a RAID member.
fn table(m: &MirrorPlan) -> String {
    let sectors = |bytes: u64| bytes / m.system.logical_block_size;
    let line = |p: &crate::machine::disks::Partition, kind: &str, name: &str| {
        format!(
            "start={}, size={}, type={kind}, name=\"{name}\"\n",
            sectors(p.start),
            sectors(p.size.bytes())
        )
    };
    format!(
        "label: gpt\nunit: sectors\n\n{}{}",
        line(&m.esp, EFI_SYSTEM, "EFI System"),
        line(&m.root, LINUX_RAID, "nasforge system mirror")
    )
}

/// Copies the running loader onto the new EFI system partition ($1): its
/// configuration first and the loader last, under a name the firmware does
/// not look for until it is whole.
const COPY_LOADER: &str = r#"
src=/boot/efi/EFI/BOOT
mountpoint -q /boot/efi || mount /boot/efi
test -s "$src/BOOTX64.EFI"
dst=/run/nasforge/esp2
mkdir -p "$dst"
mount "$1" "$dst"
trap 'umount "$dst"' EXIT
mkdir -p "$dst/EFI/BOOT"
cp "$src/grub.cfg" "$dst/EFI/BOOT/grub.cfg"
sync
cp "$src/BOOTX64.EFI" "$dst/EFI/BOOT/BOOTX64.TMP"
sync
mv "$dst/EFI/BOOT/BOOTX64.TMP" "$dst/EFI/BOOT/BOOTX64.EFI"
sync
cmp "$src/BOOTX64.EFI" "$dst/EFI/BOOT/BOOTX64.EFI"
cmp "$src/grub.cfg" "$dst/EFI/BOOT/grub.cfg"
"#;

const DRIVERS_HOOK_PATH: &str = "/etc/initramfs-tools/hooks/nasforge-system-mirror";

/// Writes the initramfs hook ($1) that copies the driver of every device
/// between each disk ($2, $3) and the system bus, found as initramfs-tools'
/// own MODULES=dep walk finds them (hook-functions: sys_walk_mod_add), and
/// for an NVMe disk under native multipath, whose block device hangs off a
/// virtual subsystem, from each of that subsystem's controllers. Module
/// names, not paths: each kernel a later update installs resolves them for
/// itself. A disk with no driver found at all stops the step: a hook
/// without it would boot from the other disk only.
const DRIVERS_HOOK: &str = r#"
hook=$1; shift
# sh has no local variables: the walk's own is `up`.
walk() {
	up=$1
	while [ "$up" != /sys ] && [ "$up" != / ]; do
		if [ -e "$up/driver" ]; then
			echo driver
			if [ -e "$up/driver/module" ]; then basename "$(readlink -f "$up/driver/module")"; fi
		fi
		up=$(dirname "$up")
	done
}
modules=
for disk in "$@"; do
	dev=$(readlink -f "/sys/class/block/$(basename "$(readlink -f "$disk")")/device")
	found=$(
		walk "$dev"
		for ctrl in "$dev"/nvme[0-9]*; do
			if [ -e "$ctrl/device" ]; then walk "$(readlink -f "$ctrl")"; fi
		done
	)
	case "$found" in
	*driver*) ;;
	*) echo "found no driver for $disk (from $dev)" >&2; exit 1 ;;
	esac
	modules="$modules $(echo "$found" | grep -vx driver || true)"
done
modules=$(printf '%s\n' $modules | sort -u | tr '\n' ' ')
if [ -z "${modules% }" ]; then
	rm -f "$hook"
	echo "the drivers of the system's two disks are built into the kernel"
	exit 0
fi
cat >"$hook.tmp" <<HOOK
#!/bin/sh
# nasforge: the system is mirrored over two disks ([storage.system_mirror]).
# MODULES=dep takes only the drivers of the halves present when it runs:
# these are both disks' drivers, so the PC boots from either one alone.
case "\$1" in prereqs) exit 0 ;; esac
. /usr/share/initramfs-tools/hook-functions
manual_add_modules $modules
HOOK
chmod 755 "$hook.tmp"
mv "$hook.tmp" "$hook"
echo "drivers of the system's two disks in every initramfs: $modules"
"#;

/// Copies the running root onto the mirror ($1, its half $2) and switches
/// the boot to it: fstab names the new filesystem ($4 for $3), then the
/// marker ($5) is written. Everything before the marker can be repeated.
const COPY_SYSTEM: &str = r#"
md=$1 half=$2 old=$3 new=$4 marker=$5
test "$(findmnt -no UUID /)" = "$old" || { echo "/ is not the filesystem $old this was planned for" >&2; exit 1; }
# Cut short before, the one-disk mirror waits, inactive, for its second half.
if ! mdadm --detail "$md" >/dev/null 2>&1; then
	mdadm --run "$md" 2>/dev/null || mdadm --assemble --run "$md" "$half"
fi
mkdir -p /run/nasforge/system-mirror
dst=/run/nasforge/system-mirror
mountpoint -q "$dst" || mount "$md" "$dst"
# The first pass is cp's: rsync checksums every file it sends, twice
# over (sender and receiver); on the emulated PC this step took 76 s so,
# against 125 s with a second rsync pass in cp's place. A file that
# vanished meanwhile (a log's temporary file, as on any running system)
# fails cp but not the copy: rsync then brings over what changed since,
# deletes what went, and fails on what cannot be copied at all (its 24 is
# only "files vanished").
cp -ax /. "$dst/" || echo "cp could not copy everything; rsync follows" >&2
sync
rsync -aHAXxS --numeric-ids --delete --exclude='/etc/nasforge/system-mirror.*' / "$dst/" || [ $? -eq 24 ]
sed -i "s|^UUID=$old[[:space:]]|UUID=$new |" "$dst/etc/fstab"
grep -q "^UUID=$new " "$dst/etc/fstab" || { echo "$dst/etc/fstab does not name the root UUID=$old" >&2; exit 1; }
# Not lsinitramfs: bookworm's reads no initramfs that is zstd from its
# first byte ("cpio: premature end of archive").
initrd=$(readlink -f "$dst/initrd.img")
if command -v zstd >/dev/null; then unpack="zstd -dcf"; else unpack="gzip -dcf"; fi
$unpack "$initrd" | cpio -t 2>/dev/null | grep -qE '^(usr/)?sbin/mdadm$' || { echo "$initrd carries no mdadm, so it could not start the mirror" >&2; exit 1; }
mkdir -p "$dst/etc/nasforge"
touch "$dst$marker"
sync
umount "$dst"
"#;
