//! Where the board's alerts land on the host: an SMTP server speaking just
//! enough ESMTP for msmtp (no TLS, AUTH PLAIN and LOGIN taking any
//! credentials and keeping them), and an HTTP server answering every
//! request with 200. Both listen on 127.0.0.1: qemu's user network takes
//! the board's connections to its gateway, 10.0.2.2, to the host's loopback.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a sink has received, in order, shared with its threads.
pub struct Recorded<T>(Arc<Mutex<Vec<T>>>);

impl<T: Clone> Recorded<T> {
    fn new() -> Self {
        Recorded(Arc::new(Mutex::new(Vec::new())))
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Everything received after the first `mark` items.
    pub fn since(&self, mark: usize) -> Vec<T> {
        self.0.lock().unwrap().iter().skip(mark).cloned().collect()
    }

    /// The first item after `mark` that `pred` accepts, waiting up to
    /// `timeout` for one to arrive.
    pub fn wait_for(&self, mark: usize, pred: impl Fn(&T) -> bool, timeout: Duration) -> Option<T> {
        let start = Instant::now();
        loop {
            if let Some(hit) = self.since(mark).into_iter().find(|t| pred(t)) {
                return Some(hit);
            }
            if start.elapsed() >= timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One message as the SMTP sink took it.
#[derive(Clone, Debug)]
pub struct Mail {
    /// User and password of the session's AUTH, if it authenticated.
    pub auth: Option<(String, String)>,
    pub from: String,
    pub to: Vec<String>,
    /// Headers and body, lines joined with `\n`, dots unstuffed.
    pub data: String,
}

/// One request as the HTTP sink took it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Smtp {
    pub port: u16,
    pub mails: Recorded<Mail>,
    /// Each session's dialogue, kept even when it ends without a mail, so
    /// a test that waits in vain can say how far the client got.
    pub sessions: Recorded<String>,
}

pub struct Http {
    pub port: u16,
    pub requests: Recorded<Request>,
}

/// Accepts connections on 127.0.0.1 (a free port), each served in its own
/// thread so a client that hangs does not hold up the next.
fn listen(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
                serve(stream)
            });
        }
    });
    port
}

impl Smtp {
    pub fn start() -> Smtp {
        let (mails, sessions) = (Recorded::new(), Recorded::new());
        let (m, s) = (mails.0.clone(), sessions.0.clone());
        let port = listen(move |stream| {
            let mut said = String::new();
            let _ = smtp_session(stream, &m, &mut said);
            s.lock().unwrap().push(said);
        });
        Smtp {
            port,
            mails,
            sessions,
        }
    }
}

impl Http {
    pub fn start() -> Http {
        let requests = Recorded::new();
        let r = requests.0.clone();
        let port = listen(move |stream| {
            let _ = http_request(stream, &r);
        });
        Http { port, requests }
    }
}

struct Wire<'a> {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    said: &'a mut String,
}

impl Wire<'_> {
    fn say(&mut self, reply: &str) -> io::Result<()> {
        self.said.push_str(&format!("S: {reply}\n"));
        self.writer
            .write_all(format!("{}\r\n", reply.replace('\n', "\r\n")).as_bytes())
    }

    /// The next line without its line end; None when the client hung up.
    fn line(&mut self) -> io::Result<Option<String>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim_end_matches(['\r', '\n']).to_string()))
    }

    fn command(&mut self) -> io::Result<Option<String>> {
        let line = self.line()?;
        if let Some(l) = &line {
            self.said.push_str(&format!("C: {l}\n"));
        }
        Ok(line)
    }
}

fn smtp_session(stream: TcpStream, mails: &Mutex<Vec<Mail>>, said: &mut String) -> io::Result<()> {
    let mut wire = Wire {
        reader: BufReader::new(stream.try_clone()?),
        writer: stream,
        said,
    };
    wire.say("220 sink.test ESMTP nasforge test sink")?;
    let (mut auth, mut from, mut to) = (None, String::new(), Vec::new());
    while let Some(line) = wire.command()? {
        let (verb, arg) = line.split_once(' ').unwrap_or((&line, ""));
        match verb.to_ascii_uppercase().as_str() {
            "EHLO" => wire.say("250-sink.test\n250-AUTH PLAIN LOGIN\n250 8BITMIME")?,
            "HELO" => wire.say("250 sink.test")?,
            "AUTH" => match authenticate(&mut wire, arg)? {
                Some(creds) => {
                    auth = Some(creds);
                    wire.say("235 2.7.0 Authentication successful")?;
                }
                None => wire.say("504 5.5.4 Unrecognized authentication type")?,
            },
            "MAIL" => {
                from = address(arg);
                to.clear();
                wire.say("250 2.1.0 OK")?;
            }
            "RCPT" => {
                to.push(address(arg));
                wire.say("250 2.1.5 OK")?;
            }
            "DATA" => {
                wire.say("354 End data with <CR><LF>.<CR><LF>")?;
                let data = message(&mut wire)?;
                mails.lock().unwrap().push(Mail {
                    auth: auth.clone(),
                    from: from.clone(),
                    to: std::mem::take(&mut to),
                    data,
                });
                wire.say("250 2.0.0 OK queued")?;
            }
            "RSET" => {
                (from, to) = (String::new(), Vec::new());
                wire.say("250 2.0.0 OK")?;
            }
            "NOOP" => wire.say("250 2.0.0 OK")?,
            "QUIT" => return wire.say("221 2.0.0 Bye"),
            _ => wire.say("502 5.5.2 Command not implemented")?,
        }
    }
    Ok(())
}

/// AUTH PLAIN (with or without the initial response) and AUTH LOGIN;
/// None for a mechanism not offered.
fn authenticate(wire: &mut Wire, arg: &str) -> io::Result<Option<(String, String)>> {
    let (mech, initial) = arg.split_once(' ').unwrap_or((arg, ""));
    match mech.to_ascii_uppercase().as_str() {
        "PLAIN" => {
            let text = sasl_answer(wire, "", initial)?;
            let mut parts = text.split('\0').skip(1);
            let user = parts.next().unwrap_or_default().to_string();
            let password = parts.next().unwrap_or_default().to_string();
            Ok(Some((user, password)))
        }
        "LOGIN" => {
            let user = sasl_answer(wire, "VXNlcm5hbWU6", initial)?;
            let password = sasl_answer(wire, "UGFzc3dvcmQ6", "")?;
            Ok(Some((user, password)))
        }
        _ => Ok(None),
    }
}

/// The client's answer to a 334 challenge, or the response it gave with
/// the command itself; decoded.
fn sasl_answer(wire: &mut Wire, prompt: &str, given: &str) -> io::Result<String> {
    if !given.is_empty() {
        return Ok(base64_text(given));
    }
    wire.say(&format!("334 {prompt}"))?;
    Ok(base64_text(&wire.command()?.unwrap_or_default()))
}

/// `FROM:<a@b> SIZE=10` → `a@b`.
fn address(arg: &str) -> String {
    let start = arg.find('<').map_or(0, |i| i + 1);
    let end = arg[start..].find('>').map_or(arg.len(), |i| start + i);
    arg[start..end].trim().to_string()
}

/// The message after DATA, up to the line holding a single dot.
fn message(wire: &mut Wire) -> io::Result<String> {
    let mut lines = Vec::new();
    while let Some(line) = wire.line()? {
        if line == "." {
            wire.said
                .push_str(&format!("C: <{} lines of data>\nC: .\n", lines.len()));
            return Ok(lines.join("\n"));
        }
        lines.push(line.strip_prefix('.').map_or(line.clone(), str::to_string));
    }
    Err(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "hung up inside DATA",
    ))
}

fn base64_text(text: &str) -> String {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let sextets: Vec<u8> = text.bytes().filter_map(value).collect();
    let mut out = Vec::new();
    for chunk in sextets.chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, s)| acc | (u32::from(*s) << (18 - 6 * i)));
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One request per connection: line, headers, a Content-Length or chunked
/// body; answered 200 with no body.
fn http_request(stream: TcpStream, requests: &Mutex<Vec<Request>>) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut words = first.split_whitespace();
    let method = words.next().unwrap_or_default().to_string();
    let path = words.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let mut request = Request {
        method,
        path,
        headers,
        body: String::new(),
    };
    if request
        .header("Expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = if request
        .header("Transfer-Encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        chunked(&mut reader)?
    } else {
        let length = request
            .header("Content-Length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        body
    };
    request.body = String::from_utf8_lossy(&body).into_owned();
    requests.lock().unwrap().push(request);
    writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

fn chunked(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = size.trim().split(';').next().unwrap_or("0");
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        let mut chunk = vec![0u8; size + 2];
        if size == 0 {
            // The end: optional trailers, then an empty line.
            let mut line = String::new();
            while reader.read_line(&mut line)? > 0 && !line.trim_end().is_empty() {
                line.clear();
            }
            return Ok(body);
        }
        reader.read_exact(&mut chunk)?;
        body.extend_from_slice(&chunk[..size]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that sends a line and reads one (possibly multi-line) reply.
    struct Client(BufReader<TcpStream>, TcpStream);

    impl Client {
        fn connect(port: u16) -> (Client, String) {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut c = Client(BufReader::new(s.try_clone().unwrap()), s);
            let greeting = c.reply();
            (c, greeting)
        }

        fn reply(&mut self) -> String {
            let mut all = String::new();
            loop {
                let mut line = String::new();
                self.0.read_line(&mut line).unwrap();
                all.push_str(&line);
                if line.len() < 4 || line.as_bytes()[3] != b'-' {
                    return all;
                }
            }
        }

        fn send(&mut self, line: &str) -> String {
            self.1.write_all(format!("{line}\r\n").as_bytes()).unwrap();
            self.reply()
        }
    }

    #[test]
    fn the_smtp_sink_takes_mail_as_msmtp_sends_it() {
        let smtp = Smtp::start();
        let (mut c, greeting) = Client::connect(smtp.port);
        assert!(greeting.starts_with("220 "), "{greeting}");
        let ehlo = c.send("EHLO board");
        assert!(
            ehlo.contains("250-AUTH PLAIN LOGIN") && ehlo.ends_with("250 8BITMIME\r\n"),
            "{ehlo}"
        );
        // "\0nas\0s3cret" in base64.
        assert!(c.send("AUTH PLAIN AG5hcwBzM2NyZXQ=").starts_with("235 "));
        assert!(
            c.send("MAIL FROM:<nas@example.com> SIZE=100")
                .starts_with("250 ")
        );
        assert!(c.send("RCPT TO:<admin@example.com>").starts_with("250 "));
        assert!(c.send("DATA").starts_with("354 "));
        c.1.write_all(b"Subject: array data degraded\r\n\r\n..leading dot\r\nend\r\n")
            .unwrap();
        assert!(c.send(".").starts_with("250 "));
        assert!(c.send("QUIT").starts_with("221 "));
        let mail = smtp
            .mails
            .wait_for(0, |_| true, Duration::from_secs(5))
            .unwrap();
        assert_eq!(mail.auth, Some(("nas".into(), "s3cret".into())));
        assert_eq!(mail.from, "nas@example.com");
        assert_eq!(mail.to, ["admin@example.com"]);
        assert_eq!(
            mail.data,
            "Subject: array data degraded\n\n.leading dot\nend"
        );
        let session = smtp
            .sessions
            .wait_for(0, |_| true, Duration::from_secs(5))
            .unwrap();
        assert!(
            session.contains("C: <4 lines of data>") && session.ends_with("S: 221 2.0.0 Bye\n"),
            "{session}"
        );
    }

    #[test]
    fn the_smtp_sink_asks_for_login_credentials_step_by_step() {
        let smtp = Smtp::start();
        let (mut c, _) = Client::connect(smtp.port);
        c.send("EHLO board");
        assert_eq!(c.send("AUTH LOGIN"), "334 VXNlcm5hbWU6\r\n");
        assert_eq!(c.send("bmFz"), "334 UGFzc3dvcmQ6\r\n"); // "nas"
        assert!(c.send("czNjcmV0").starts_with("235 ")); // "s3cret"
        assert!(c.send("AUTH CRAM-MD5").starts_with("504 "));
        assert!(c.send("AUTH PLAIN").starts_with("334 "));
        assert!(c.send("AGFkbWluAHB3").starts_with("235 ")); // "\0admin\0pw"
        c.send("MAIL FROM:<a@b>");
        c.send("RCPT TO:<c@d>");
        c.send("RCPT TO:<e@f>");
        c.send("DATA");
        assert!(c.send("hello\r\n.").starts_with("250 "));
        c.send("QUIT");
        let mail = smtp
            .mails
            .wait_for(0, |_| true, Duration::from_secs(5))
            .unwrap();
        assert_eq!(mail.auth, Some(("admin".into(), "pw".into())));
        assert_eq!(
            (mail.to, mail.data),
            (
                vec!["c@d".to_string(), "e@f".to_string()],
                "hello".to_string()
            )
        );
    }

    fn post(port: u16, head: &str, body: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(format!("{head}\r\n\r\n{body}").as_bytes())
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn the_http_sink_records_posts_and_answers_200() {
        let http = Http::start();
        let json = r#"{"event":"degraded","subject":"array data degraded"}"#;
        let answer = post(
            http.port,
            &format!(
                "POST /hook HTTP/1.1\r\nHost: 10.0.2.2\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}",
                json.len()
            ),
            json,
        );
        assert!(
            answer.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
                && answer.contains("Content-Length: 0"),
            "{answer}"
        );
        let got = post(
            http.port,
            "POST /topic HTTP/1.1\r\nTitle: test\r\nTransfer-Encoding: chunked",
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        let hook = http
            .requests
            .wait_for(0, |r| r.path == "/hook", Duration::from_secs(5))
            .unwrap();
        assert_eq!((hook.method.as_str(), hook.body.as_str()), ("POST", json));
        assert_eq!(hook.header("content-type"), Some("application/json"));
        let ntfy = http
            .requests
            .wait_for(0, |r| r.path == "/topic", Duration::from_secs(5))
            .unwrap();
        assert_eq!(
            (ntfy.header("Title"), ntfy.body.as_str()),
            (Some("test"), "hello world")
        );
        assert_eq!(http.requests.since(1).len(), 1);
    }

    #[test]
    fn waiting_sees_what_arrives_later_and_gives_up_in_time() {
        let http = Http::start();
        let port = http.port;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            post(port, "GET /late HTTP/1.1", "");
        });
        let late = http
            .requests
            .wait_for(0, |r| r.path == "/late", Duration::from_secs(10));
        assert_eq!(late.map(|r| r.method), Some("GET".to_string()));
        let start = Instant::now();
        assert!(
            http.requests
                .wait_for(0, |r| r.path == "/never", Duration::from_millis(300))
                .is_none()
        );
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(
            http.requests
                .wait_for(1, |_| true, Duration::ZERO)
                .is_none(),
            "only what came after the mark"
        );
    }
}
