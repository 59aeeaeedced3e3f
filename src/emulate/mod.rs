//! `nasforge emulate`: boot an image on an emulated machine to try a NAS
//! before flashing it: an arm64 board with a PCIe SATA controller
//! ([`board`]) or, for an image with a PC's EFI boot loader, a UEFI PC with
//! room for a case full of disks ([`pc`]).
//!
//! The guest's boot disk is a copy-on-write overlay of the image in the
//! work directory: the built image and its .sha256 stay as published, and
//! what the machine did (its first boot, the arrays' state) persists
//! between runs until the image is rebuilt or `--fresh` is given.

mod board;
mod disks;
pub mod fault;
mod pc;
mod standin;

use crate::image::Image;
use crate::size::human;
use anyhow::{Context, Result, bail};
use disks::{Bus, USB_PORTS, parse_disks, wired_disks, with_serials};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// `nasforge emulate`'s arguments, which are the options [`run`] takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    pub image: PathBuf,
    /// Blank SATA disks to attach, COUNTxSIZE (created sparse in the work
    /// directory and kept between runs)
    #[arg(long = "disks", value_name = "COUNTxSIZE", value_parser = parse_disks)]
    pub blank: Option<(usize, u64)>,
    /// An existing disk image to attach as a SATA disk (repeatable). Its
    /// serial follows the file, not its place in the list: the file name
    /// without its extension when that is at most 20 letters, digits, `_`
    /// or `-` and no other disk has it, else `nf-` and a hash of the
    /// file's full path; the board names it /dev/disk/by-id/ata-QEMU_HARDDISK_SERIAL
    #[arg(long = "disk", value_name = "FILE")]
    pub disks: Vec<PathBuf>,
    /// An existing disk image to attach as a USB disk on a qemu-xhci
    /// controller, bulk-only (usb-storage; qemu's USB id 46f4:0001), as
    /// most USB enclosures are seen without UAS (repeatable; named like
    /// --disk: /dev/disk/by-id/usb-QEMU_QEMU_HARDDISK_SERIAL-0:0)
    #[arg(long = "usb-disk", value_name = "FILE")]
    pub usb_disks: Vec<PathBuf>,
    /// An existing disk image to attach as a UAS USB disk (usb-uas with a
    /// scsi-hd; qemu's USB id 46f4:0003), driven by the kernel's `uas`
    /// driver (repeatable; its serial, named as for --disk, is on the
    /// bridge and the disk, so the board sees the one emulate prints)
    #[arg(long = "uas-disk", value_name = "FILE")]
    pub uas_disks: Vec<PathBuf>,
    /// An existing disk image to attach behind an LSI SAS1068 HBA
    /// (qemu's mptsas1068, the guest's `mptsas` driver), eight disks to
    /// each HBA, on the emulated PC only (repeatable; serial as for --disk,
    /// the board names it /dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_SERIAL)
    #[arg(long = "sas-disk", value_name = "FILE")]
    pub sas_disks: Vec<PathBuf>,
    /// Blank disks to attach behind the PC's SAS HBAs, COUNTxSIZE (as
    /// --disks; the emulated PC only)
    #[arg(long = "sas-disks", value_name = "COUNTxSIZE", value_parser = parse_disks)]
    pub sas_blank: Option<(usize, u64)>,
    /// An existing disk image to attach as an NVMe SSD the PC can boot
    /// from, after the image's own disk (repeatable, booted in the order
    /// given; the emulated PC only; serial as for --disk, the PC names the
    /// first /dev/nvme0n1 and each
    /// /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_SERIAL). For a system mirrored
    /// over two SSDs ([storage.system_mirror]), a blank file no smaller
    /// than the image, e.g. `truncate -s 8G ssd-two.img`
    #[arg(long = "ssd", value_name = "FILE")]
    pub ssds: Vec<PathBuf>,
    /// Leave the image's own disk out, as if that SSD were pulled: the PC
    /// boots from an --ssd (the emulated PC only). Its overlay and the
    /// PC's NVRAM are kept as they are for the run that puts it back
    #[arg(long)]
    pub without_image_disk: bool,
    /// Where blank disks and the kernel go [default: IMAGE.emulate/]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Guest memory in MiB
    #[arg(long = "memory", value_name = "MEMORY", default_value_t = 2048)]
    pub memory_mib: u32,
    /// Guest CPUs
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// No console on this terminal (with --serial-log, for scripts)
    #[arg(long)]
    pub headless: bool,
    /// Also write the serial console to this file
    #[arg(long, value_name = "FILE")]
    pub serial_log: Option<PathBuf>,
    /// Quit when the guest reboots instead of restarting it
    #[arg(long)]
    pub exit_on_reboot: bool,
    /// A control socket for qemu's machine protocol (QMP), through which
    /// `nasforge fault PATH ...` pulls a USB disk out and puts it back, or
    /// cuts the power, while the machine runs
    #[arg(long, value_name = "PATH")]
    pub qmp: Option<PathBuf>,
    /// Start over: forget what earlier runs wrote (the board's disk
    /// overlay and the blank disks)
    #[arg(long)]
    pub fresh: bool,
}

/// Host ports forwarded to the guest.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub ssh: u16,
    pub smb: u16,
    pub nfs: u16,
}

/// `N` local ports no listener has now, distinct from each other: every
/// one is held until all are found. Bound and let go one at a time, the
/// kernel may hand out the same port again (it did, in a CI run: SSH and
/// SMB both on one port, and qemu refused the second forwarding rule).
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let held = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").context("finding a free local port"))
        .collect::<Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&held) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// Whether the board will run an SSH server: enabled in the image already,
/// or to be enabled at first boot once the staged openssh-server is
/// installed (the builder does either only when the recipe asks: a key, or
/// `[system] ssh = true`).
fn ssh_enabled(image: &Image) -> bool {
    let Some(root) = image.ext4() else {
        return false;
    };
    let linked = ["ssh.service", "sshd.service"].iter().any(|unit| {
        root.readlink(&format!(
            "/etc/systemd/system/multi-user.target.wants/{unit}"
        ))
        .is_ok_and(|l| l.is_some())
    });
    let at_first_boot = root
        .read("/var/lib/nasforge/firstboot.env")
        .ok()
        .flatten()
        .is_some_and(|env| {
            String::from_utf8_lossy(&env)
                .lines()
                .any(|l| l.trim() == "NASFORGE_SSH=yes")
        });
    linked || at_first_boot
}

/// What is emulated: the arm64 board, given the kernel it boots, or a PC,
/// whose firmware finds the boot loader on the image.
enum Machine {
    Board(Box<board::Boot>),
    Pc(pc::Firmware),
}

impl Machine {
    fn qemu(&self) -> &'static str {
        qemu(matches!(self, Machine::Pc(_))).0
    }

    fn sata_bus(&self, port: usize) -> String {
        match self {
            Machine::Board(_) => board::sata_bus(port),
            Machine::Pc(_) => pc::sata_bus(port),
        }
    }
}

/// The emulator, and the Debian package it comes in.
fn qemu(pc: bool) -> (&'static str, &'static str) {
    if pc {
        ("qemu-system-x86_64", "qemu-system-x86")
    } else {
        ("qemu-system-aarch64", "qemu-system-arm")
    }
}

pub fn run(opts: &Options, cache: &Path) -> Result<ExitStatus> {
    let image = Image::open(&opts.image)?;
    let is_pc = crate::boot::efi_loader(&image)?.is_some();
    let (qemu, package) = qemu(is_pc);
    let sata = opts.blank.map_or(0, |(n, _)| n) + opts.disks.len();
    let (max, what, fix) = if is_pc {
        (
            pc::MAX_DISKS,
            "the emulated PC's AHCI controllers have",
            "attach the rest with --usb-disk",
        )
    } else {
        (
            board::MAX_DISKS,
            "the emulated board's SATA controller has",
            "attach the rest with --usb-disk, or build for `model = \"x86-64\"`, whose emulated PC takes 24",
        )
    };
    if sata > max {
        bail!("{sata} SATA disks asked for, but {what} {max} ports: {fix}");
    }
    pc::check_sas(
        opts.sas_blank.map_or(0, |(n, _)| n) + opts.sas_disks.len(),
        is_pc,
    )?;
    pc::check_ssds(opts.ssds.len(), opts.without_image_disk, is_pc)?;
    if Command::new(qemu)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        bail!("{qemu} not found: install {package} (scripts/setup does, from bookworm-backports)");
    }
    let workdir = match &opts.workdir {
        Some(w) => w.clone(),
        None => {
            let name = opts
                .image
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("image");
            opts.image.with_file_name(format!("{name}.emulate"))
        }
    };
    std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
    let (machine, overlay) = if is_pc {
        let (overlay, created) = pc_overlay(opts, &workdir)?;
        (Machine::Pc(pc::firmware(&workdir, created)?), overlay)
    } else {
        let mut boot = board::boot(&image, &workdir, cache, opts.fresh)?;
        let (overlay, _) = overlay(&opts.image, &workdir, opts.fresh)?;
        boot.card_args = board::card_args(&image, &overlay, &workdir)?;
        (Machine::Board(Box::new(boot)), overlay)
    };
    let mut all = wired_disks(opts, &workdir)?;
    for (files, bus) in [
        (&opts.usb_disks, Bus::UsbStorage),
        (&opts.uas_disks, Bus::Uas),
    ] {
        for d in files {
            if !d.is_file() {
                bail!("disk image {} does not exist", d.display());
            }
            all.push((d.clone(), bus));
        }
    }
    // The last free port would get qemu's hub (see qemu_command).
    let usb = all
        .iter()
        .filter(|(_, b)| matches!(b, Bus::UsbStorage | Bus::Uas))
        .count();
    if usb >= USB_PORTS {
        bail!(
            "{usb} USB disks asked for, but the emulated xHCI controller takes {} without a hub",
            USB_PORTS - 1
        );
    }
    let files: Vec<PathBuf> = all.iter().map(|(d, _)| d.clone()).collect();
    let disks: Vec<(PathBuf, String, Bus)> = with_serials(&files)?
        .into_iter()
        .zip(&all)
        .map(|((d, serial), (_, bus))| (d, serial, *bus))
        .collect();
    let [ssh, smb, nfs] = free_ports()?;
    let ports = Ports { ssh, smb, nfs };
    let mut cmd = qemu_command(opts, &machine, &overlay, &disks, ports);
    print_banner(opts, &image, &machine, &disks, ports);
    use std::io::Write;
    std::io::stdout().flush()?;
    cmd.status().with_context(|| format!("running {qemu}"))
}

fn qemu_command(
    opts: &Options,
    machine: &Machine,
    overlay: &Path,
    disks: &[(PathBuf, String, Bus)],
    ports: Ports,
) -> Command {
    let mut cmd = Command::new(machine.qemu());
    cmd.args(["-accel", "tcg"])
        .args([
            "-smp",
            &opts.cpus.to_string(),
            "-m",
            &opts.memory_mib.to_string(),
        ])
        .arg("-nographic");
    let sata = disks.iter().filter(|(_, _, b)| *b == Bus::Sata).count();
    match machine {
        Machine::Board(boot) => board::machine_args(&mut cmd, boot, overlay),
        Machine::Pc(firmware) => pc::machine_args(
            &mut cmd,
            firmware,
            (!opts.without_image_disk).then_some(overlay),
            sata,
        ),
    }
    if disks
        .iter()
        .any(|(_, _, bus)| matches!(bus, Bus::UsbStorage | Bus::Uas))
    {
        // qemu's xHCI has four ports unless told otherwise, and when one
        // is left qemu plugs a full-speed hub into it: a fourth disk lands
        // behind that hub, where a UAS disk cannot attach.
        cmd.args([
            "-device",
            &format!("qemu-xhci,id=xhci,p2={USB_PORTS},p3={USB_PORTS}"),
        ]);
    }
    let mut port = 0;
    let mut sas = 0;
    let mut ssd = 0;
    for (i, (d, serial, bus)) in disks.iter().enumerate() {
        let device = match bus {
            Bus::UsbStorage | Bus::Uas => {
                let usb = if *bus == Bus::Uas {
                    fault::Usb::Uas
                } else {
                    fault::Usb::Storage
                };
                cmd.args(usb.args(d, serial));
                continue;
            }
            Bus::Sata => {
                port += 1;
                format!(
                    "ide-hd,drive=d{i},bus={},serial={serial}",
                    machine.sata_bus(port - 1)
                )
            }
            Bus::Sas => {
                if let Some(hba) = pc::sas_hba(sas) {
                    cmd.arg("-device").arg(hba);
                }
                sas += 1;
                pc::sas_device(sas - 1, i, serial)
            }
            Bus::Nvme => {
                ssd += 1;
                pc::ssd_device(ssd, i, serial)
            }
        };
        cmd.arg("-drive")
            .arg(format!("if=none,id=d{i},format=raw,file={}", d.display()));
        cmd.arg("-device").arg(device);
    }
    if let Some(socket) = &opts.qmp {
        cmd.arg("-qmp").arg(format!(
            "unix:{},server=on,wait=off",
            socket.display().to_string().replace(',', ",,")
        ));
    }
    cmd.arg("-netdev").arg(format!(
        "user,id=n0,hostfwd=tcp:127.0.0.1:{}-:22,hostfwd=tcp:127.0.0.1:{}-:445,hostfwd=tcp:127.0.0.1:{}-:2049",
        ports.ssh, ports.smb, ports.nfs
    ));
    // No option ROM on the PC: the firmware boots the disk or nothing,
    // rather than trying the network when the disk has no loader.
    cmd.args([
        "-device",
        match machine {
            Machine::Board(_) => "virtio-net-pci,netdev=n0",
            Machine::Pc(_) => "virtio-net-pci,netdev=n0,romfile=",
        },
    ]);
    if opts.exit_on_reboot {
        cmd.arg("-no-reboot");
    }
    console(&mut cmd, opts);
    cmd
}

/// Where the serial console goes: this terminal, a log file, both or neither.
fn console(cmd: &mut Command, opts: &Options) {
    match (&opts.serial_log, opts.headless) {
        (Some(log), true) => {
            cmd.args(["-serial"])
                .arg(format!("file:{}", log.display()))
                .args(["-monitor", "none"]);
            cmd.stdin(Stdio::null());
        }
        (Some(log), false) => {
            cmd.args(["-chardev"]).arg(format!(
                "stdio,id=console,mux=on,signal=off,logfile={}",
                log.display()
            ));
            cmd.args(["-serial", "chardev:console", "-monitor", "chardev:console"]);
        }
        (None, true) => {
            cmd.args(["-serial", "null", "-monitor", "none"])
                .stdin(Stdio::null());
        }
        (None, false) => {}
    }
}

/// What runs, and how to reach the guest's services through the forwarded ports.
fn print_banner(
    opts: &Options,
    image: &Image,
    machine: &Machine,
    disks: &[(PathBuf, String, Bus)],
    ports: Ports,
) {
    let how = match machine {
        Machine::Board(boot) => match &boot.standin {
            Some((_, userland)) => format!(
                "with a stand-in kernel: {}'s own kernels run only on its boards, so Debian {}'s {} boots its userland here, and the board differs:",
                userland.name(),
                userland.debian_release().unwrap_or("?"),
                boot.version
            ),
            None => format!("on the arm64 board with kernel {}", boot.version),
        },
        Machine::Pc(_) => {
            "on a UEFI PC (q35, OVMF): the image's boot loader picks the kernel".into()
        }
    };
    println!(
        "emulating {} ({}) {how}",
        opts.image.display(),
        human(image.layout.disk_size),
    );
    if let Machine::Board(boot) = machine
        && let Some((standin, _)) = &boot.standin
    {
        for d in standin::DIFFERENCES {
            println!("  - {d}");
        }
        println!(
            "  - its modules are on a disk of their own ({}, over {}), mounted at /lib/modules/{}; the image is not changed",
            standin.disk.display(),
            standin.modules.display(),
            boot.version
        );
    }
    if opts.without_image_disk {
        println!("  the image's own disk is left out, as if pulled; the PC boots from an SSD");
    }
    for bus in [Bus::Sata, Bus::Sas, Bus::Nvme, Bus::UsbStorage, Bus::Uas] {
        for (i, (d, serial, _)) in disks.iter().filter(|(_, _, b)| *b == bus).enumerate() {
            let size = std::fs::metadata(d).map(|m| m.len()).unwrap_or(0);
            println!(
                "  {}{i}: {} ({}, serial {serial})",
                bus.label(),
                d.display(),
                human(size)
            );
        }
    }
    if ssh_enabled(image) {
        println!("  ssh:  ssh -p {} <user>@127.0.0.1", ports.ssh);
    } else {
        println!(
            "  ssh:  not enabled in this image (give a user `ssh_authorized_keys`, or set `[system] ssh = true`); log in on the console"
        );
    }
    println!(
        "  smb:  smbclient //127.0.0.1/<share> -p {} -U <user>",
        ports.smb
    );
    println!(
        "  nfs:  mount -t nfs4 -o port={} 127.0.0.1:/<path> /mnt   or   nfs-ls 'nfs://127.0.0.1/<path>?version=4&nfsport={}'",
        ports.nfs, ports.nfs
    );
    if !opts.headless {
        println!("  the serial console follows; Ctrl-A X quits qemu");
    }
}

/// The guest's disk's file name in the work directory.
const OVERLAY: &str = "root.qcow2";

/// The guest's disk: a qcow2 overlay over the image, kept while the image
/// is unchanged; true when it was made afresh.
fn overlay(image: &Path, workdir: &Path, fresh: bool) -> Result<(PathBuf, bool)> {
    let path = workdir.join(OVERLAY);
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let stale = match (mtime(&path), mtime(image)) {
        (Some(o), Some(i)) => i > o,
        _ => true,
    };
    if !fresh && !stale {
        return Ok((path, false));
    }
    if !fresh && path.exists() {
        println!("the image changed since the last run: starting from it afresh");
    }
    let _ = std::fs::remove_file(&path);
    qcow2_over(image, &path)?;
    Ok((path, true))
}

/// The PC's disk, as [`overlay`]. A pulled disk's overlay is neither
/// checked against the image nor made afresh (unless --fresh says to
/// forget it): the run that puts it back finds it, and the NVRAM that
/// names it, as they were.
fn pc_overlay(opts: &Options, workdir: &Path) -> Result<(PathBuf, bool)> {
    if opts.without_image_disk && !opts.fresh {
        return Ok((workdir.join(OVERLAY), false));
    }
    overlay(&opts.image, workdir, opts.fresh)
}

/// A copy-on-write qcow2 at `path` over the raw file `base`.
fn qcow2_over(base: &Path, path: &Path) -> Result<()> {
    let base = std::fs::canonicalize(base)?;
    let out = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(&base)
        .arg(path)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run qemu-img (package qemu-utils): {e}"))?;
    if !out.status.success() {
        bail!(
            "qemu-img could not create {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forwarded_ports_are_free_and_never_the_same_twice() {
        let ports: [u16; 64] = free_ports().unwrap();
        let mut distinct = ports.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for port in ports {
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
        }
    }

    fn options() -> Options {
        Options {
            image: "nas.img".into(),
            blank: None,
            disks: vec![],
            usb_disks: vec![],
            uas_disks: vec![],
            sas_disks: vec![],
            sas_blank: None,
            ssds: vec![],
            without_image_disk: false,
            workdir: None,
            memory_mib: 2048,
            cpus: 2,
            headless: true,
            serial_log: None,
            exit_on_reboot: true,
            qmp: None,
            fresh: false,
        }
    }

    fn command_line(cmd: &Command) -> String {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    const PORTS: Ports = Ports {
        ssh: 1,
        smb: 2,
        nfs: 3,
    };

    #[test]
    fn ssds_boot_after_the_image_disk_which_can_be_pulled() {
        let firmware = || {
            Machine::Pc(pc::Firmware {
                code: "code.fd".into(),
                vars: "vars.fd".into(),
            })
        };
        let disks = vec![
            (PathBuf::from("sas-a.img"), "sas-a".to_string(), Bus::Sas),
            (
                PathBuf::from("ssd-two.img"),
                "ssd-two".to_string(),
                Bus::Nvme,
            ),
            (PathBuf::from("ssd-3.img"), "ssd-3".to_string(), Bus::Nvme),
        ];
        let mut opts = options();
        let both = command_line(&qemu_command(
            &opts,
            &firmware(),
            Path::new("root.qcow2"),
            &disks,
            PORTS,
        ));
        assert!(
            both.contains("-drive if=none,id=root,format=qcow2,file=root.qcow2 -device virtio-blk-pci,drive=root,serial=system,bootindex=0"),
            "{both}"
        );
        assert!(
            both.contains("-drive if=none,id=d1,format=raw,file=ssd-two.img -device nvme,drive=d1,serial=ssd-two,bootindex=1"),
            "{both}"
        );
        assert!(
            both.contains("-device nvme,drive=d2,serial=ssd-3,bootindex=2"),
            "{both}"
        );
        assert_eq!(both.matches("bootindex").count(), 3, "{both}");
        opts.without_image_disk = true;
        let pulled = command_line(&qemu_command(
            &opts,
            &firmware(),
            Path::new("root.qcow2"),
            &disks,
            PORTS,
        ));
        assert!(
            !pulled.contains("root.qcow2") && !pulled.contains("virtio-blk"),
            "{pulled}"
        );
        assert!(
            pulled.contains("-device nvme,drive=d1,serial=ssd-two,bootindex=1"),
            "{pulled}"
        );
    }

    #[test]
    fn a_pulled_disk_is_kept_as_it_was_even_when_the_image_changed() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join(OVERLAY);
        std::fs::write(&kept, b"the first boot's writes").unwrap();
        let image = dir.path().join("nas.img");
        std::fs::write(&image, b"rebuilt").unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&kept)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let opts = Options {
            image,
            without_image_disk: true,
            ..options()
        };
        assert_eq!(
            pc_overlay(&opts, dir.path()).unwrap(),
            (kept.clone(), false)
        );
        assert_eq!(std::fs::read(&kept).unwrap(), b"the first boot's writes");
    }

    #[test]
    fn usb_and_uas_disks_hang_off_one_xhci_and_leave_the_sata_ports_alone() {
        let opts = options();
        let boot = board::Boot {
            kernel: "vmlinuz".into(),
            initrd: None,
            version: "6.1.0-40-arm64".into(),
            root_arg: "root=LABEL=RASPIROOT".into(),
            card_args: vec!["rw".into(), "usb-storage.quirks=46f4:0001:u".into()],
            standin: None,
        };
        let disks = vec![
            (PathBuf::from("a.img"), "a".to_string(), Bus::Sata),
            (PathBuf::from("u.img"), "u".to_string(), Bus::UsbStorage),
            (PathBuf::from("b.img"), "b".to_string(), Bus::Sata),
            (PathBuf::from("s.img"), "s".to_string(), Bus::Uas),
        ];
        let cmd = qemu_command(
            &opts,
            &Machine::Board(Box::new(boot)),
            Path::new("root.qcow2"),
            &disks,
            PORTS,
        );
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = args.join(" ");
        assert!(
            line.contains("-device ide-hd,drive=d0,bus=ahci.0,serial=a"),
            "{line}"
        );
        assert!(
            line.contains("-device ide-hd,drive=d2,bus=ahci.1,serial=b"),
            "{line}"
        );
        assert_eq!(line.matches("qemu-xhci").count(), 1, "{line}");
        assert!(
            line.contains("-device qemu-xhci,id=xhci,p2=8,p3=8"),
            "{line}"
        );
        // Block nodes and device ids `nasforge fault` finds them by.
        assert!(
            line.contains("-blockdev driver=file,node-name=file-u,filename=u.img -blockdev driver=raw,node-name=usb-u,file=file-u -device usb-storage,bus=xhci.0,drive=usb-u,id=disk-u,serial=u"),
            "{line}"
        );
        assert!(line.contains("-blockdev driver=file,node-name=file-s,filename=s.img -blockdev driver=raw,node-name=uas-s,file=file-s -device usb-uas,bus=xhci.0,id=disk-s,serial=s -device scsi-hd,bus=disk-s.0,drive=uas-s,lun=0,scsi-id=0,serial=s"), "{line}");
        assert!(!line.contains("-qmp"), "{line}");
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert_eq!(
            append,
            "root=LABEL=RASPIROOT rw usb-storage.quirks=46f4:0001:u console=ttyAMA0 net.ifnames=0 nokaslr"
        );
    }
}
