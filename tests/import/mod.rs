//! An old NAS's md array and ZFS pool adopted as they are (issue 38.4), on
//! the PC's last boot, with the Debian mdadm, OpenZFS and kernel on it:
//! three blank SATA disks get the raid5 OpenMediaVault makes
//! (`omv-mkraid`: whole disks, metadata 1.2, `/dev/md0` on a host called
//! openmediavault, so md names it `openmediavault:0`), an ext4 with a
//! file, and the array is stopped; udev leaves it stopped (mdadm.conf's
//! `AUTO -all`). Two more get a ZFS mirror `oldtank` made by
//! zpool itself (default mountpoint /oldtank, a dataset with a file, and
//! one mounted at a folder of its own under /home) on the old NAS, which
//! the PC plays under another hostid, and left in use there as a power cut
//! leaves it: zpool lists it as last used by another system. Then
//! nasforge-setup runs unattended with a recipe that adopts both: first
//! declared a raid6 of xfs and raidz1, which is refused, with the ext4
//! found on the array and the dataset that would mount under /home (to be
//! mended after `zpool import -N -f`), and every disk byte for byte as it
//! was (the `zpool import` listing, `mdadm --examine`, the array's
//! read-only assembly and the pool's read-only import with -f to look
//! inside write nothing, and neither is left assembled or imported); the
//! dataset's mountpoint is inherited again as the refusal says, on the old
//! NAS, which leaves the pool in use again; then raid5, which setup
//! adopts, and the mirror added to the recipe after setup, which `apply`
//! imports with -f and a warning saying why: no partition, mkfs, wipe or
//! zpool create, the
//! superblocks keep their name, mdadm.conf and fstab list the array, the
//! pool is imported by id into the cache file and mounted at the recipe's
//! mount, and both files read back with their sha256.
//!
//! Then a member of the adopted array fails, and `nasforge-setup replace`
//! adds a blank disk whole in its place, as the old NAS made the others;
//! md rebuilds onto it and the file reads back. A disk of the adopted pool
//! fails too (`zpool offline -f`), named by the `ata-` link zpool's import
//! picked, and replace puts another blank disk in its place with `zpool
//! replace`; after the resilver the pool is ONLINE and its file reads back.
//!
//! Last, copies of the old NAS's five disks as it left them (the array
//! stopped, the pool in use under the other hostid) go into a fresh
//! image's first boot (`moved_to_a_fresh_image`): mdadm and OpenZFS
//! installed offline with a foreign array and pool present (the new NAS
//! has the old one's name, so the array's homehost is its own and only
//! mdadm.conf's `AUTO -all` keeps it stopped), a recipe that
//! asks for the array by a name it does not have, then the UUID the
//! refusal names written into the recipe on the boot disk, and a reboot.

use super::{Board, Phases, run, sha256_file, smb_get, sudo, wait_for_output};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SERIALS: [&str; 3] = ["old-omv0", "old-omv1", "old-omv2"];
const POOL_SERIALS: [&str; 2] = ["old-zfs0", "old-zfs1"];
/// Blank disks of the same size, for a failed member of the array and one
/// of the pool.
const NEW: &str = "old-new0";
const POOL_NEW: &str = "old-new1";
/// Where the copies of the old NAS's disks go, and the fresh PC that takes
/// them keeps its emulator's files.
const MOVED: &str = "moved";
/// The image built to adopt them (`moved_recipe`).
pub const MOVED_IMAGE: &str = "out/x86-moved.img";

fn image(dir: &Path, serial: &str) -> PathBuf {
    dir.join(format!("{serial}.img"))
}

/// The old NAS's disks and two new ones: blank, on SATA ports (neither
/// sas-, ssd- nor usb-).
pub fn disks(dir: &Path) -> Vec<PathBuf> {
    SERIALS
        .iter()
        .chain(&POOL_SERIALS)
        .chain(&[NEW, POOL_NEW])
        .map(|s| {
            let p = image(dir, s);
            std::fs::File::create(&p)
                .unwrap()
                .set_len(256 << 20)
                .unwrap();
            p
        })
        .collect()
}

/// The recipe a user writes to adopt the array and the pool, with the
/// levels they think they have; without `uuid`, the array is asked for by
/// the name 'media', which is not its name on the disks.
fn recipe(uuid: Option<&str>, level: &str, pool_level: &str) -> String {
    let uuid = uuid
        .map(|u| format!("uuid = \"{u}\"\n"))
        .unwrap_or_default();
    format!(
        "[storage]\nmode = \"unattended\"\n\n[[storage.arrays]]\nname = \"media\"\nimport = true\n{uuid}level = \"{level}\"\nfilesystem = \"ext4\"\nmount = \"/srv/media\"\n\n[[storage.arrays]]\nname = \"oldtank\"\nimport = true\nlevel = \"{pool_level}\"\nfilesystem = \"zfs\"\nmount = \"/srv/oldtank\"\n"
    )
}

/// `/dev/<name>` of the disk with each serial.
fn devices_of(listed: &str, serials: &[&str]) -> Vec<String> {
    serials
        .iter()
        .map(|s| {
            let name = listed
                .lines()
                .find_map(|l| {
                    let mut w = l.split_whitespace();
                    let name = w.next()?;
                    (w.next() == Some(*s)).then(|| name.to_string())
                })
                .unwrap_or_else(|| panic!("no disk with serial {s}:\n{listed}"));
            format!("/dev/{name}")
        })
        .collect()
}

/// `nasforge-setup <command>` run with `recipe` as /root/import.toml: its
/// output, and its exit status as `exit=N`.
fn run_with(pc: &Board, key: &Path, recipe: &str, command: &str) -> String {
    sudo(
        pc,
        key,
        &format!(
            "printf \"%s\" \"{}\" > /root/import.toml; nasforge-setup {command} --recipe /root/import.toml 2>&1; echo exit=$?",
            recipe.replace('"', "\\\"")
        ),
    )
}

fn setup_with(pc: &Board, key: &Path, recipe: &str) -> String {
    run_with(pc, key, recipe, "--unattended")
}

/// The recipe without its second array: the pool.
fn without_pool(recipe: &str) -> String {
    recipe[..recipe
        .find("\n[[storage.arrays]]\nname = \"oldtank\"")
        .unwrap()]
        .to_string()
}

/// The old NAS the pool comes from, played by the PC under another hostid
/// (OpenZFS reads spl_hostid at each use): `commands` run there, then the
/// pool is left in use as that NAS's power cut leaves it. Its disks are
/// saved while it is imported, it is exported (which would clear the
/// mark), and the saved bytes are put back, so zpool here lists it as last
/// used by another system, to be imported only with -f. The output of
/// `commands`, then that listing.
fn on_the_old_nas(pc: &Board, key: &Path, pool_devices: &str, commands: &str) -> String {
    let out = sudo(
        pc,
        key,
        &format!(
            "own=$(cat /sys/module/spl/parameters/spl_hostid) && echo 0xdeadbeef > /sys/module/spl/parameters/spl_hostid \
             && {commands} && zpool sync oldtank \
             && for d in {pool_devices}; do dd if=$d of=/var/tmp/$(basename $d).old bs=1M iflag=direct conv=sparse status=none || exit 1; done \
             && zpool export oldtank && echo $own > /sys/module/spl/parameters/spl_hostid \
             && for d in {pool_devices}; do dd if=/var/tmp/$(basename $d).old of=$d bs=1M oflag=direct status=none && rm /var/tmp/$(basename $d).old || exit 1; done \
             && udevadm settle && zpool import -d /dev/disk/by-id"
        ),
    );
    assert!(
        out.contains("The pool was last accessed by another system") && out.contains("'-f'"),
        "{out}"
    );
    out
}

/// What the old NAS left on its disks, as its maker knows it.
pub struct Old {
    uuid: String,
    pool_id: String,
    sha: String,
    pool_sha: String,
}

/// Setup's or apply's log of an adoption: nothing partitioned, made,
/// erased, forced, rewritten or upgraded.
fn adopted_as_it_is(log: &str) {
    for never in [
        "] Partition ",
        "] Make a",
        "] Erase ",
        "] Create ZFS pool",
        "--force",
        "--update",
        "zpool upgrade",
    ] {
        assert!(!log.contains(never), "`{never}` in:\n{log}");
    }
}

/// `dir` holds the disks' images (`disks`); copies of the old NAS's five,
/// as it left them, are left in `dir/moved`.
pub fn old_array_adopted(pc: &Board, key: &Path, dir: &Path) -> Old {
    let listed = sudo(pc, key, "lsblk -ndo NAME,SERIAL");
    let devices = devices_of(&listed, &SERIALS);
    let pool_devices = devices_of(&listed, &POOL_SERIALS).join(" ");
    let members = devices.join(" ");
    let made = sudo(
        pc,
        key,
        &format!(
            "mdadm --create /dev/md0 --run --verbose --level=5 --raid-devices=3 --homehost=openmediavault --assume-clean {members} 2>&1 \
             && mkfs.ext4 -q -L media /dev/md0 && mkdir -p /mnt/old && mount /dev/md0 /mnt/old \
             && head -c 16777216 /dev/urandom > /mnt/old/photos.bin && sha256sum /mnt/old/photos.bin \
             && umount /mnt/old && mdadm --stop /dev/md0 && udevadm settle \
             && mdadm --examine --export {} && cat /proc/mdstat",
            devices[0]
        ),
    );
    eprintln!("e2e: an OpenMediaVault-style raid5 made on the PC's spare SATA disks:\n{made}");
    let sha = made
        .lines()
        .find(|l| l.ends_with("/mnt/old/photos.bin"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let uuid = made
        .lines()
        .find_map(|l| l.strip_prefix("MD_UUID="))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        made.contains("MD_NAME=openmediavault:0") && made.contains("MD_LEVEL=raid5"),
        "{made}"
    );
    let stopped = made.rsplit("MD_EVENTS=").next().unwrap();
    assert!(
        !stopped
            .lines()
            .any(|l| l.contains(" : active") && l.contains("raid5")),
        "udev started the foreign array again:\n{made}"
    );
    let pool = on_the_old_nas(
        pc,
        key,
        &pool_devices,
        &format!(
            "zpool create -f -o cachefile=none oldtank mirror {pool_devices} && zfs create oldtank/photos \
             && zfs create -o mountpoint=/home/oldtank-home oldtank/home \
             && head -c 8388608 /dev/urandom > /oldtank/photos/family.bin && sha256sum /oldtank/photos/family.bin \
             && zpool get -H -o value guid oldtank"
        ),
    );
    eprintln!(
        "e2e: a ZFS mirror made by zpool on two more, left in use under another hostid:\n{pool}"
    );
    let pool_sha = pool
        .lines()
        .find(|l| l.ends_with("/oldtank/photos/family.bin"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let pool_id = pool
        .lines()
        .find(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .unwrap()
        .to_string();
    // The old disks' bytes, read from their images on the host once the
    // PC's sync has handed qemu everything written: sha256sum of the five
    // disks on the emulated PC took about half a minute each time.
    let hashes = || {
        sudo(pc, key, "sync");
        SERIALS
            .iter()
            .chain(&POOL_SERIALS)
            .map(|s| sha256_file(&image(dir, s)))
            .collect::<Vec<_>>()
    };
    let before = hashes();

    // The journal of the PC's own setup is put aside: this is a second
    // setup, from a recipe that adopts the array and nothing else.
    sudo(
        pc,
        key,
        "mv /var/lib/nasforge/journal.json /var/lib/nasforge/journal.pc.json",
    );
    let wrong = recipe(Some(&uuid), "raid6", "raidz1").replacen(
        "filesystem = \"ext4\"",
        "filesystem = \"xfs\"",
        1,
    );
    let refused = setup_with(pc, key, &wrong);
    eprintln!("e2e: setup with the array declared raid6 of xfs and the pool raidz1:\n{refused}");
    assert!(
        refused.contains(&format!(
            "storage.arrays[0].level: the array on the disks is raid5 'openmediavault:0' (UUID {uuid}), 3 of 3 members"
        )) && refused.contains("set level = \"raid5\"")
            && refused.contains(&format!(
                "storage.arrays[1].level: the pool on the disks is ZFS pool 'oldtank' (id {pool_id}), mirror, ONLINE"
            ))
            && refused.contains("set level = \"mirror\"")
            && refused.contains("3 of 3 members") && refused.contains("; holds ext4")
            && refused.contains("storage.arrays[0].filesystem: the array holds an ext4 filesystem, not xfs; if it is the one you mean, set filesystem = \"ext4\"")
            && refused.contains("its dataset oldtank/home has a mountpoint of its own, /home/oldtank-home, outside /srv/oldtank")
            && refused.contains("or here after zpool import -N -f oldtank, run zfs inherit mountpoint oldtank/home")
            && !refused.contains("exit=0"),
        "{refused}"
    );
    // The array was assembled read-only and the pool imported read-only
    // to look into them: nothing written, and neither left behind.
    assert_eq!(hashes(), before, "the refused setup wrote to the old disks");
    let left = sudo(pc, key, "cat /proc/mdstat; zpool list -H -o name");
    assert!(
        !left
            .lines()
            .any(|l| l.contains(" : active") && l.contains("raid5"))
            && !left.contains("nasforge-probe"),
        "{left}"
    );
    // As the refusal says, on the old NAS, which leaves the pool in use
    // again.
    on_the_old_nas(
        pc,
        key,
        &pool_devices,
        "zpool import -N -d /dev/disk/by-id oldtank && zfs inherit mountpoint oldtank/home",
    );

    // The disks as they leave the old NAS, for a fresh image built to adopt
    // them (`moved_to_a_fresh_image`): this PC adopts and changes them next.
    sudo(pc, key, "sync");
    let moved = dir.join(MOVED);
    std::fs::create_dir_all(&moved).unwrap();
    for s in SERIALS.iter().chain(&POOL_SERIALS) {
        run(Command::new("cp")
            .arg("--sparse=always")
            .arg(image(dir, s))
            .arg(&moved));
    }

    let right = recipe(Some(&uuid), "raid5", "mirror");
    let adopted = setup_with(pc, key, &without_pool(&right));
    eprintln!("e2e: setup adopting the raid5:\n{adopted}");
    assert!(
        adopted.contains(&format!(
            "Adopt the raid5 array 'openmediavault:0' (UUID {uuid}) as /dev/md/media: nothing erased"
        )) && adopted.contains("--readonly")
            && adopted.contains("mdadm --readwrite /dev/md/media")
            && adopted.contains("setup complete")
            && adopted.contains("exit=0"),
        "{adopted}"
    );
    // The pool's disks come later, as a person adds them to a running NAS:
    // its entry is added to the recipe and `apply` adopts it.
    let applied = run_with(pc, key, &right, "apply --yes");
    eprintln!("e2e: apply adopting the mirror after setup:\n{applied}");
    assert!(
        applied.contains(&format!(
            "Import the ZFS pool 'oldtank' (id {pool_id}, mirror, last used by another system: -f) mounted at /srv/oldtank: nothing erased"
        )) && applied.contains(&format!(
            "zpool import -N -d /dev/disk/by-id -o cachefile=/etc/zfs/zpool.cache -f {pool_id}"
        )) && applied.contains("it was last used by another system and not exported there, so it is imported with -f")
            && applied.contains("apply complete")
            && applied.contains("exit=0"),
        "{applied}"
    );
    let adopted = format!("{adopted}\n{applied}");
    adopted_as_it_is(&adopted);
    let after = sudo(
        pc,
        key,
        &format!(
            "sha256sum /srv/media/photos.bin /srv/oldtank/photos/family.bin; mdadm --examine {} | grep Name; grep -E \"^ARRAY|^AUTO\" /etc/mdadm/mdadm.conf; grep /srv/media /etc/fstab; findmnt -no SOURCE /srv/media; zpool list -H -o name,health oldtank; zpool status -P oldtank | grep -c /dev/disk/by-id/; grep -q oldtank /etc/zfs/zpool.cache && echo cached-oldtank",
            devices[0]
        ),
    );
    eprintln!("e2e: the adopted array:\n{after}");
    assert!(
        after.contains(&format!("{sha}  /srv/media/photos.bin"))
            && after.contains("Name : openmediavault:0")
            && after.contains(&format!("UUID={uuid}"))
            && after.lines().any(|l| l == "AUTO -all")
            && after.contains("/dev/md/media  /srv/media  ext4  defaults,nofail  0  0")
            && after.contains(&format!("{pool_sha}  /srv/oldtank/photos/family.bin"))
            && after.contains("oldtank\tONLINE")
            && after.contains("cached-oldtank"),
        "{after}"
    );

    // Cared for as nasforge's own: a member fails, and `replace` puts the
    // blank disk in its place whole, as OpenMediaVault made the others.
    let failed = &devices[2];
    let replaced = sudo(
        pc,
        key,
        &format!(
            "mdadm /dev/md/media --fail {failed} 2>&1; nasforge-setup replace --array media --disk {NEW} --yes 2>&1; mdadm --detail /dev/md/media; sha256sum /srv/media/photos.bin"
        ),
    );
    eprintln!("e2e: a member of the adopted array failed, replaced:\n{replaced}");
    let new = devices_of(&listed, &[NEW]).remove(0);
    assert!(
        replaced.contains("Replace the failed member of 'media'")
            && replaced.contains("replace complete")
            && !replaced.contains("] Partition ")
            && replaced.contains("Active Devices : 3")
            && replaced
                .lines()
                .any(|l| l.contains("active sync") && l.ends_with(new.as_str()))
            && replaced.contains(&format!("{sha}  /srv/media/photos.bin")),
        "{replaced}"
    );

    let leaf = format!(
        "/dev/disk/by-id/ata-QEMU_HARDDISK_{}-part1",
        POOL_SERIALS[1]
    );
    let replaced = sudo(
        pc,
        key,
        &format!(
            "zpool offline -f oldtank {leaf} 2>&1; nasforge-setup replace --array oldtank --disk {POOL_NEW} --yes 2>&1; echo ==after==; zpool status -P oldtank; sha256sum /srv/oldtank/photos/family.bin"
        ),
    );
    eprintln!("e2e: a disk of the adopted pool faulted, replaced:\n{replaced}");
    let new_leaf = format!("/dev/disk/by-id/ata-QEMU_HARDDISK_{POOL_NEW}-part1");
    let after = replaced.rsplit("==after==").next().unwrap();
    assert!(
        replaced.contains("Replace the failed member of 'oldtank'")
            && replaced.contains(&format!(
                "zpool replace oldtank {leaf} /dev/disk/by-id/ata-QEMU_HARDDISK_{POOL_NEW}"
            ))
            && replaced.contains("replace complete")
            && after
                .lines()
                .any(|l| l.contains(&new_leaf) && l.contains("ONLINE"))
            && !after.contains(&leaf)
            && after.contains(" state: ONLINE")
            && after.contains(&format!("{pool_sha}  /srv/oldtank/photos/family.bin")),
        "{replaced}"
    );
    Old {
        uuid,
        pool_id,
        sha,
        pool_sha,
    }
}

/// The PC's recipe (`pc`, the bundled one made a user's) turned into one
/// for a new NAS that takes over the old one's disks and its name, as a
/// box replaced (or an older nasforge's card flashed again) does: the
/// hostname is the one in the array's superblock, which mdadm's
/// `AUTO +homehost` would start read-write at boot. Its storage adopts
/// the array, asked for as 'media', and the pool, with nothing else, and
/// shares the array as `data`.
pub fn moved_recipe(pc: &str) -> String {
    let (head, rest) = pc.split_once("\n[storage]\n").unwrap();
    let name = "hostname = \"bignas\"";
    assert!(head.contains(name), "{head}");
    let head = head.replace(name, "hostname = \"openmediavault\"");
    let tail = &rest[rest.find("\n[output]\n").unwrap()..];
    let output = "path = \"out/x86-15-drive-raidz2.img\"";
    assert!(tail.contains(output), "{tail}");
    format!(
        "{head}\n{}\n[[shares]]\nname = \"data\"\npath = \"/srv/media\"\nsmb = {{ users = [\"admin\"] }}\n{}",
        recipe(None, "raid5", "mirror"),
        tail.replace(output, &format!("path = \"{MOVED_IMAGE}\""))
    )
}

/// The old NAS's five disks, as it left them, moved to a fresh image built
/// from `moved_recipe`, booted for the first time with them in. Its first
/// boot installs mdadm and OpenZFS offline with the array (whose homehost
/// is the new NAS's name) and the pool present: neither is assembled or
/// imported, mdadm's postinst lists neither, and the disks hash the same.
/// Setup refuses the array asked for by a name it does not have, naming
/// what is there with its UUID;
/// with the UUID written into the recipe on the boot disk, the first boot
/// run again adopts both, and after a reboot they are back under their
/// names, imported from the cache file and shared.
pub fn moved_to_a_fresh_image(dir: &Path, key: &Path, old: &Old, t: &mut Phases) {
    let here = dir.join(MOVED);
    let image = dir.join(MOVED_IMAGE);
    let disks: Vec<PathBuf> = SERIALS
        .iter()
        .chain(&POOL_SERIALS)
        .map(|s| here.join(format!("{s}.img")))
        .collect();
    let hashes = || disks.iter().map(|p| sha256_file(p)).collect::<Vec<_>>();
    let before = hashes();
    let mut pc = Board::boot(&here, &image, &disks, "first-boot.log");
    // A first boot that adopted by mistake ends too: the assertion below
    // says so, rather than the limit.
    pc.wait_until(
        "the first boot ended",
        Duration::from_secs(2400),
        Duration::from_secs(5),
        |b| {
            let log = b.log();
            log.contains("nasforge-firstboot: FAILED:")
                || log.contains("nasforge-firstboot: first boot complete")
        },
    );
    let log = pc.log();
    let Old {
        uuid,
        pool_id,
        sha,
        pool_sha,
    } = old;
    assert!(
        log.contains(&format!(
            "storage.arrays[0].name: no md array called 'media' (or '<host>:media') is on the disks to import; the disks hold: raid5 'openmediavault:0' (UUID {uuid}), 3 of 3 members"
        )) && log.contains(&format!(
            "ZFS pool 'oldtank' (id {pool_id}), mirror, ONLINE"
        )) && !log.contains("storage.arrays[1]"),
        "the first boot refuses the array by the wrong name, and only that:\n{}",
        super::tail(&log, 80)
    );
    pc.wait_for_ssh(key, Duration::from_secs(300));
    let state = sudo(
        &pc,
        key,
        "sync; cat /proc/mdstat; zpool list -H -o name; echo ==conf==; cat /etc/mdadm/mdadm.conf; echo ==units==; systemctl is-enabled zfs-import-scan.service zfs-import-cache.service; true",
    );
    eprintln!("e2e: a fresh image's first boot with the old NAS's disks in, refused:\n{state}");
    let conf = state.split("==conf==").nth(1).unwrap();
    // zfs-import-scan.service is disabled as bookworm's zfsutils-linux
    // leaves it; enabled, its `zpool import -a` would take an exported
    // pool at boot before anyone chose it.
    assert!(
        state
            .split("==units==")
            .nth(1)
            .unwrap()
            .trim_start()
            .starts_with("disabled\nenabled"),
        "zfs-import-scan.service is enabled: {state}"
    );
    assert!(
        !state.lines().any(|l| l.starts_with("md"))
            && !state.contains("oldtank")
            && conf.lines().any(|l| l == "AUTO -all")
            && !conf.contains(uuid.as_str()),
        "the first boot assembled, imported or listed the old NAS's array or pool:\n{state}"
    );
    assert_eq!(
        hashes(),
        before,
        "the first boot wrote to the old NAS's disks"
    );
    t.lap("a fresh image's first boot with an old NAS's raid5 and pool in: offline packages, nothing assembled, imported or written, the array asked for by a wrong name refused");

    let from = pc.log().len();
    let fixed = sudo(
        &pc,
        key,
        &format!(
            r#"sed -i "s/^name = \"media\"$/&\nuuid = \"{uuid}\"/" /boot/nasforge.toml && grep -c "^uuid = " /boot/nasforge.toml && systemctl start nasforge-firstboot.service; systemctl is-active nasforge-firstboot.service; cat /boot/nasforge-status.txt"#
        ),
    );
    let log = pc.log();
    let adopted = log.get(from..).unwrap_or_default();
    eprintln!(
        "e2e: the UUID written into /boot/nasforge.toml, first boot run again:\n{fixed}\n{adopted}"
    );
    assert!(
        fixed.starts_with('1')
            && fixed.contains("\nactive")
            && adopted.contains(&format!(
                "Adopt the raid5 array 'openmediavault:0' (UUID {uuid}) as /dev/md/media: nothing erased"
            ))
            && adopted.contains(&format!(
                "Import the ZFS pool 'oldtank' (id {pool_id}, mirror, last used by another system: -f) mounted at /srv/oldtank: nothing erased"
            ))
            && adopted.contains("setup complete")
            && adopted.contains("nasforge-firstboot: first boot complete"),
        "{fixed}\n{adopted}"
    );
    adopted_as_it_is(adopted);
    assert_eq!(
        smb_get(&pc, &here, "photos.bin"),
        *sha,
        "the raid5's file over SMB"
    );
    t.lap("the UUID written into the recipe, first boot again: the raid5 and the pool adopted");

    let _ = pc.ssh(key, "sudo -S systemctl reboot");
    pc.wait_for_exit(Duration::from_secs(300));
    let mut pc = Board::boot(&here, &image, &disks, "after-reboot.log");
    pc.wait_for_ssh(key, Duration::from_secs(600));
    let back = wait_for_output(
        &mut pc,
        key,
        "cat /proc/mdstat; [ -e /dev/md/media ] && echo named /dev/md/media; zpool list -H -o name,health oldtank; mountpoint /srv/media; mountpoint /srv/oldtank; sha256sum /srv/media/photos.bin /srv/oldtank/photos/family.bin",
        Duration::from_secs(300),
        |s| s.contains("/srv/oldtank is a mountpoint"),
    );
    eprintln!("e2e: the adopted array and pool after a reboot:\n{back}");
    assert!(
        back.contains(" : active raid5 ")
            && back.contains("named /dev/md/media")
            && back.contains("oldtank\tONLINE")
            && back.contains("/srv/media is a mountpoint")
            && back.contains(&format!("{sha}  /srv/media/photos.bin"))
            && back.contains(&format!("{pool_sha}  /srv/oldtank/photos/family.bin")),
        "{back}"
    );
    assert_eq!(
        smb_get(&pc, &here, "photos.bin"),
        *sha,
        "over SMB after the reboot"
    );
    t.lap("reboot: the adopted raid5 assembled under its name, the pool imported from the cache file, both mounted and the share served");
    pc.poweroff(key);
}
