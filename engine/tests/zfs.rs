//! ZFS pools: the plan, the exact commands, the guards against a board
//! whose zpool and zfs are scripts answering as OpenZFS 2.1 does, resuming
//! after a power cut, a share added later, and the pool in the status.

use nasforge_testkit::board as common;
use nasforge_testkit::finished;

use common::{Board, with_zfs, zfs_answer, zfs_calls, zfs_output};
use nasforge_engine::executor::{self, Event};
use nasforge_engine::journal::{self, Journal};
use nasforge_engine::machine::disks::Inventory;
use nasforge_engine::machine::zfs::{ZfsOnBoard, ZfsSupport};
use nasforge_engine::planner::{self, Plan};
use nasforge_engine::runner::RecordingRunner;
use nasforge_engine::spec::DeviceRecipe;
use nasforge_engine::steps::{self, Action, Check, Context, Step};
use nasforge_engine::{care, status};
use std::path::Path;

const RAIDZ1_TWO_SHARES: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "tank"
level = "raidz1"
disks = { transport = "sata", count = 3 }
filesystem = "zfs"
mount = "/srv/tank"

[[shares]]
name = "media"
path = "/srv/tank/media"
smb = { users = ["admin"] }
nfs = { clients = "192.168.1.0/24" }
quota = "100GiB"

[[shares]]
name = "backup"
path = "/srv/tank/backup"
smb = { users = ["admin", "anna"], timemachine = true }
"#;

struct Case {
    recipe: DeviceRecipe,
    plan: Plan,
    steps: Vec<Step>,
    context: Context,
}

fn recipe(text: &str) -> DeviceRecipe {
    DeviceRecipe::parse(text, Path::new("recipe.toml")).unwrap()
}

/// The inventory of `board` as a board with ZFS reports it.
fn with_support(mut inventory: Inventory) -> Inventory {
    inventory.zfs = ZfsOnBoard::Available(ZfsSupport {
        version: Some("2.1.11-1+deb12u1".into()),
    });
    inventory
}

fn plan_on(inventory: &Inventory, text: &str) -> Result<Case, Vec<planner::Refusal>> {
    let recipe = recipe(text);
    let plan = planner::plan(recipe.storage.as_ref().unwrap(), &recipe.shares, inventory)?;
    let context = Context {
        hostname: "pinas".into(),
        system_uuid: None,
        fs_uuids: (0..plan.arrays.len())
            .map(|i| format!("0000000{i}-1111-4222-8333-444455556666"))
            .collect(),
    };
    let steps = steps::generate(&plan, &context);
    Ok(Case {
        recipe,
        plan,
        steps,
        context,
    })
}

fn case(text: &str) -> Case {
    let board = common::board("pi5-jmb585");
    plan_on(&with_support(board.inventory()), text).unwrap()
}

fn step<'a>(c: &'a Case, id: &str) -> &'a Step {
    c.steps
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id}"))
}

fn lines(step: &Step) -> Vec<String> {
    step.actions.iter().map(ToString::to_string).collect()
}

/// The `zpool create` line of the pool's step, without the retry's note.
fn create_line(c: &Case) -> String {
    lines(step(c, "create-pool:tank"))[1]
        .lines()
        .next()
        .unwrap()
        .to_string()
}

const DISK: &str = "/dev/disk/by-id/wwn-0x50014ee2b000000";

#[test]
fn a_raidz1_of_three_disks_with_two_shares() {
    let c = case(RAIDZ1_TWO_SHARES);
    insta::assert_snapshot!(
        "zfs_raidz1_two_shares",
        format!("{}\n{}", c.plan.describe(), executor::dry_run(&c.steps))
    );
    assert_eq!(
        create_line(&c),
        format!(
            "zpool create -o ashift=12 -o cachefile=/etc/zfs/zpool.cache -O compression=lz4 -O atime=off -O xattr=sa -O acltype=posixacl -O dnodesize=auto -O mountpoint=/srv/tank tank raidz1 {DISK}1 {DISK}2 {DISK}3"
        )
    );
    let ids: Vec<&str> = c.steps.iter().map(|s| s.id.as_str()).collect();
    for md in ["mdadm-conf", "initramfs", "fstab", "raid-monitoring"] {
        assert!(!ids.contains(&md), "{md} in {ids:?}");
    }
    assert!(
        !ids.iter()
            .any(|id| id.starts_with("partition:") || id.starts_with("mkfs:"))
    );
    // The pool, its boot units, its mount, then the datasets before the
    // shares' directories, and the watchers last.
    let at = |id: &str| ids.iter().position(|s| *s == id).unwrap();
    assert!(at("zfs-module") < at("create-pool:tank"));
    // The kernel is held before there is a pool that needs its modules.
    assert!(at("hold-kernel") < at("create-pool:tank"));
    assert_eq!(
        lines(step(&c, "hold-kernel"))[0].lines().next().unwrap(),
        "apt-mark hold <the installed linux-image-* and raspberrypi-kernel packages>"
    );
    // And a kernel installed in spite of the hold is refused before it
    // unpacks, unless its modules are there (proven on the emulated PC).
    assert!(
        step(&c, "hold-kernel").actions.iter().any(|a| matches!(a,
            Action::WriteFile { path, contents, mode: 0o755 }
                if path == "/etc/kernel/preinst.d/nasforge-zfs"
                    && contents.contains("installed \"nasforge-zfs-modules-$release\"")
                    && contents.ends_with("exit 1\n"))),
        "{:?}",
        step(&c, "hold-kernel")
    );
    assert!(at("create-pool:tank") < at("zfs-boot"));
    assert!(at("zfs-boot") < at("mount:tank"));
    assert!(at("mount:tank") < at("dataset:media"));
    assert!(at("dataset:backup") < at("share-dirs"));
    assert!(at("share-dirs") < at("zfs-monitoring"));
    assert_eq!(
        lines(step(&c, "dataset:media")),
        [
            "zfs create -p -o quota=107374182400 tank/media\n    # or, if tank/media exists already: zfs set quota=107374182400 tank/media"
        ]
    );
}

/// The kernel guard as Debian's preinst runs it (`run-parts --arg=R
/// --arg=IMAGE`), its dpkg database a status file listing `installed`.
fn guard(release: &str, installed: &[&str]) -> std::process::Output {
    let c = case(RAIDZ1_TWO_SHARES);
    let Some(Action::WriteFile { contents, .. }) = step(&c, "hold-kernel")
        .actions
        .iter()
        .find(|a| matches!(a, Action::WriteFile { .. }))
    else {
        panic!("the hold-kernel step writes the guard")
    };
    let dir = tempfile::tempdir().unwrap();
    let mut status = String::from(
        "Package: dpkg\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.21.22\n\n",
    );
    for p in installed {
        status += &format!(
            "Package: {p}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n\n"
        );
    }
    std::fs::write(dir.path().join("status"), status).unwrap();
    let script = dir.path().join("nasforge-zfs");
    std::fs::write(&script, contents).unwrap();
    std::process::Command::new("sh")
        .arg(&script)
        .args([release, &format!("/boot/vmlinuz-{release}")])
        .env("DPKG_ADMINDIR", dir.path())
        .output()
        .unwrap()
}

#[test]
fn the_kernel_guard_lets_through_only_a_kernel_with_its_zfs_modules() {
    let r = "6.1.0-57-amd64";
    let refused = guard(r, &["nasforge-zfs-modules-6.1.0-50-amd64"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && said.starts_with("nasforge: refusing to install the kernel 6.1.0-57-amd64: this NAS's ZFS pools\nneed ZFS modules built for it (nasforge-zfs-modules-6.1.0-57-amd64)"),
        "{refused:?}"
    );
    for installed in [
        &[
            "nasforge-zfs-modules-6.1.0-50-amd64",
            "nasforge-zfs-modules-6.1.0-57-amd64",
        ][..],
        &["zfs-dkms"],
    ] {
        let out = guard(r, installed);
        assert!(out.status.success(), "{installed:?}: {out:?}");
    }
    assert!(
        guard("", &[]).status.success(),
        "no release: nothing to check"
    );
}

#[test]
fn the_pool_is_described_with_its_vdevs_capacity_and_ashift() {
    let c = case(RAIDZ1_TWO_SHARES);
    let text = c.plan.describe();
    assert!(
        text.starts_with("Pool 'tank': ZFS, one raidz1 vdev of 3 disks, mounted at /srv/tank; ashift 12 (4096-byte blocks)\n"),
        "{text}"
    );
    assert!(
        text.contains("  capacity: about 8 TB (before ZFS's metadata"),
        "{text}"
    );
    assert!(text.contains("  survives: 1 failed disk(s)\n"), "{text}");
    assert!(
        text.contains("the disks (3 × ≈180 MB/s, raidz1) ≈360 MB/s"),
        "{text}"
    );
    assert_eq!(c.plan.arrays[0].ashift, Some(12));
}

#[test]
fn vdevs_are_laid_out_in_order_and_a_stripe_lists_disks_bare() {
    let mirrors = RAIDZ1_TWO_SHARES
        .replace("level = \"raidz1\"", "level = \"mirror\"\nvdevs = 2")
        .replace("count = 3", "count = 4");
    let c = case(&mirrors);
    let create = &create_line(&c);
    assert!(
        create.ends_with(&format!(
            " tank mirror {DISK}1 {DISK}2 mirror {DISK}3 {DISK}4"
        )),
        "{create}"
    );
    let text = c.plan.describe();
    assert!(
        text.contains("2 mirror vdevs of 2 disks each, striped"),
        "{text}"
    );
    assert!(
        text.contains(
            "survives: 1 failed disk(s) in each vdev, 2 in all when they fall in different vdevs"
        ),
        "{text}"
    );

    let stripe = RAIDZ1_TWO_SHARES
        .replace("level = \"raidz1\"", "level = \"stripe\"")
        .replace("count = 3", "count = 2");
    let c = case(&stripe);
    let create = &create_line(&c);
    assert!(
        create.ends_with(&format!(" tank {DISK}1 {DISK}2")),
        "{create}"
    );
    assert!(c.plan.arrays[0].warnings[0].contains("no redundancy"));
}

#[test]
fn ashift_follows_the_largest_physical_sector() {
    let board = common::writable_copy("pi5-jmb585");
    let queue = |disk: &str| {
        board
            .host
            .path(&format!("/sys/block/{disk}/queue/physical_block_size"))
    };
    std::fs::write(queue("sdb"), "8192\n").unwrap();
    let c = plan_on(&with_support(board.inventory()), RAIDZ1_TWO_SHARES).unwrap();
    assert_eq!(c.plan.arrays[0].ashift, Some(13));
    assert!(create_line(&c).contains("-o ashift=13 "));
    // 512-byte disks still get 4 KiB: a later 4Kn replacement must fit.
    for disk in ["sda", "sdb", "sdc", "sdd"] {
        std::fs::write(queue(disk), "512\n").unwrap();
    }
    let c = plan_on(&with_support(board.inventory()), RAIDZ1_TWO_SHARES).unwrap();
    assert_eq!(c.plan.arrays[0].ashift, Some(12));
}

#[test]
fn ssds_get_autotrim_and_unequal_disks_are_forced_past_zpools_size_check() {
    let board = common::board("pi5-jmb585");
    let mut inventory = with_support(board.inventory());
    for d in &mut inventory.disks {
        d.rotational = false;
    }
    let c = plan_on(&inventory, RAIDZ1_TWO_SHARES).unwrap();
    let create = &create_line(&c);
    assert!(
        create.contains(" -o autotrim=on ") && !create.contains(" -f "),
        "{create}"
    );
    inventory.disks[1].size.0 += 1 << 30;
    let c = plan_on(&inventory, RAIDZ1_TWO_SHARES).unwrap();
    let create = &create_line(&c);
    assert!(
        create.starts_with("zpool create -f -o ashift=12 "),
        "{create}"
    );
}

#[test]
fn a_board_without_zfs_is_refused_before_any_step() {
    let board = common::board("pi5-jmb585");
    let refused = match plan_on(&board.inventory(), RAIDZ1_TWO_SHARES) {
        Err(r) => r,
        Ok(_) => panic!("planned a pool on a board without ZFS"),
    };
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].array, "tank");
    assert!(
        refused[0]
            .reason
            .starts_with("a ZFS pool cannot be built on this board: kernel ")
            && refused[0].reason.contains("has no zfs module"),
        "{}",
        refused[0].reason
    );
    // Discovery finds the staged module and zpool.
    let board = common::writable_copy("pi5-jmb585");
    with_zfs(&board);
    assert!(plan_on(&board.inventory(), RAIDZ1_TWO_SHARES).is_ok());
}

#[test]
fn a_disk_holding_data_is_refused_as_for_md_and_erased_with_wipe() {
    let board = common::board_with_nodes("pi5-jmb585", "dev-with-data.txt");
    let all_four = RAIDZ1_TWO_SHARES.replace("count = 3", "count = 4");
    let refused = match plan_on(&with_support(board.inventory()), &all_four) {
        Err(r) => r,
        Ok(_) => panic!("planned over sdd's data"),
    };
    assert!(
        refused.iter().any(|r| r.disk.as_deref() == Some("sdd")
            && r.reason
                .contains("holds an ext4 filesystem labelled 'photos'")
            && r.reason.contains("wipe = true")),
        "{refused:?}"
    );
    let wiped = all_four.replace(
        "mount = \"/srv/tank\"",
        "mount = \"/srv/tank\"\nwipe = true",
    );
    let c = plan_on(&with_support(board.inventory()), &wiped).unwrap();
    let ids: Vec<&str> = c.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        &ids[..4],
        ["zfs-module", "hold-kernel", "wipe:sdd", "create-pool:tank"]
    );
}

#[test]
fn an_md_array_beside_a_pool_keeps_mdadm_conf_and_fstab_for_itself() {
    let both = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "data"
level = "raid1"
disks = { transport = "sata", count = 2 }
filesystem = "ext4"
mount = "/srv/data"
[[storage.arrays]]
name = "tank"
level = "mirror"
disks = { transport = "sata", count = 2 }
filesystem = "zfs"
mount = "/srv/tank"
"#;
    let c = case(both);
    let ids: Vec<&str> = c.steps.iter().map(|s| s.id.as_str()).collect();
    for id in [
        "create-array:data",
        "mkfs:data",
        "mdadm-conf",
        "initramfs",
        "fstab",
        "raid-monitoring",
        "create-pool:tank",
        "zfs-monitoring",
        "smartd",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let fstab = lines(step(&c, "fstab"));
    assert!(
        fstab[0].contains("/srv/data") && !fstab[0].contains("/srv/tank"),
        "{fstab:?}"
    );
    assert_eq!(
        lines(step(&c, "mount:tank")),
        ["zfs mount tank"],
        "no systemd mount unit for a pool"
    );
}

#[test]
fn watching_the_pool_installs_the_zedlet_and_the_monthly_scrub() {
    let c = case(RAIDZ1_TWO_SHARES);
    let watch = step(&c, "zfs-monitoring");
    let Action::WriteFile {
        path,
        contents,
        mode,
    } = &watch.actions[0]
    else {
        panic!("{:?}", watch.actions[0]);
    };
    assert_eq!(
        (path.as_str(), *mode),
        ("/etc/zfs/zed.d/all-nasforge.sh", 0o755)
    );
    assert!(contents.contains("exec /usr/local/sbin/nasforge-setup alert --zed"));
    assert_eq!(
        lines(watch)[1..],
        [
            "systemctl enable --no-reload zfs-zed.service  # unless enabled already",
            "systemctl restart zfs-zed.service",
            "systemctl enable --no-reload --now zfs-scrub-monthly@tank.timer  # unless enabled already"
        ]
    );
    assert_eq!(
        lines(step(&c, "zfs-boot")),
        [
            "systemctl enable --no-reload zfs-import-cache.service zfs-mount.service zfs-import.target zfs.target  # unless enabled already"
        ]
    );
    // The zedlet is a shell script sh accepts.
    let out = std::process::Command::new("sh")
        .args(["-n", "-c", contents])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Spin-down and smartd cover the pool's disks as they do an array's.
    let spun = nasforge_engine::storage::spindown::disks(&c.plan);
    assert_eq!(spun.len(), 3);
    assert!(c.steps.iter().any(|s| s.id == "smartd"));
}

/// A board with ZFS, the case planned on it.
fn zfs_board() -> (Board, Case) {
    let board = common::writable_copy("pi5-jmb585");
    with_zfs(&board);
    let c = plan_on(&board.inventory(), RAIDZ1_TWO_SHARES).unwrap();
    (board, c)
}

fn check(c: &Case, board: &Board, id: &str) -> Check {
    step(c, id).check(&board.host)
}

/// `zpool status -P tank` for a raidz1 of the given disks (by-id numbers).
fn status_of(disks: &[u32]) -> String {
    let mut text = zfs_output("status-raidz1-healthy.txt");
    for (i, n) in disks.iter().enumerate() {
        text = text.replace(
            &format!("{DISK}{}-part1", i + 1),
            &format!("{DISK}{n}-PART1"),
        );
    }
    text.replace("-PART1", "-part1")
}

#[test]
fn the_pool_guard_is_pending_on_blank_disks_and_done_once_the_pool_has_them() {
    let (board, c) = zfs_board();
    assert_eq!(check(&c, &board, "create-pool:tank"), Check::Pending);
    zfs_answer(&board, "zpool list -H -o name", "tank\n");
    zfs_answer(&board, "zpool status -P tank", &status_of(&[3, 1, 2]));
    let Check::Done(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert_eq!(
        why,
        "pool 'tank' is imported with the planned disks (sda, sdb, sdc)"
    );
}

#[test]
fn a_pool_of_that_name_with_other_disks_is_refused() {
    let (board, c) = zfs_board();
    zfs_answer(&board, "zpool list -H -o name", "backup\ntank\n");
    zfs_answer(&board, "zpool status -P tank", &status_of(&[1, 2, 4]));
    let Check::Refuse(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert!(
        why.starts_with("pool 'tank' exists, made of sda, sdb, sdd, but this setup planned it from sda, sdb, sdc")
            && why.contains("zpool export tank"),
        "{why}"
    );
}

#[test]
fn the_pool_guard_refuses_a_disk_that_changed_since_planning() {
    let (board, c) = zfs_board();
    let node = std::fs::OpenOptions::new()
        .write(true)
        .open(board.node("sdb"))
        .unwrap();
    let photos = std::fs::read(common::data("blobs/ext4-photos.bin")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&node, &photos, 0).unwrap();
    let Check::Refuse(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert!(
        why.contains("(sdb) now holds an ext4 filesystem labelled 'photos', which was not there when the plan was made")
            && why.contains("nothing was written"),
        "{why}"
    );
    // A ZFS label on a disk while no pool of the name is imported: the
    // pool an interrupted setup made, or another's; either way not ours to
    // write over.
    // An uberblock's magic where ZFS's first label keeps its ring, as
    // the signature probe reads it.
    std::os::unix::fs::FileExt::write_all_at(&node, &vec![0; photos.len()], 0).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&node, &0x00ba_b10c_u64.to_le_bytes(), 128 * 1024)
        .unwrap();
    let Check::Refuse(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert!(
        why.contains("carries a ZFS label, but no pool 'tank' is imported")
            && why.contains("zpool import -d /dev/disk/by-id tank"),
        "{why}"
    );
}

#[test]
fn the_pool_guard_refuses_when_zpool_cannot_list_pools() {
    let (board, c) = zfs_board();
    std::fs::remove_file(board.host.root.join("fake-zfs/zpool_list_-H_-o_name")).unwrap();
    let Check::Refuse(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert!(
        why.starts_with("cannot tell whether a pool 'tank' exists: `zpool list -H -o name` failed"),
        "{why}"
    );
}

#[test]
fn a_dataset_is_done_with_its_quota_set_when_it_differs_and_never_hides_files() {
    let (board, c) = zfs_board();
    assert_eq!(check(&c, &board, "dataset:media"), Check::Pending);
    let list = "zfs list -H -p -o name,used,avail,quota,mountpoint tank/media";
    zfs_answer(
        &board,
        list,
        "tank/media\t1018167296\t106356015104\t107374182400\t/srv/tank/media\n",
    );
    assert_eq!(
        check(&c, &board, "dataset:media"),
        Check::Done("tank/media exists (quota 107374182400)".into())
    );
    // apply changed the quota: the step runs (`zfs set quota=`).
    zfs_answer(
        &board,
        list,
        "tank/media\t1018167296\t106356015104\t53687091200\t/srv/tank/media\n",
    );
    assert_eq!(check(&c, &board, "dataset:media"), Check::Pending);
    // backup has no quota: 0 from `zfs list -p` is none.
    zfs_answer(
        &board,
        "zfs list -H -p -o name,used,avail,quota,mountpoint tank/backup",
        "tank/backup\t98304\t7730941132800\t0\t/srv/tank/backup\n",
    );
    assert!(matches!(
        check(&c, &board, "dataset:backup"),
        Check::Done(_)
    ));

    std::fs::remove_file(
        board
            .host
            .root
            .join("fake-zfs")
            .join(list.replace(' ', "_").replace('/', "%")),
    )
    .unwrap();
    let dir = board.host.path("/srv/tank/media");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(
        check(&c, &board, "dataset:media"),
        Check::Pending,
        "an empty directory"
    );
    std::fs::write(dir.join("holiday.jpg"), "jpeg").unwrap();
    let Check::Refuse(why) = check(&c, &board, "dataset:media") else {
        panic!("{:?}", check(&c, &board, "dataset:media"));
    };
    assert!(
        why.contains("/srv/tank/media is a directory holding files"),
        "{why}"
    );
}

#[test]
fn a_dry_run_runs_nothing() {
    let (board, c) = zfs_board();
    // Discovery asked for the imported pools while planning.
    let planned = zfs_calls(&board);
    assert_eq!(planned, ["zpool status -P"]);
    let text = executor::dry_run(&c.steps);
    assert!(text.contains("zpool create "));
    assert_eq!(zfs_calls(&board), planned, "the dry run ran nothing");
    // The guards do ask zpool, through the board's own command.
    step(&c, "create-pool:tank").check(&board.host);
    assert_eq!(zfs_calls(&board)[1], "zpool list -H -o name");
}

#[test]
fn resumes_a_pool_setup_from_every_step() {
    let c = case(RAIDZ1_TWO_SHARES);
    common::resume_from_every_step("pi5-jmb585", &c.recipe, &c.context, &c.plan, &c.steps);
}

#[test]
fn a_pool_made_before_the_power_cut_resumes_at_the_datasets() {
    let (board, c) = zfs_board();
    common::stage_passwords(&board);
    let path = board.host.path(journal::PATH);
    let create = c
        .steps
        .iter()
        .position(|s| s.id == "create-pool:tank")
        .unwrap();
    let mut journal = Journal::new(
        c.recipe.clone(),
        c.context.clone(),
        c.plan.clone(),
        c.steps.clone(),
    );
    // zpool create ran, the journal was not saved: the pool is there and
    // zfs-import-cache imported it at boot, mounted at /srv/tank.
    journal.done = common::done_before(&c.steps, create);
    journal.save(&path).unwrap();
    zfs_answer(&board, "zpool list -H -o name", "tank\n");
    zfs_answer(&board, "zpool status -P tank", &status_of(&[1, 2, 3]));
    let mountinfo = board.host.path("/proc/self/mountinfo");
    let mut mounts = std::fs::read_to_string(&mountinfo).unwrap();
    mounts += "40 22 0:45 / /srv/tank rw,noatime shared:30 - zfs tank rw,xattr,posixacl\n";
    std::fs::write(&mountinfo, mounts).unwrap();

    let mut runner = RecordingRunner::default();
    let mut done_already = Vec::new();
    executor::execute(&mut journal, &path, &board.host, &mut runner, &mut |e| {
        if let Event::AlreadyDone { index, .. } = e {
            done_already.push(c.steps[index].id.clone());
        }
    })
    .unwrap();
    assert_eq!(done_already, ["create-pool:tank", "mount:tank"]);
    assert!(!runner.lines.iter().any(|l| l.starts_with("zpool create")));
    assert_eq!(
        runner.lines[0],
        "systemctl enable --no-reload zfs-import-cache.service zfs-mount.service zfs-import.target zfs.target  # unless enabled already"
    );
    assert!(runner.lines[1].starts_with("zfs create -p -o quota=107374182400 tank/media"));
}

/// The fixture's only account is admin.
fn admin_only() -> String {
    RAIDZ1_TWO_SHARES.replace("\"admin\", \"anna\"", "\"admin\"")
}

/// A board with ZFS whose setup from `text` finished.
fn set_up(text: &str) -> (Board, Journal) {
    let board = common::writable_copy("pi5-jmb585");
    with_zfs(&board);
    let j = finished::setup(&board.host, &recipe(text));
    (board, j)
}

/// `disk` is gone from the board, as when it is pulled.
fn pull(board: &Board, disk: &str) {
    std::fs::remove_file(board.host.path("/sys/block").join(disk)).unwrap();
    std::fs::remove_file(board.host.dev.join(disk)).unwrap();
}

/// The survey once sdb is pulled and zpool reports the raidz1 degraded.
fn without_sdb(board: &Board, j: &Journal) -> care::Survey {
    pull(board, "sdb");
    zfs_answer(
        board,
        "zpool status -P -p tank",
        &zfs_output("status-raidz1-degraded-scrubbing.txt"),
    );
    care::survey(&board.host, j).unwrap()
}

#[test]
fn a_lost_pool_disk_is_replaced_by_zpool_replace_and_the_resilver_followed() {
    let (board, j) = set_up(&admin_only());
    let survey = without_sdb(&board, &j);
    let tank = &survey.arrays[0];
    let states: Vec<String> = tank.members.iter().map(|m| m.state.to_string()).collect();
    assert_eq!(states, ["working", "MISSING", "working"]);
    let text = survey.to_string();
    assert!(
        text.starts_with(
            "Array 'tank' (raidz1, ZFS pool, zfs at /srv/tank): DEGRADED, 2 of 3 disks working\n  scrubbing 22%\n"
        ) && text.contains("  was sdb  WDC WD40EFRX-68N32N0 (WD-WCC7K0000002), 4 TB: MISSING\n")
            && text.contains("    sdd      "),
        "{text}"
    );
    let inventory = board.inventory();
    let request = care::ReplaceRequest {
        array: Some("tank".into()),
        ..Default::default()
    };
    let plan = care::replace(&board.host, &j, &survey, &inventory, &request).unwrap();
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["zpool-replace:sdd", "follow:tank", "record-members:tank"]
    );
    // The missing disk by the GUID zpool shows for it, the new one by id.
    assert_eq!(
        lines(&plan.steps[0]),
        [
            "udevadm settle",
            "zpool replace tank 9876543210987654321 /dev/disk/by-id/wwn-0x50014ee2b0000004"
        ]
    );
    assert!(
        plan.title.starts_with(
            "Replace the missing member of 'tank' (WDC WD40EFRX-68N32N0 (WD-WCC7K0000002)) with sdd"
        ),
        "{}",
        plan.title
    );
    // A power cut after `zpool replace` took effect: the step is not run
    // again once zpool lists the new disk.
    zfs_answer(
        &board,
        "zpool status -P tank",
        &zfs_output("status-raidz1-degraded-scrubbing.txt"),
    );
    assert_eq!(plan.steps[0].check(&board.host), Check::Pending);
    zfs_answer(
        &board,
        "zpool status -P tank",
        &zfs_output("status-raidz1-resilvering.txt")
            .replace("wwn-0x50014ee2b0000009", "wwn-0x50014ee2b0000004"),
    );
    assert_eq!(
        plan.steps[0].check(&board.host),
        Check::Done("/dev/disk/by-id/wwn-0x50014ee2b0000004 is in the pool tank".into())
    );
    // The record names sdd where sdb was.
    let Action::WriteFile { contents, .. } = &plan.steps[2].actions[0] else {
        panic!("{:?}", plan.steps[2]);
    };
    let recorded: Journal = serde_json::from_str(contents).unwrap();
    let members: Vec<&str> = recorded.plan.arrays[0]
        .members
        .iter()
        .map(|m| m.disk.name.as_str())
        .collect();
    assert_eq!(members, ["sda", "sdd", "sdc"]);
    // While the new disk resilvers, the survey says so and a second
    // replace is refused.
    zfs_answer(
        &board,
        "zpool status -P -p tank",
        &zfs_output("status-raidz1-resilvering.txt")
            .replace("wwn-0x50014ee2b0000009", "wwn-0x50014ee2b0000004"),
    );
    let survey = care::survey(&board.host, &j).unwrap();
    assert!(
        survey.to_string().contains("  resilvering 11%\n")
            && survey
                .to_string()
                .contains("  sdd      WDC WD40EFRX-68N32N0 (WD-WCC7K0000004), 4 TB: rebuilding\n"),
        "{survey}"
    );
    let err = care::replace(&board.host, &j, &survey, &inventory, &request).unwrap_err();
    assert!(
        err.to_string()
            .contains("'tank' is already rebuilding onto sdd"),
        "{err}"
    );
}

#[test]
fn a_pool_not_imported_is_neither_replaced_into_nor_grown() {
    let (board, j) = set_up(&admin_only());
    let survey = care::survey(&board.host, &j).unwrap();
    assert!(
        survey
            .to_string()
            .starts_with("Array 'tank' (raidz1, ZFS pool, zfs at /srv/tank): NOT IMPORTED\n"),
        "{survey}"
    );
    let inventory = board.inventory();
    let request = care::ReplaceRequest {
        array: Some("tank".into()),
        ..Default::default()
    };
    let err = care::replace(&board.host, &j, &survey, &inventory, &request).unwrap_err();
    assert!(
        err.to_string()
            .contains("the ZFS pool 'tank' is not imported")
            && err.to_string().contains("sudo zpool import tank"),
        "{err}"
    );
    let request = care::GrowRequest {
        array: "tank".into(),
        disks: vec!["sdd".into()],
        erase: vec![],
    };
    let err = care::grow(&board.host, &j, &survey, &inventory, &request).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "the ZFS pool 'tank' is not imported, so zpool cannot add to it: import it (`sudo zpool import tank`)"
        ),
        "{err}"
    );
}

/// The record of the set-up raidz1 'tank' as if another machine had made
/// it and setup had adopted it, with `locked` datasets.
fn adopted(locked: Vec<planner::Locked>) -> planner::Imported {
    planner::Imported {
        uuid: "13389264486172569815".into(),
        name: Some("tank".into()),
        devices: vec!["sda".into(), "sdb".into(), "sdc".into()],
        raid_devices: 3,
        partitions: vec![],
        degraded: false,
        left_behind: vec![],
        force: false,
        locked,
    }
}

#[test]
fn a_lost_disk_of_an_adopted_pool_is_replaced_by_its_other_links_and_growth_left_to_zpool() {
    let (board, mut j) = set_up(&admin_only());
    j.plan.arrays[0].imported = Some(adopted(vec![]));
    // Made elsewhere and imported from /dev/disk/by-id, the pool names its
    // disks by their ata- links, where nasforge takes the wwn- ones.
    pull(&board, "sdb");
    let elsewhere = (1..=3).fold(
        zfs_output("status-raidz1-degraded-scrubbing.txt"),
        |text, n| {
            text.replace(
                &format!("wwn-0x50014ee2b000000{n}-part1"),
                &format!("ata-WDC_WD40EFRX-68N32N0_WD-WCC7K000000{n}-part1"),
            )
        },
    );
    zfs_answer(&board, "zpool status -P -p tank", &elsewhere);
    let survey = care::survey(&board.host, &j).unwrap();
    let states: Vec<String> = survey.arrays[0]
        .members
        .iter()
        .map(|m| format!("{} {}", m.was, m.state))
        .collect();
    assert_eq!(states, ["sda working", "sdb MISSING", "sdc working"]);
    let inventory = board.inventory();
    let request = care::ReplaceRequest {
        array: Some("tank".into()),
        ..Default::default()
    };
    let plan = care::replace(&board.host, &j, &survey, &inventory, &request).unwrap();
    assert_eq!(
        lines(&plan.steps[0]),
        [
            "udevadm settle",
            "zpool replace tank 9876543210987654321 /dev/disk/by-id/wwn-0x50014ee2b0000004"
        ]
    );
    let Action::WriteFile { contents, .. } = &plan.steps[2].actions[0] else {
        panic!("{:?}", plan.steps[2]);
    };
    let recorded: Journal = serde_json::from_str(contents).unwrap();
    assert_eq!(
        recorded.plan.arrays[0].imported.as_ref().unwrap().devices,
        ["sda", "sdd", "sdc"]
    );
    let request = care::GrowRequest {
        array: "tank".into(),
        disks: vec!["sdd".into()],
        erase: vec![],
    };
    let err = care::grow(&board.host, &j, &survey, &inventory, &request).unwrap_err();
    assert_eq!(
        err.to_string(),
        "'tank' was adopted as another machine made it (pool id 13389264486172569815); nasforge replaces a lost disk of it, but leaves growing it to zpool: add a vdev of the pool's shape (zpool-add(8)), or widen a mirror (zpool-attach(8)); nothing was changed"
    );
}

/// zpool's status of a healthy pool of `vdevs` two-way mirrors over the
/// pi5-jmb585 board's disks, numbered from 1 in their by-id names.
fn mirrors_status(vdevs: usize) -> String {
    let mut text = "  pool: tank\n state: ONLINE\n  scan: none requested\nconfig:\n\n\tNAME                                              STATE     READ WRITE CKSUM\n\ttank                                              ONLINE       0     0     0\n".to_string();
    for v in 0..vdevs {
        text += &format!(
            "\t  mirror-{v}                                        ONLINE       0     0     0\n"
        );
        for d in [2 * v + 1, 2 * v + 2] {
            text += &format!(
                "\t    /dev/disk/by-id/wwn-0x50014ee2b000000{d}-part1  ONLINE       0     0     0\n"
            );
        }
    }
    text + "\nerrors: No known data errors\n"
}

#[test]
fn a_pool_grows_by_a_whole_vdev_of_its_shape_with_zpool_add() {
    let text = admin_only()
        .replace("level = \"raidz1\"", "level = \"mirror\"")
        .replace("count = 3", "count = 2");
    let (board, j) = set_up(&text);
    zfs_answer(&board, "zpool status -P -p tank", &mirrors_status(1));
    let survey = care::survey(&board.host, &j).unwrap();
    assert_eq!(survey.arrays[0].cannot_grow(), None);
    let inventory = board.inventory();
    let grow = |disks: &[&str], erase: &[&str]| {
        care::grow(
            &board.host,
            &j,
            &survey,
            &inventory,
            &care::GrowRequest {
                array: "tank".into(),
                disks: disks.iter().map(|d| d.to_string()).collect(),
                erase: erase.iter().map(|d| d.to_string()).collect(),
            },
        )
    };
    let err = grow(&["sdc"], &[]).unwrap_err().to_string();
    assert_eq!(
        err,
        "'tank' is 1 mirror vdev(s) of 2 disks, and ZFS grows a pool by whole vdevs: with the same redundancy in each, add 2 disks (or 4), not 1; nothing was changed"
    );
    let plan = grow(&["sdc", "sdd"], &[]).unwrap();
    assert_eq!(
        plan.title,
        "Grow 'tank' (mirror) from 2 to 4 disks with sdc, sdd"
    );
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["zpool-add:tank:sdc,sdd", "record-members:tank"]);
    assert_eq!(
        lines(&plan.steps[0]),
        [
            "udevadm settle",
            "zpool add -o ashift=12 tank mirror /dev/disk/by-id/wwn-0x50014ee2b0000003 /dev/disk/by-id/wwn-0x50014ee2b0000004"
        ]
    );
    assert!(
        plan.text
            .starts_with("ZFS adds 1 more mirror vdev(s) beside the pool's 1 vdev(s)"),
        "{}",
        plan.text
    );
    // After a power cut the add is not run twice: zpool lists the disk.
    zfs_answer(&board, "zpool status -P tank", &mirrors_status(1));
    assert_eq!(plan.steps[0].check(&board.host), Check::Pending);
    zfs_answer(&board, "zpool status -P tank", &mirrors_status(2));
    assert_eq!(
        plan.steps[0].check(&board.host),
        Check::Done("/dev/disk/by-id/wwn-0x50014ee2b0000003 is in the pool tank".into())
    );
    let Action::WriteFile { contents, .. } = &plan.steps[1].actions[0] else {
        panic!("{:?}", plan.steps[1]);
    };
    let recorded: Journal = serde_json::from_str(contents).unwrap();
    let tank = &recorded.plan.arrays[0];
    let members: Vec<&str> = tank.members.iter().map(|m| m.disk.name.as_str()).collect();
    assert_eq!(members, ["sda", "sdb", "sdc", "sdd"]);
    assert_eq!(tank.spec.vdevs, Some(2));
    // The next survey reads the grown pool from the record: four working.
    zfs_answer(&board, "zpool status -P -p tank", &mirrors_status(2));
    let after = care::survey(&board.host, &recorded).unwrap();
    let states: Vec<String> = after.arrays[0]
        .members
        .iter()
        .map(|m| m.state.to_string())
        .collect();
    assert_eq!(states, ["working"; 4]);
    assert_eq!((after.arrays[0].expected, after.arrays[0].working), (4, 4));
}

#[test]
fn a_share_added_later_on_a_pool_gets_its_dataset_from_apply() {
    let set_up_text = admin_only();
    let (board, _) = set_up(&set_up_text);

    let added = format!(
        "{set_up_text}\n[[shares]]\nname = \"photos\"\npath = \"/srv/tank/media/photos\"\nsmb = {{ users = [\"admin\"] }}\nquota = \"50GiB\"\n"
    );
    let plan = nasforge_engine::apply::prepare(
        &board.host,
        &recipe(&added),
        &[],
        &mut RecordingRunner::default(),
    )
    .unwrap();
    assert!(plan.refusals.is_empty(), "{:?}", plan.refusals);
    let photos = plan
        .steps
        .iter()
        .find(|s| s.id == "dataset:photos")
        .expect("a dataset step for the new share");
    assert_eq!(
        photos.actions,
        [Action::ZfsDataset {
            dataset: "tank/media/photos".into(),
            quota: Some(nasforge_engine::size::Size(50 << 30)),
        }]
    );
    assert!(!plan.steps.iter().any(|s| s.id.starts_with("create-pool")));
}

#[test]
fn a_share_added_later_inside_an_adopted_pools_locked_dataset_is_refused_by_apply() {
    let set_up_text = admin_only();
    let (board, mut j) = set_up(&set_up_text);
    j.plan.arrays[0].imported = Some(adopted(vec![planner::Locked {
        dataset: "tank/vault".into(),
        path: "/srv/tank/vault".into(),
    }]));
    finished::save(&board.host, j);
    let share = |name: &str, path: &str| {
        format!(
            "{set_up_text}\n[[shares]]\nname = \"{name}\"\npath = \"{path}\"\nsmb = {{ users = [\"admin\"] }}\n"
        )
    };
    let apply = |text: &str| {
        nasforge_engine::apply::prepare(
            &board.host,
            &recipe(text),
            &[],
            &mut RecordingRunner::default(),
        )
        .unwrap()
    };

    let refused = apply(&share("vault", "/srv/tank/vault/2024"));
    assert_eq!(
        refused.refusals,
        [
            "shares[2].path: share 'vault': /srv/tank/vault/2024 is in the encrypted dataset tank/vault, which stays locked (nasforge loads no keys): the share would serve an empty folder, and files written there would be hidden once its key is loaded; share a folder outside /srv/tank/vault"
        ]
    );
    assert!(refused.steps.is_empty(), "{:?}", refused.steps);

    let beside = apply(&share("photos", "/srv/tank/photos"));
    assert!(beside.refusals.is_empty(), "{:?}", beside.refusals);
    assert!(beside.steps.iter().any(|s| s.id == "dataset:photos"));
}

#[test]
fn the_status_shows_the_pool_its_scrub_errors_and_datasets() {
    let (board, c) = zfs_board();
    let journal = finished::save(
        &board.host,
        Journal::new(
            c.recipe.clone(),
            c.context.clone(),
            c.plan.clone(),
            c.steps.clone(),
        ),
    );
    let mut runner = RecordingRunner::default();
    runner.responses = vec![
        (
            "zpool list -H -p -o name,size,alloc,free,health tank".into(),
            zfs_output("list-tank.txt").replace("ONLINE", "DEGRADED"),
        ),
        (
            "zpool status -P -p tank".into(),
            zfs_output("status-raidz1-degraded-scrubbing.txt"),
        ),
        (
            "zfs list -H -p -r -o name,used,avail,quota,mountpoint tank".into(),
            zfs_output("zfs-list-tank.txt"),
        ),
    ];
    let status = status::collect(&board.host, Some(&journal), &mut runner);
    let text = status.render();
    assert!(
        text.contains(
            "ZFS pools:\n  tank (/srv/tank): DEGRADED, 1 GB of 12 TB allocated, 12 TB free\n    scrub in progress 23% (since Sun Nov 29 03:00:01 2026)\n    raidz1-0: DEGRADED\n    the disk that was sdb (WDC WD40EFRX-68N32N0, serial WD-WCC7K0000002): UNAVAIL, was /dev/disk/by-id/wwn-0x50014ee2b0000002-part1\n    errors: No known data errors\n    share 'media' (tank/media): 1 GB used of a 100GiB quota\n    share 'backup' (tank/backup): 98.3 KB used\n"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["pools"][0]["health"], "DEGRADED");
    assert_eq!(json["pools"][0]["scan"]["scan"], "running");
    assert_eq!(json["pools"][0]["datasets"][0]["quota"], "100GiB");
}

#[test]
fn a_disk_of_an_imported_pool_is_never_taken_even_with_wipe() {
    let board = common::writable_copy("pi5-jmb585");
    with_zfs(&board);
    // An old NAS's pool, imported at boot by zfs-import-scan, on sdc and sdd.
    let old = zfs_output("status-stripe-new.txt")
        .replace("tank", "old")
        .replace("b0000002-part1", "b0000004-part1")
        .replace("b0000001-part1", "b0000003-part1");
    zfs_answer(&board, "zpool status -P", &old);
    let inventory = board.inventory();
    let sdd = inventory.disks.iter().find(|d| d.name == "sdd").unwrap();
    assert_eq!(
        sdd.in_use,
        [nasforge_engine::machine::disks::InUse::ZfsPool {
            device: "sdd".into(),
            pool: "old".into()
        }]
    );
    assert_eq!(
        sdd.in_use[0].to_string(),
        "sdd is a disk of the imported ZFS pool 'old'"
    );
    let wiped = RAIDZ1_TWO_SHARES.replace(
        "mount = \"/srv/tank\"",
        "mount = \"/srv/tank\"\nwipe = true",
    );
    let refused = match plan_on(&inventory, &wiped) {
        Err(r) => r,
        Ok(c) => panic!("planned over an imported pool: {}", c.plan.describe()),
    };
    assert!(
        refused[0].reason.contains("only 2 can be used")
            && refused[0].reason.contains("sdc is in use by the system")
            && refused[0].reason.contains("sdd is in use by the system"),
        "{refused:?}"
    );
    // Without the module loaded no pool can be imported, and zpool is not
    // asked (it would load the module to answer).
    std::fs::remove_dir_all(board.host.path("/sys/module/zfs")).unwrap();
    let before = zfs_calls(&board).len();
    assert!(
        board
            .inventory()
            .disks
            .iter()
            .all(|d| d.in_use.is_empty() || d.name == "mmcblk0")
    );
    assert_eq!(zfs_calls(&board).len(), before);
}

/// 10 of the PC's SAS disks: two raidz2 vdevs of 4 and two hot spares.
const PC_RAIDZ2X2_SPARES: &str = r#"
[storage]
mode = "unattended"
[[storage.arrays]]
name = "tank"
level = "raidz2"
vdevs = 2
spares = 2
disks = { transport = "sas", count = 10 }
filesystem = "zfs"
mount = "/srv/tank"
"#;

#[test]
fn hot_spares_follow_the_vdevs_on_zpools_command_line() {
    let board = common::board("x86-sas-16");
    let c = plan_on(&with_support(board.inventory()), PC_RAIDZ2X2_SPARES).unwrap();
    let wd = |i: u32| format!("/dev/disk/by-id/wwn-0x50014ee2c000000{i}");
    let sg = |i: u32| format!("/dev/disk/by-id/wwn-0x5000c500b000000{i}");
    let create = &create_line(&c);
    assert!(
        create.ends_with(&format!(
            " tank raidz2 {} {} {} {} raidz2 {} {} {} {} spare {} {}",
            wd(1),
            wd(2),
            wd(3),
            wd(4),
            wd(5),
            wd(6),
            wd(7),
            wd(8),
            sg(1),
            sg(2)
        )),
        "{create}"
    );
    assert_eq!(
        step(&c, "create-pool:tank").title,
        "Create ZFS pool 'tank' (raidz2 over 8 disk(s) in 2 vdevs, 2 hot spare(s)) mounted at /srv/tank"
    );
    let text = c.plan.describe();
    assert!(
        text.starts_with("Pool 'tank': ZFS, 2 raidz2 vdevs of 4 disks each, striped; 2 hot spares, mounted at /srv/tank; ashift 12 (4096-byte blocks)\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  hot spares, holding no data (ZFS's event daemon resilvers a faulted disk onto one):\n  - sdj: ST4000VN008-2DR166 (ZDH1A001), 4 TB sas HDD via LSI SAS1068\n  - sdk:"),
        "{text}"
    );
    assert!(
        text.contains("  capacity: about 16 TB (before ZFS's metadata"),
        "{text}"
    );
}

#[test]
fn the_pool_guard_counts_the_spares_among_the_planned_disks() {
    let board = common::writable_copy("x86-sas-16");
    with_zfs(&board);
    let c = plan_on(&board.inventory(), PC_RAIDZ2X2_SPARES).unwrap();
    assert_eq!(check(&c, &board, "create-pool:tank"), Check::Pending);
    zfs_answer(&board, "zpool list -H -o name", "tank\n");
    // After a disk failed, ZED put the first spare in for it: the spare
    // shows in its vdev and among the spares.
    zfs_answer(
        &board,
        "zpool status -P tank",
        &zfs_output("status-raidz2x2-spare-in-use.txt"),
    );
    let Check::Done(why) = check(&c, &board, "create-pool:tank") else {
        panic!("{:?}", check(&c, &board, "create-pool:tank"));
    };
    assert_eq!(
        why,
        "pool 'tank' is imported with the planned disks (sdb, sdc, sdd, sde, sdf, sdg, sdh, sdi, sdj, sdk)"
    );
    // A pool without the second spare is not the one planned.
    let without: String = zfs_output("status-raidz2x2-spare-in-use.txt")
        .lines()
        .filter(|l| !l.contains("AVAIL"))
        .map(|l| format!("{l}\n"))
        .collect();
    zfs_answer(&board, "zpool status -P tank", &without);
    assert!(matches!(
        check(&c, &board, "create-pool:tank"),
        Check::Refuse(_)
    ));
}

#[test]
fn the_status_names_each_hot_spare_and_what_it_does() {
    let board = common::writable_copy("x86-sas-16");
    with_zfs(&board);
    let c = plan_on(&board.inventory(), PC_RAIDZ2X2_SPARES).unwrap();
    let journal = Journal::new(
        c.recipe.clone(),
        c.context.clone(),
        c.plan.clone(),
        c.steps.clone(),
    );
    let mut runner = RecordingRunner::default();
    runner.responses = vec![(
        "zpool status -P -p tank".into(),
        zfs_output("status-raidz2x2-spare-in-use.txt"),
    )];
    let text = status::collect(&board.host, Some(&journal), &mut runner).render();
    assert!(
        text.contains("    sdc (WDC WD40EFRX-68N32N0, serial WD-WCC7K1000002): FAULTED, 12 read, 0 write, 0 checksum errors, too many errors\n    hot spare sdj (ST4000VN008-2DR166, serial ZDH1A001): in use, standing in for a failed disk\n    hot spare sdk (ST4000VN008-2DR166, serial ZDH1A002): available\n"),
        "{text}"
    );
}
