//! `nasforge fault` against a real qemu, built with the arguments `emulate`
//! gives USB disks: pulled out, refused twice, put back (a UAS disk is
//! refused: qemu cannot plug one back at run time), failing every read and
//! healed, and the power cut.
//! The machine is held before its first instruction (-S): what is tested is
//! qemu's side, which a guest on the emulated board meets in tests/e2e.rs.

mod common;

use common::*;
use nasforge::emulate::fault::Usb;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// qemu's own block layer reading or writing a disk (`qemu-io` through
/// the human monitor), on a QMP connection of the test's own: what qemu-io
/// printed, which goes to qemu's standard output (`out`).
fn qemu_io(socket: &Path, out: &Path, node: &str, command: &str) -> String {
    let before = std::fs::read_to_string(out).unwrap_or_default().len();
    let stream = UnixStream::connect(socket).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut answer = || {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    answer();
    for message in [
        serde_json::json!({ "execute": "qmp_capabilities" }),
        serde_json::json!({ "execute": "human-monitor-command",
            "arguments": { "command-line": format!("qemu-io {node} \"{command}\"") } }),
    ] {
        writeln!(writer, "{message}").unwrap();
        loop {
            let a = answer();
            if let Some(r) = a.get("return") {
                if let Some(said) = r.as_str() {
                    return said.to_string() + &std::fs::read_to_string(out).unwrap()[before..];
                }
                break;
            }
            assert!(a.get("error").is_none(), "{a}");
        }
    }
    unreachable!()
}

#[test]
fn a_usb_disk_is_pulled_out_and_put_back_and_the_power_cut_stops_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["usbA.img", "usb,B.img"] {
        std::fs::File::create(d.join(f))
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
    }
    let socket = d.join("nas.qmp");
    // qemu-io prints to qemu's standard output, which stdio buffers when
    // it is a file: unbuffered, so each answer is there when it returns.
    let mut qemu = Command::new("stdbuf")
        .args(["-o0", "qemu-system-aarch64"])
        .args(["-M", "virt", "-cpu", "cortex-a57", "-accel", "tcg", "-S"])
        .args(["-nographic", "-serial", "null", "-monitor", "none"])
        .args(["-device", "qemu-xhci,id=xhci"])
        .args(Usb::Storage.args(&d.join("usbA.img"), "usbA"))
        .args(Usb::Uas.args(&d.join("usb,B.img"), "usbB"))
        .arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", socket.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(d.join("qemu.out")).unwrap())
        .spawn()
        .expect("qemu-system-aarch64 (scripts/setup installs it)");
    let started = Instant::now();
    while !socket.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "no QMP socket");
        std::thread::sleep(Duration::from_millis(100));
    }
    let sock = socket.to_str().unwrap();
    let fault = |args: &[&str]| {
        let mut all = vec!["fault", sock];
        all.extend(args);
        nasforge(&all, d, d)
    };

    let r = fault(&["disks"]);
    assert_eq!(
        r.stdout, "usbA  usb-storage  plugged in\nusbB  uas  plugged in\n",
        "{}",
        r.stderr
    );
    for serial in ["usbB", "usbA"] {
        let r = fault(&["unplug", serial]);
        assert_eq!(r.status, 0, "{}", r.stderr);
        assert_eq!(r.stdout, format!("{serial} pulled out\n"));
    }
    let r = fault(&["unplug", "usbB"]);
    assert_eq!(r.status, 1);
    assert!(
        r.stderr.contains(&format!(
            "usbB is pulled out already: `nasforge fault {sock} plug usbB` puts it back"
        )),
        "{}",
        r.stderr
    );
    let r = fault(&["disks"]);
    assert_eq!(
        r.stdout,
        "usbA  usb-storage  pulled out\nusbB  uas  pulled out\n"
    );
    let r = fault(&["plug", "usbA"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "usbA plugged back in\n");
    let r = fault(&["plug", "usbB"]);
    assert!(
        r.status == 1
            && r.stderr.contains(
                "usbB is a UAS disk, which qemu cannot plug back in while the machine runs"
            ),
        "{}",
        r.stderr
    );
    // The bulk-only disk is back as it was: pulled out again, which only a
    // device qemu knows under its id can be.
    let r = fault(&["disks"]);
    assert_eq!(
        r.stdout,
        "usbA  usb-storage  plugged in\nusbB  uas  pulled out\n"
    );
    let r = fault(&["unplug", "usbA"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(fault(&["plug", "usbA"]).status, 0);
    let r = fault(&["plug", "usbA"]);
    assert!(
        r.status == 1 && r.stderr.contains("usbA is plugged in already"),
        "{}",
        r.stderr
    );
    let r = fault(&["unplug", "sda"]);
    assert!(
        r.status == 1
            && r.stderr.contains(
                "no USB disk with serial sda: this machine's are usbA, usbB (SATA, SAS and NVMe disks cannot be pulled out while it runs)"
            ),
        "{}",
        r.stderr
    );

    // A dying disk: every request fails until healed, as qemu itself
    // reads it.
    let r = fault(&["io-errors", "usbA"]);
    assert_eq!(
        r.stdout, "usbA fails every read and write from now on\n",
        "{}",
        r.stderr
    );
    assert!(
        fault(&["disks"])
            .stdout
            .contains("usbA  usb-storage  plugged in, failing every read and write\n")
    );
    let io = |command: &str| qemu_io(&socket, &d.join("qemu.out"), "usb-usbA", command);
    // Reads only: the disk's device holds the node's write permission, so
    // qemu-io may not write beside it (the board's own writes fail in
    // tests/e2e.rs).
    let said = io("read 0 512");
    assert!(said.contains("read failed: Input/output error"), "{said}");
    let r = fault(&["io-errors", "usbA"]);
    assert!(
        r.status == 1 && r.stderr.contains("usbA fails every read and write already"),
        "{}",
        r.stderr
    );
    let r = fault(&["heal", "usbA"]);
    assert_eq!(r.stdout, "usbA reads and writes again\n", "{}", r.stderr);
    let said = io("read 0 512");
    assert!(said.contains("read 512/512 bytes"), "{said}");
    let r = fault(&["heal", "usbA"]);
    assert!(
        r.status == 1 && r.stderr.contains("usbA has no I/O errors to end"),
        "{}",
        r.stderr
    );
    assert_eq!(
        fault(&["disks"]).stdout,
        "usbA  usb-storage  plugged in\nusbB  uas  pulled out\n"
    );

    let r = fault(&["power-cut"]);
    assert_eq!(r.stdout, "power cut: the machine is off\n", "{}", r.stderr);
    let started = Instant::now();
    loop {
        if let Some(status) = qemu.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "qemu still runs after the power cut"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = fault(&["disks"]);
    assert!(
        r.status == 1 && r.stderr.contains(&format!("connecting to {sock}")),
        "{}",
        r.stderr
    );
}
