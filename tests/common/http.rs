//! A small HTTP/1.1 file server on 127.0.0.1 for download tests: it honours
//! `Range`, counts requests, and can cut a body half way on purpose.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Behaviour {
    /// This many responses send only half their body, then close.
    pub cut_responses: AtomicUsize,
}

pub struct Server {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<String>>>,
    pub behaviour: Arc<Behaviour>,
}

impl Server {
    /// Serves the files of `root` by name.
    pub fn start(root: PathBuf) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Behaviour::default());
        let (reqs, beh) = (requests.clone(), behaviour.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, reqs, beh) = (root.clone(), reqs.clone(), beh.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, &root, &reqs, &beh);
                });
            }
        });
        Server {
            port,
            requests,
            behaviour,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn serve(
    stream: TcpStream,
    root: &std::path::Path,
    reqs: &Mutex<Vec<String>>,
    beh: &Behaviour,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .trim_start_matches('/')
            .to_string();
        let mut range: Option<u64> = None;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            if h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                range = v.trim().trim_end_matches('-').parse().ok();
            }
        }
        reqs.lock()
            .unwrap()
            .push(format!("GET /{path} range={range:?}"));
        let Ok(body) = std::fs::read(root.join(percent_decoded(&path))) else {
            out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let start = range.unwrap_or(0).min(body.len() as u64) as usize;
        let part = &body[start..];
        let head = if range.is_some() {
            format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
                part.len(),
                start,
                body.len().saturating_sub(1),
                body.len()
            )
        } else {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\n\r\n",
                part.len()
            )
        };
        out.write_all(head.as_bytes())?;
        let cut = beh.cut_responses.load(Ordering::SeqCst) > 0;
        if cut {
            beh.cut_responses.fetch_sub(1, Ordering::SeqCst);
            out.write_all(&part[..part.len() / 2])?;
            out.flush()?;
            return Ok(());
        }
        out.write_all(part)?;
        out.flush()?;
    }
}

/// A URL path as the file it names, as a web server reads it: apt escapes
/// `+` and `:` of package file names (`%2b`, `%3a`).
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
