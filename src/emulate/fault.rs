//! `nasforge fault`: what goes wrong with a NAS while it is busy, caused on
//! a machine `nasforge emulate --qmp PATH` runs, through qemu's machine
//! protocol (QMP) on that socket: a USB disk pulled out and put back, as a
//! USB bridge resetting under UAS looks to the board, and the power cut.
//!
//! The USB disks are the ones that can go: qemu's AHCI, SAS and NVMe
//! controllers take no hot-unplug here, and on a real board a SATA disk
//! that drops is a cable or a dying disk, not something put back.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The control socket given to `nasforge emulate --qmp`
    #[arg(value_name = "QMP")]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum What {
    /// The USB disks, each by the serial `emulate` printed, and whether it
    /// is plugged in
    Disks,
    /// Pull a USB disk out at once, as a bridge resetting or a cable
    /// knocked out does: nothing warns the board
    Unplug {
        /// The disk's serial, as `emulate` printed it (e.g. usbB)
        serial: String,
    },
    /// Put a pulled USB disk back, the same file on the same kind of port
    /// (bulk-only disks: qemu cannot plug a UAS disk back in at run time)
    Plug { serial: String },
    /// Make every read and write of a USB disk fail with an I/O error from
    /// now on, as a dying disk's do (qemu's blkdebug under the disk); the
    /// board sees the disk still there
    IoErrors { serial: String },
    /// End `io-errors`: the disk reads and writes again
    Heal { serial: String },
    /// Cut the power: the machine stops at once; what the board had not
    /// yet written to its disks is lost, what it had is on them
    PowerCut,
}

/// How a USB disk hangs off the emulated xHCI controller: the block node
/// `emulate` gives it is named after both, so that a disk pulled out can be
/// put back as it was (qemu keeps a `-blockdev` node when its device goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usb {
    /// Bulk-only (usb-storage)
    Storage,
    /// UAS: a usb-uas device with the disk on its SCSI bus
    Uas,
}

impl Usb {
    fn prefix(self) -> &'static str {
        match self {
            Usb::Storage => "usb-",
            Usb::Uas => "uas-",
        }
    }

    fn node(self, serial: &str) -> String {
        format!("{}{serial}", self.prefix())
    }

    fn of_node(node: &str) -> Option<(Usb, &str)> {
        [Usb::Storage, Usb::Uas]
            .into_iter()
            .find_map(|u| node.strip_prefix(u.prefix()).map(|s| (u, s)))
    }

    /// qemu's arguments for the disk in `file`: -blockdev nodes, which,
    /// unlike a -drive, stay when the device is unplugged, named so that
    /// `nasforge fault` finds them, and its devices.
    pub fn args(self, file: &Path, serial: &str) -> Vec<String> {
        let mut args = vec![
            "-blockdev".to_string(),
            format!(
                "driver=file,node-name={},filename={}",
                file_node(serial),
                file.display().to_string().replace(',', ",,")
            ),
            "-blockdev".to_string(),
            format!(
                "driver=raw,node-name={},file={}",
                self.node(serial),
                file_node(serial)
            ),
        ];
        for device in self.devices(serial) {
            args.push("-device".into());
            args.push(device_arg(&device));
        }
        args
    }

    /// The devices that make the disk, outermost first: unplugging the
    /// first takes the rest with it.
    fn devices(self, serial: &str) -> Vec<Value> {
        let id = device_id(serial);
        let node = self.node(serial);
        match self {
            Usb::Storage => vec![json!({
                "driver": "usb-storage", "bus": "xhci.0", "id": id,
                "drive": node, "serial": serial,
            })],
            Usb::Uas => vec![
                // The serial on the USB device too: udev names a UAS disk
                // after the bridge's, as a real enclosure's.
                json!({ "driver": "usb-uas", "bus": "xhci.0", "id": id, "serial": serial }),
                json!({
                    "driver": "scsi-hd", "bus": format!("{id}.0"), "scsi-id": 0, "lun": 0,
                    "drive": node, "serial": serial,
                }),
            ],
        }
    }
}

/// The node of a USB disk's file, under its raw node (or, with
/// `io-errors`, under the blkdebug node between them).
fn file_node(serial: &str) -> String {
    format!("file-{serial}")
}

/// The blkdebug node `io-errors` puts under a disk.
fn errors_node(serial: &str) -> String {
    format!("err-{serial}")
}

/// The qemu device id of the USB device a disk with this serial hangs on.
pub fn device_id(serial: &str) -> String {
    format!("disk-{serial}")
}

/// `-device` arguments for what [`Usb::devices`] describes.
fn device_arg(device: &Value) -> String {
    let Some(fields) = device.as_object() else {
        unreachable!("Usb::devices gives objects")
    };
    let driver = fields["driver"].as_str().unwrap_or_default();
    let rest = fields
        .iter()
        .filter(|(k, _)| *k != "driver")
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        });
    std::iter::once(driver.to_string())
        .chain(rest)
        .collect::<Vec<_>>()
        .join(",")
}

const CLOSED: &str = "qemu closed the control socket";

/// A connection to qemu's machine protocol.
struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events read while waiting for a command's answer.
    events: Vec<Value>,
}

impl Qmp {
    fn connect(socket: &Path) -> Result<Qmp> {
        let stream = UnixStream::connect(socket).with_context(|| {
            format!(
                "connecting to {}: is `nasforge emulate --qmp {}` running?",
                socket.display(),
                socket.display()
            )
        })?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            events: Vec::new(),
        };
        let greeting = qmp.read()?;
        if greeting.get("QMP").is_none() {
            bail!(
                "{} is not qemu's machine protocol: it said {greeting}",
                socket.display()
            );
        }
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!(CLOSED);
        }
        serde_json::from_str(&line).with_context(|| format!("qemu's answer {line:?}"))
    }

    fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let mut message = json!({ "execute": command });
        if arguments.as_object().is_some_and(|a| !a.is_empty()) {
            message["arguments"] = arguments;
        }
        // One write: qemu acts on a whole JSON object before its newline
        // arrives, so after `quit` a second write would meet a closed socket.
        self.writer.write_all(format!("{message}\n").as_bytes())?;
        loop {
            let answer = self.read()?;
            if let Some(r) = answer.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = answer.get("error") {
                bail!(
                    "qemu refused {command}: {}",
                    e["desc"].as_str().unwrap_or("(no reason given)")
                );
            }
            self.events.push(answer);
        }
    }

    /// qemu may close the socket on its way out before its answer to `quit`
    /// is read; that is the machine going off, not a failure.
    fn quit(&mut self) -> Result<()> {
        match self.execute("quit", json!({})) {
            Ok(_) => Ok(()),
            Err(e) if e.to_string() == CLOSED => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Waits for qemu to say the device is gone: a USB device goes at once,
    /// but only once it is gone can it be plugged again.
    fn deleted(&mut self, id: &str) -> Result<()> {
        let is_it = |e: &Value| e["event"] == "DEVICE_DELETED" && e["data"]["device"] == id;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.events.iter().any(is_it) {
            if Instant::now() > deadline {
                bail!("qemu did not remove {id} within 30 s");
            }
            let e = self.read()?;
            self.events.push(e);
        }
        Ok(())
    }

    fn nodes(&mut self) -> Result<Vec<Value>> {
        Ok(self
            .execute("query-named-block-nodes", json!({ "flat": true }))?
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    fn node_names(&mut self) -> Result<Vec<String>> {
        Ok(self
            .nodes()?
            .iter()
            .filter_map(|n| n["node-name"].as_str().map(str::to_string))
            .collect())
    }

    /// The USB disks `emulate` attached, by serial, and whether each is in.
    fn usb_disks(&mut self) -> Result<Vec<(String, Usb, bool)>> {
        let names = self.node_names()?;
        let plugged: Vec<String> = self
            .execute("qom-list", json!({ "path": "/machine/peripheral" }))?
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect();
        let mut disks: Vec<(String, Usb, bool)> = names
            .iter()
            .filter_map(|n| Usb::of_node(n))
            .map(|(usb, serial)| {
                let id = device_id(serial);
                (serial.to_string(), usb, plugged.contains(&id))
            })
            .collect();
        disks.sort_by(|a, b| a.0.cmp(&b.0));
        disks.dedup_by(|a, b| a.0 == b.0);
        Ok(disks)
    }

    fn find(&mut self, serial: &str) -> Result<(Usb, bool)> {
        let disks = self.usb_disks()?;
        match disks.iter().find(|d| d.0 == serial) {
            Some((_, usb, plugged)) => Ok((*usb, *plugged)),
            None if disks.is_empty() => bail!(
                "this machine has no USB disk, and only USB disks can be pulled out: \
                 attach one with `nasforge emulate --usb-disk FILE` (or --uas-disk)"
            ),
            None => bail!(
                "no USB disk with serial {serial}: this machine's are {} \
                 (SATA, SAS and NVMe disks cannot be pulled out while it runs)",
                disks
                    .iter()
                    .map(|d| d.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Carries out `nasforge fault`, and says what it did.
pub fn run(opts: &Options) -> Result<String> {
    let mut qmp = Qmp::connect(&opts.socket)?;
    match &opts.what {
        What::Disks => {
            let disks = qmp.usb_disks()?;
            if disks.is_empty() {
                return Ok("no USB disks".into());
            }
            let nodes = qmp.node_names()?;
            Ok(disks
                .iter()
                .map(|(serial, usb, plugged)| {
                    format!(
                        "{serial}  {}  {}{}",
                        match usb {
                            Usb::Storage => "usb-storage",
                            Usb::Uas => "uas",
                        },
                        if *plugged { "plugged in" } else { "pulled out" },
                        if nodes.contains(&errors_node(serial)) {
                            ", failing every read and write"
                        } else {
                            ""
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        What::Unplug { serial } => {
            let (_, plugged) = qmp.find(serial)?;
            if !plugged {
                bail!(
                    "{serial} is pulled out already: `nasforge fault {} plug {serial}` puts it back",
                    opts.socket.display()
                );
            }
            let id = device_id(serial);
            qmp.execute("device_del", json!({ "id": id }))?;
            qmp.deleted(&id)?;
            Ok(format!("{serial} pulled out"))
        }
        What::Plug { serial } => {
            let (usb, plugged) = qmp.find(serial)?;
            if plugged {
                bail!("{serial} is plugged in already");
            }
            if usb == Usb::Uas {
                // qemu 10.0 attaches a usb-uas device added while the machine
                // runs at full speed (12 Mb/s), and the guest's xHCI driver
                // never enumerates it: the board would not see the disk.
                bail!(
                    "{serial} is a UAS disk, which qemu cannot plug back in while the machine runs (it attaches it at full speed and the board never sees it): attach the disk with --usb-disk (bulk-only) to rehearse a disk that comes back"
                );
            }
            for device in usb.devices(serial) {
                qmp.execute("device_add", device)?;
            }
            Ok(format!("{serial} plugged back in"))
        }
        What::IoErrors { serial } => {
            let (usb, _) = qmp.find(serial)?;
            let errors = errors_node(serial);
            if qmp.node_names()?.contains(&errors) {
                bail!("{serial} fails every read and write already");
            }
            // blkdebug's rules, with no sector named, hit every read and
            // write; flushes pass, or `heal` could not swap the node back
            // out (qemu flushes a node it reopens).
            qmp.execute(
                "blockdev-add",
                json!({
                    "driver": "blkdebug", "node-name": errors, "image": file_node(serial),
                    "inject-error": [
                        { "event": "read_aio", "iotype": "read", "errno": 5 },
                        { "event": "write_aio", "iotype": "write", "errno": 5 },
                    ],
                }),
            )?;
            qmp.execute(
                "blockdev-reopen",
                json!({ "options": [{ "driver": "raw", "node-name": usb.node(serial), "file": errors }] }),
            )?;
            Ok(format!("{serial} fails every read and write from now on"))
        }
        What::Heal { serial } => {
            let (usb, _) = qmp.find(serial)?;
            let errors = errors_node(serial);
            if !qmp.node_names()?.contains(&errors) {
                bail!(
                    "{serial} has no I/O errors to end: `nasforge fault {} io-errors {serial}` starts them",
                    opts.socket.display()
                );
            }
            qmp.execute(
                "blockdev-reopen",
                json!({ "options": [{ "driver": "raw", "node-name": usb.node(serial), "file": file_node(serial) }] }),
            )?;
            qmp.execute("blockdev-del", json!({ "node-name": errors }))?;
            Ok(format!("{serial} reads and writes again"))
        }
        What::PowerCut => {
            // quit, not system_reset: the machine is off until it is
            // started again, as after a real cut, and emulate returns.
            qmp.quit()?;
            Ok("power cut: the machine is off".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uas_disk_is_its_usb_device_and_the_disk_on_its_scsi_bus() {
        let args: Vec<String> = Usb::Uas.devices("usbB").iter().map(device_arg).collect();
        assert_eq!(
            args,
            [
                "usb-uas,bus=xhci.0,id=disk-usbB,serial=usbB",
                "scsi-hd,bus=disk-usbB.0,drive=uas-usbB,lun=0,scsi-id=0,serial=usbB"
            ]
        );
        assert_eq!(Usb::of_node("uas-usbB"), Some((Usb::Uas, "usbB")));
        assert_eq!(Usb::of_node("usb-nf-0123"), Some((Usb::Storage, "nf-0123")));
        assert_eq!(Usb::of_node("root"), None);
    }

    #[test]
    fn no_socket_says_which_emulate_to_start() {
        let err = run(&Options {
            socket: "/nonexistent/nas.qmp".into(),
            what: What::PowerCut,
        })
        .unwrap_err();
        assert!(
            format!("{err:#}")
                .contains("is `nasforge emulate --qmp /nonexistent/nas.qmp` running?"),
            "{err:#}"
        );
    }
}
