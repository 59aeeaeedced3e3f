//! `nasforge emulate`: boot an image on an emulated arm64 board with a PCIe
//! SATA controller, to try a NAS before flashing it. qemu's `virt` machine
//! with an `ich9-ahci` controller on its PCIe bus: the guest's `ahci` driver
//! binds to it exactly as to a JMB585 or ASM1166, and its disks are sdX.
//!
//! The Raspberry Pi firmware cannot be emulated, so the kernel and initramfs
//! are taken from the image's root filesystem and handed to qemu directly.
//! The guest's virtio disk is a copy-on-write overlay of the image in the
//! work directory: the built image and its .sha256 stay as published, and
//! what the board did (its first boot, the arrays' state) persists between
//! runs until the image is rebuilt or `--fresh` is given.

use crate::image::Image;
use crate::size::human;
use anyhow::{Context, Result, bail};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// SATA ports on qemu's ich9-ahci.
pub const MAX_DISKS: usize = 6;

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
    /// driver (repeatable)
    #[arg(long = "uas-disk", value_name = "FILE")]
    pub uas_disks: Vec<PathBuf>,
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

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")
        .context("finding a free local port")?
        .local_addr()?
        .port())
}

/// The kernel and initramfs the guest boots, copied out of the image.
struct Boot {
    kernel: PathBuf,
    initrd: Option<PathBuf>,
    version: String,
    root_arg: String,
    /// The rest of the board's cmdline.txt as it is on the board's disk
    /// now (`console=` aside: the emulated board has its own serial port).
    card_args: Vec<String>,
}

/// How a disk hangs off the emulated board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bus {
    Sata,
    UsbStorage,
    Uas,
}

impl Bus {
    fn label(self) -> &'static str {
        match self {
            Bus::Sata => "sata",
            Bus::UsbStorage => "usb",
            Bus::Uas => "uas",
        }
    }
}

fn kernel_format(path: &Path) -> Result<&'static str> {
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut std::fs::File::open(path)?, &mut head)?;
    let head = &head[..n];
    if head.len() >= 0x3c && &head[0x38..0x3c] == b"ARM\x64" {
        return Ok("arm64 Image");
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok("gzip-compressed arm64 Image");
    }
    if head.starts_with(b"MZ") && head.len() >= 8 && &head[4..8] == b"zimg" {
        return Ok("EFI zboot arm64 Image");
    }
    bail!(
        "{} is not an arm64 kernel image qemu can load (no arm64 Image header)",
        path.display()
    )
}

fn extract_boot(image: &Image, workdir: &Path) -> Result<Boot> {
    let root = image
        .ext4()
        .context("the image has no ext4 root filesystem to take a kernel from")?;
    let files = crate::kernel::installed(image)?;
    let mut versions: Vec<String> = files.iter().map(|k| k.version.clone()).collect();
    versions.sort_by_key(|a| natural(a));
    let linked = ["/vmlinuz", "/boot/vmlinuz"]
        .iter()
        .filter_map(|l| root.readlink(l).ok().flatten())
        .find_map(|t| {
            t.rsplit('/')
                .next()
                .and_then(|n| n.strip_prefix("vmlinuz-"))
                .map(String::from)
        });
    let version = linked
        .or_else(|| versions.last().cloned())
        .context("the image has no kernel in /lib/modules, so there is nothing to boot")?;
    let info = files
        .iter()
        .find(|k| k.version == version)
        .context("the linked kernel has no /lib/modules directory")?;
    let r = info.report(&[]);
    let has = |m: &str| {
        r.modules
            .get(m)
            .is_some_and(|p| *p != crate::kernel::Presence::Absent)
    };
    // The report covers the NAS modules; virtio is looked up directly.
    let virtio = [&info.modules_builtin, &info.modules_dep].iter().any(|f| {
        f.as_deref()
            .is_some_and(|t| t.contains("virtio_blk.ko") || t.contains("virtio-blk.ko"))
    });
    if !virtio {
        bail!(
            "kernel {version} has no virtio block driver, so qemu's virt machine cannot boot it (Raspberry Pi OS kernels are built for the Pi's own hardware). Build the image from Debian's packages (`[base] debian = {{ suite = \"bookworm\", arch = \"arm64\" }}`) to try it here"
        );
    }
    if !has("ahci") {
        eprintln!(
            "warning: kernel {version} has no ahci driver: the emulated SATA disks will not appear"
        );
    }
    let kernel = workdir.join(format!("vmlinuz-{version}"));
    if !root.dump(&format!("/boot/vmlinuz-{version}"), &kernel)? {
        bail!("the image has /lib/modules/{version} but no /boot/vmlinuz-{version} to boot");
    }
    kernel_format(&kernel)?;
    let initrd = workdir.join(format!("initrd.img-{version}"));
    let initrd = root
        .dump(&format!("/boot/initrd.img-{version}"), &initrd)?
        .then_some(initrd);
    Ok(Boot {
        kernel,
        initrd,
        version,
        root_arg: root_argument(image)?,
        card_args: Vec::new(),
    })
}

/// The words of cmdline.txt on the board's disk (the overlay), which the
/// Raspberry Pi firmware reads on every boot: a kernel argument setup
/// wrote there (a USB quirk) is in effect after the board's reboot here
/// too. Only the boot partition's bytes are read out of the qcow2.
fn card_args(image: &Image, overlay: &Path, workdir: &Path) -> Result<Vec<String>> {
    let Some(part) = image.boot() else {
        return Ok(Vec::new());
    };
    // qemu-img dd counts in blocks of bs: the largest power of two (up to
    // 1 MiB) that divides both the start and the size.
    let mut bs: u64 = 1 << 20;
    while bs > 512 && (part.start % bs != 0 || part.size % bs != 0) {
        bs /= 2;
    }
    let copy = workdir.join("boot-partition.img");
    let out = Command::new("qemu-img")
        .args(["dd", "-f", "qcow2", "-O", "raw"])
        .arg(format!("bs={bs}"))
        .arg(format!("skip={}", part.start / bs))
        .arg(format!("count={}", part.size / bs))
        .arg(format!("if={}", overlay.display()))
        .arg(format!("of={}", copy.display()))
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run qemu-img (package qemu-utils): {e}"))?;
    if !out.status.success() {
        bail!(
            "qemu-img could not read the boot partition of {}: {}",
            overlay.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let size = std::fs::metadata(&copy)?.len();
    let fat = crate::image::fat::Fat::open(std::fs::File::open(&copy)?, 0, size)?;
    let text = fat.read("cmdline.txt")?.unwrap_or_default();
    drop(fat);
    std::fs::remove_file(&copy)?;
    Ok(kernel_args(&String::from_utf8_lossy(&text)))
}

/// cmdline.txt's first line without `root=` (taken apart) and `console=`.
fn kernel_args(cmdline: &str) -> Vec<String> {
    cmdline
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter(|w| !w.starts_with("console=") && !w.starts_with("root="))
        .map(String::from)
        .collect()
}

/// `1.10` after `1.9`: version strings compared by their numbers.
fn natural(v: &str) -> Vec<(u64, String)> {
    v.split(|c: char| !c.is_ascii_alphanumeric())
        .map(|p| (p.parse().unwrap_or(0), p.to_string()))
        .collect()
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

/// The `root=` the board's own cmdline.txt uses, else the root partition's label.
fn root_argument(image: &Image) -> Result<String> {
    if let Some(fat) = image.fat(false)?
        && let Some(cmdline) = fat.read("cmdline.txt")?
    {
        let text = String::from_utf8_lossy(&cmdline);
        if let Some(r) = text.split_whitespace().find(|w| w.starts_with("root=")) {
            return Ok(r.to_string());
        }
    }
    let root = image.root().context("no root partition")?;
    match &root.label {
        Some(l) => Ok(format!("root=LABEL={l}")),
        None => Ok(format!(
            "root=PARTUUID={}-{:02}",
            image.layout.disk_id, root.number
        )),
    }
}

pub fn run(opts: &Options) -> Result<ExitStatus> {
    let qemu = "qemu-system-aarch64";
    if Command::new(qemu)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        bail!(
            "{qemu} not found: install qemu-system-arm (scripts/setup does, from bookworm-backports)"
        );
    }
    let image = Image::open(&opts.image)?;
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
    let mut boot = extract_boot(&image, &workdir)?;
    let overlay = overlay(&opts.image, &workdir, opts.fresh)?;
    boot.card_args = card_args(&image, &overlay, &workdir)?;
    let mut all: Vec<(PathBuf, Bus)> = sata_disks(opts, &workdir)?
        .into_iter()
        .map(|d| (d, Bus::Sata))
        .collect();
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
    let usb = all.iter().filter(|(_, b)| *b != Bus::Sata).count();
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
    let ports = Ports {
        ssh: free_port()?,
        smb: free_port()?,
        nfs: free_port()?,
    };
    let mut cmd = qemu_command(qemu, opts, &boot, &overlay, &disks, ports);
    print_banner(opts, &image, &boot, &disks, ports);
    use std::io::Write;
    std::io::stdout().flush()?;
    cmd.status().with_context(|| format!("running {qemu}"))
}

/// The blank disks (created in `workdir` unless kept from an earlier run),
/// then the existing images named.
fn sata_disks(opts: &Options, workdir: &Path) -> Result<Vec<PathBuf>> {
    let mut disks = Vec::new();
    if let Some((count, size)) = opts.blank {
        for i in 0..count {
            let p = workdir.join(format!("sata{i}.img"));
            if opts.fresh || !p.exists() {
                std::fs::File::create(&p)?.set_len(size)?;
            }
            disks.push(p);
        }
    }
    for d in &opts.disks {
        if !d.is_file() {
            bail!("disk image {} does not exist", d.display());
        }
        disks.push(d.clone());
    }
    if disks.len() > MAX_DISKS {
        bail!(
            "{} disks asked for, but the emulated SATA controller has {MAX_DISKS} ports",
            disks.len()
        );
    }
    Ok(disks)
}

/// Ports on the emulated xHCI controller, for --usb-disk and --uas-disk.
const USB_PORTS: usize = 8;

/// ATA IDENTIFY has 20 bytes for the serial; qemu cuts a longer one.
const SERIAL_MAX: usize = 20;

/// Each disk with its serial. A serial that followed the disk's place on the
/// controller would move to another disk when one is left out, and the board
/// names a missing member by its serial: so it is taken from the file
/// instead (see `--disk`).
fn with_serials(disks: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let stems: Vec<Option<&str>> = disks
        .iter()
        .map(|d| d.file_stem().and_then(|s| s.to_str()))
        .collect();
    disks
        .iter()
        .zip(&stems)
        .map(|(disk, stem)| {
            let unique = stems.iter().filter(|s| *s == stem).count() == 1;
            let serial = match stem {
                Some(s) if unique && serial_safe(s) => s.to_string(),
                _ => path_serial(disk)?,
            };
            Ok((disk.clone(), serial))
        })
        .collect()
}

/// What udev keeps as it is in /dev/disk/by-id and fits IDENTIFY.
fn serial_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= SERIAL_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `nf-` and 12 hex digits of the SHA-256 of the canonical path: the same
/// file gets the same serial however it is named on the command line.
fn path_serial(disk: &Path) -> Result<String> {
    use sha2::Digest;
    let full = std::fs::canonicalize(disk)
        .with_context(|| format!("finding the full path of {}", disk.display()))?;
    let digest = sha2::Sha256::digest(full.as_os_str().as_encoded_bytes());
    Ok(format!("nf-{}", &hex::encode(digest)[..12]))
}

fn qemu_command(
    qemu: &str,
    opts: &Options,
    boot: &Boot,
    overlay: &Path,
    disks: &[(PathBuf, String, Bus)],
    ports: Ports,
) -> Command {
    let mut cmd = Command::new(qemu);
    cmd.args(["-M", "virt", "-cpu", "cortex-a72", "-accel", "tcg"])
        .args([
            "-smp",
            &opts.cpus.to_string(),
            "-m",
            &opts.memory_mib.to_string(),
        ])
        .args(["-nographic", "-kernel"])
        .arg(&boot.kernel);
    if let Some(initrd) = &boot.initrd {
        cmd.arg("-initrd").arg(initrd);
    }
    let mut append = vec![boot.root_arg.clone()];
    append.extend(boot.card_args.iter().cloned());
    for w in ["rw", "console=ttyAMA0", "net.ifnames=0"] {
        if !append.iter().any(|a| a == w) {
            append.push(w.to_string());
        }
    }
    cmd.arg("-append").arg(append.join(" "));
    cmd.arg("-drive")
        .arg(format!(
            "if=none,id=root,format=qcow2,file={}",
            overlay.display()
        ))
        .args(["-device", "virtio-blk-pci,drive=root"]);
    cmd.args(["-device", "ich9-ahci,id=ahci"]);
    if disks.iter().any(|(_, _, bus)| *bus != Bus::Sata) {
        // qemu's xHCI has four ports unless told otherwise, and when one
        // is left qemu plugs a full-speed hub into it: a fourth disk lands
        // behind that hub, where a UAS disk cannot attach.
        cmd.args([
            "-device",
            &format!("qemu-xhci,id=xhci,p2={USB_PORTS},p3={USB_PORTS}"),
        ]);
    }
    let mut port = 0;
    for (i, (d, serial, bus)) in disks.iter().enumerate() {
        cmd.arg("-drive")
            .arg(format!("if=none,id=d{i},format=raw,file={}", d.display()));
        let device = match bus {
            Bus::Sata => {
                port += 1;
                format!("ide-hd,drive=d{i},bus=ahci.{},serial={serial}", port - 1)
            }
            Bus::UsbStorage => format!("usb-storage,bus=xhci.0,drive=d{i},serial={serial}"),
            Bus::Uas => {
                cmd.arg("-device")
                    .arg(format!("usb-uas,bus=xhci.0,id=uas{i}"));
                format!("scsi-hd,bus=uas{i}.0,scsi-id=0,lun=0,drive=d{i},serial={serial}")
            }
        };
        cmd.arg("-device").arg(device);
    }
    cmd.arg("-netdev").arg(format!(
        "user,id=n0,hostfwd=tcp:127.0.0.1:{}-:22,hostfwd=tcp:127.0.0.1:{}-:445,hostfwd=tcp:127.0.0.1:{}-:2049",
        ports.ssh, ports.smb, ports.nfs
    ));
    cmd.args(["-device", "virtio-net-pci,netdev=n0"]);
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
    boot: &Boot,
    disks: &[(PathBuf, String, Bus)],
    ports: Ports,
) {
    println!(
        "emulating {} ({}) with kernel {}",
        opts.image.display(),
        human(image.layout.disk_size),
        boot.version
    );
    for bus in [Bus::Sata, Bus::UsbStorage, Bus::Uas] {
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

/// The guest's disk: a qcow2 overlay over the image, kept while the image
/// is unchanged.
fn overlay(image: &Path, workdir: &Path, fresh: bool) -> Result<PathBuf> {
    let path = workdir.join("root.qcow2");
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let stale = match (mtime(&path), mtime(image)) {
        (Some(o), Some(i)) => i > o,
        _ => true,
    };
    if !fresh && !stale {
        return Ok(path);
    }
    if !fresh && path.exists() {
        println!("the image changed since the last run: starting from it afresh");
    }
    let _ = std::fs::remove_file(&path);
    let base = std::fs::canonicalize(image)?;
    let out = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(&base)
        .arg(&path)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run qemu-img (package qemu-utils): {e}"))?;
    if !out.status.success() {
        bail!(
            "qemu-img could not create {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(path)
}

/// `4x2G` → (4, 2 GiB).
pub fn parse_disks(spec: &str) -> Result<(usize, u64), String> {
    let (n, size) = spec
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{spec}`: write COUNTxSIZE, e.g. 4x2G"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("`{n}` is not a number of disks"))?;
    if n == 0 || n > MAX_DISKS {
        return Err(format!(
            "{n} disks: the emulated SATA controller has 1 to {MAX_DISKS} ports"
        ));
    }
    let size = size.trim();
    let size = if size.ends_with(['G', 'M', 'T', 'K']) {
        format!("{size}iB")
    } else {
        size.to_string()
    };
    let bytes: crate::size::Size = size
        .parse()
        .map_err(|e: nasforge_engine::size::SizeError| e.to_string())?;
    Ok((n, bytes.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_specs() {
        assert_eq!(parse_disks("4x2G").unwrap(), (4, 2 << 30));
        assert_eq!(parse_disks("3x512MiB").unwrap(), (3, 512 << 20));
        assert!(parse_disks("7x1G").unwrap_err().contains("1 to 6 ports"));
        assert!(parse_disks("four").unwrap_err().contains("COUNTxSIZE"));
    }

    #[test]
    fn a_disk_keeps_its_serial_when_another_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let disk = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, b"").unwrap();
            p
        };
        let (m0, m1, m2) = (
            disk("member0.img"),
            disk("member1.img"),
            disk("member2.img"),
        );
        let serials = |ds: &[&PathBuf]| -> Vec<String> {
            let ds: Vec<PathBuf> = ds.iter().map(|d| (*d).clone()).collect();
            with_serials(&ds)
                .unwrap()
                .into_iter()
                .map(|(_, s)| s)
                .collect()
        };
        assert_eq!(serials(&[&m0, &m1, &m2]), ["member0", "member1", "member2"]);
        assert_eq!(serials(&[&m0, &m2]), ["member0", "member2"]);
    }

    #[test]
    fn a_name_that_cannot_be_a_serial_gets_a_hash_of_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |rel: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
            p
        };
        let long = mk("a-disk-name-over-twenty-chars.img");
        let spaced = mk("my disk.img");
        let (a, b) = (mk("a/disk.img"), mk("b/disk.img"));
        let got = with_serials(&[long.clone(), spaced, a, b.clone()]).unwrap();
        for (_, s) in &got {
            assert!(
                s.starts_with("nf-") && s.len() == 15 && serial_safe(s),
                "{s}"
            );
        }
        let all: std::collections::BTreeSet<&String> = got.iter().map(|(_, s)| s).collect();
        assert_eq!(all.len(), 4, "{got:?}");
        // The same file through another spelling of its path: the same serial.
        let roundabout = dir.path().join("b/../a/disk.img");
        let again = with_serials(&[roundabout, b]).unwrap();
        assert_eq!(again[0].1, got[2].1);
        assert_eq!(with_serials(&[long]).unwrap()[0].1, got[0].1);
    }

    #[test]
    fn serials_udev_keeps() {
        assert!(serial_safe("blank_1-x"));
        assert!(serial_safe("abcdefghij0123456789"));
        assert!(!serial_safe("abcdefghij0123456789x"));
        assert!(!serial_safe("disk.v2"));
        assert!(!serial_safe(""));
    }

    #[test]
    fn versions_sort_by_number() {
        let mut v = ["6.1.0-9-arm64".to_string(), "6.1.0-10-arm64".to_string()];
        v.sort_by_key(|a| natural(a));
        assert_eq!(v.last().unwrap(), "6.1.0-10-arm64");
    }

    #[test]
    fn the_card_gives_its_kernel_arguments_but_not_its_console_or_root() {
        assert_eq!(
            kernel_args(
                "console=tty0 console=ttyS1,115200 root=LABEL=RASPIROOT rw cma=64M usb-storage.quirks=46f4:0001:u rootwait\nignored line\n"
            ),
            [
                "rw",
                "cma=64M",
                "usb-storage.quirks=46f4:0001:u",
                "rootwait"
            ]
        );
    }

    /// A card image: an MBR with one FAT32 partition at 1 MiB (made by
    /// sfdisk, mkfs.vfat and mcopy) holding `cmdline`.
    fn card(dir: &Path, name: &str, cmdline: &str) -> PathBuf {
        use std::os::unix::fs::FileExt;
        let run = |cmd: &mut Command| {
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let fat = dir.join(format!("{name}.fat"));
        run(Command::new("mkfs.vfat")
            .args(["-C", "-F", "32", "-n", "bootfs"])
            .arg(&fat)
            .arg("34816"));
        let text = dir.join("cmdline.txt");
        std::fs::write(&text, cmdline).unwrap();
        run(Command::new("mcopy")
            .arg("-i")
            .arg(&fat)
            .arg(&text)
            .arg("::cmdline.txt"));
        let image = dir.join(name);
        std::fs::File::create(&image)
            .unwrap()
            .set_len(40 << 20)
            .unwrap();
        run(Command::new("sh").arg("-c").arg(format!(
            "echo 'start=2048, size=69632, type=c' | sfdisk -q '{}'",
            image.display()
        )));
        let bytes = std::fs::read(&fat).unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&image)
            .unwrap();
        f.write_all_at(&bytes, 1 << 20).unwrap();
        image
    }

    #[test]
    fn the_kernel_arguments_come_from_cmdline_txt_on_the_boards_disk() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let base = card(
            d,
            "nas.img",
            "console=serial0,115200 console=tty1 root=PARTUUID=1234abcd-02 rootwait quiet\n",
        );
        let workdir = d.join("nas.img.emulate");
        std::fs::create_dir_all(&workdir).unwrap();
        let root = overlay(&base, &workdir, false).unwrap();
        let image = Image::open(&base).unwrap();
        assert_eq!(
            card_args(&image, &root, &workdir).unwrap(),
            ["rootwait", "quiet"]
        );

        // The board rewrites cmdline.txt (setup's USB quirk): the write
        // lands in the overlay, and the next boot takes it from there.
        let rewritten = card(
            d,
            "rewritten.img",
            "console=serial0,115200 root=PARTUUID=1234abcd-02 rootwait usb-storage.quirks=46f4:0001:u\n",
        );
        let qemu_img = |args: &[&str]| {
            let out = Command::new("qemu-img").args(args).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let (root_s, base_s) = (root.to_str().unwrap(), base.to_str().unwrap());
        qemu_img(&[
            "convert",
            "-f",
            "raw",
            "-O",
            "qcow2",
            rewritten.to_str().unwrap(),
            root_s,
        ]);
        qemu_img(&["rebase", "-u", "-F", "raw", "-b", base_s, root_s]);
        assert_eq!(
            card_args(&image, &root, &workdir).unwrap(),
            ["rootwait", "usb-storage.quirks=46f4:0001:u"]
        );
        assert_eq!(
            std::fs::read_dir(&workdir).unwrap().count(),
            1,
            "only root.qcow2: the boot partition's copy is gone"
        );
        let cmdline = std::fs::read(&base).unwrap();
        assert!(
            !String::from_utf8_lossy(&cmdline).contains("46f4:0001"),
            "the image itself is as built"
        );
    }

    #[test]
    fn usb_and_uas_disks_hang_off_one_xhci_and_leave_the_sata_ports_alone() {
        let opts = Options {
            image: "nas.img".into(),
            blank: None,
            disks: vec![],
            usb_disks: vec![],
            uas_disks: vec![],
            workdir: None,
            memory_mib: 2048,
            cpus: 2,
            headless: true,
            serial_log: None,
            exit_on_reboot: true,
            fresh: false,
        };
        let boot = Boot {
            kernel: "vmlinuz".into(),
            initrd: None,
            version: "6.1.0-40-arm64".into(),
            root_arg: "root=LABEL=RASPIROOT".into(),
            card_args: vec!["rw".into(), "usb-storage.quirks=46f4:0001:u".into()],
        };
        let disks = vec![
            (PathBuf::from("a.img"), "a".to_string(), Bus::Sata),
            (PathBuf::from("u.img"), "u".to_string(), Bus::UsbStorage),
            (PathBuf::from("b.img"), "b".to_string(), Bus::Sata),
            (PathBuf::from("s.img"), "s".to_string(), Bus::Uas),
        ];
        let ports = Ports {
            ssh: 1,
            smb: 2,
            nfs: 3,
        };
        let cmd = qemu_command("qemu", &opts, &boot, Path::new("root.qcow2"), &disks, ports);
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
        assert!(
            line.contains("-device usb-storage,bus=xhci.0,drive=d1,serial=u"),
            "{line}"
        );
        assert!(line.contains("-device usb-uas,bus=xhci.0,id=uas3 -device scsi-hd,bus=uas3.0,scsi-id=0,lun=0,drive=d3,serial=s"), "{line}");
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert_eq!(
            append,
            "root=LABEL=RASPIROOT rw usb-storage.quirks=46f4:0001:u console=ttyAMA0 net.ifnames=0"
        );
    }
}
