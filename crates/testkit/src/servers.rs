//! Real servers on loopback for the remote-source tests: a plain HTTP/1.1 file server
//! with range requests (std::net, written here), a TCP fault proxy (delay, drop, cut,
//! answer 503), and the moto S3 server (a Python program, started if it is installed).
//!
//! Every socket has a read timeout and every thread is joined on drop, so a test that
//! goes wrong fails instead of hanging.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use crate::spawned::Spawned;

/// How long a server or proxy waits on one socket before giving up on it.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(10);

/// A request line the HTTP server saw: method and the `Range` header, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The byte range asked for (`start..end`).
    pub range: Option<(u64, u64)>,
}

struct FileState {
    content: Arc<Vec<u8>>,
    e_tag: String,
    /// Answer this many next GETs with 503 before serving again.
    fail_next: usize,
    /// Whether `If-Match` is honoured (a plain server may ignore it).
    honor_if_match: bool,
    seen: Vec<Seen>,
}

/// Accepts connections on a loopback listener until stopped, one thread per
/// connection; joins every thread when stopped.
struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    fn start(handle: impl Fn(TcpStream) + Send + Sync + 'static) -> Acceptor {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = Arc::new(handle);
        let thread = std::thread::spawn(move || {
            let mut workers: Vec<JoinHandle<()>> = Vec::new();
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(SOCKET_TIMEOUT));
                let _ = conn.set_write_timeout(Some(SOCKET_TIMEOUT));
                let h = Arc::clone(&handle);
                workers.push(std::thread::spawn(move || h(conn)));
                workers.retain(|w| !w.is_finished());
            }
            // The listener closes here: later connections are refused.
            drop(listener);
            for w in workers {
                let _ = w.join();
            }
        });
        Acceptor {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            // Wake the blocking accept.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads an HTTP request head (up to the blank line); `None` on EOF or garbage.
fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn respond(conn: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]) {
    let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let _ = conn.write_all(out.as_bytes());
    let _ = conn.write_all(body);
    let _ = conn.flush();
    let _ = conn.shutdown(Shutdown::Both);
}

/// A loopback HTTP/1.1 server of one file at `/data/NAME`, with `HEAD`, ranged `GET`,
/// an ETag per content version and `If-Match`.
pub struct HttpFileServer {
    acceptor: Acceptor,
    state: Arc<Mutex<FileState>>,
    name: String,
    version: AtomicUsize,
}

impl HttpFileServer {
    /// Serves `content` as `/data/NAME`.
    pub fn start(name: &str, content: Vec<u8>) -> HttpFileServer {
        let state = Arc::new(Mutex::new(FileState {
            content: Arc::new(content),
            e_tag: "\"v1\"".into(),
            fail_next: 0,
            honor_if_match: true,
            seen: Vec::new(),
        }));
        let path = format!("/data/{name}");
        let st = Arc::clone(&state);
        let acceptor = Acceptor::start(move |mut conn| serve(&mut conn, &path, &st));
        HttpFileServer {
            acceptor,
            state,
            name: name.into(),
            version: AtomicUsize::new(1),
        }
    }

    /// The file's URL.
    pub fn url(&self) -> String {
        format!("http://{}/data/{}", self.acceptor.addr, self.name)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr
    }

    /// The URL of the same file reached through a proxy at `proxy`.
    pub fn url_via(&self, proxy: SocketAddr) -> String {
        format!("http://{proxy}/data/{}", self.name)
    }

    /// Replaces the file (a new ETag), as an upload over the same name would.
    pub fn replace(&self, content: Vec<u8>) {
        let v = self.version.fetch_add(1, Ordering::SeqCst) + 1;
        let mut s = self.state.lock().unwrap();
        s.content = Arc::new(content);
        s.e_tag = format!("\"v{v}\"");
    }

    /// Answers the next `n` GETs with `503 Service Unavailable`.
    pub fn fail_next(&self, n: usize) {
        self.state.lock().unwrap().fail_next = n;
    }

    /// Whether `If-Match` is honoured (412 on a mismatch); a plain server may not.
    pub fn honor_if_match(&self, yes: bool) {
        self.state.lock().unwrap().honor_if_match = yes;
    }

    /// The requests served so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Stops accepting: later connections are refused. Joins the server's threads.
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

fn serve(conn: &mut TcpStream, path: &str, state: &Mutex<FileState>) {
    let Some(head) = read_head(conn) else { return };
    let mut parts = head.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let range = header(&head, "range").and_then(|r| {
        let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
        Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()? + 1))
    });
    let if_match = header(&head, "if-match").map(str::to_owned);
    let (content, e_tag, fail, honor) = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method: method.into(),
            range,
        });
        let fail = method == "GET" && s.fail_next > 0;
        if fail {
            s.fail_next -= 1;
        }
        (
            Arc::clone(&s.content),
            s.e_tag.clone(),
            fail,
            s.honor_if_match,
        )
    };
    if target != path {
        return respond(
            conn,
            "404 Not Found",
            &[("Content-Length".into(), "0".into())],
            b"",
        );
    }
    if fail {
        let body = b"overloaded";
        return respond(
            conn,
            "503 Service Unavailable",
            &[("Content-Length".into(), body.len().to_string())],
            body,
        );
    }
    if honor && if_match.as_deref().is_some_and(|m| m != e_tag) {
        return respond(
            conn,
            "412 Precondition Failed",
            &[("Content-Length".into(), "0".into())],
            b"",
        );
    }
    let total = content.len() as u64;
    let mut headers = vec![
        ("ETag".to_string(), e_tag),
        (
            "Last-Modified".into(),
            "Tue, 01 Dec 2026 12:00:00 GMT".into(),
        ),
        ("Accept-Ranges".into(), "bytes".into()),
    ];
    match (method, range) {
        ("HEAD", _) => {
            headers.push(("Content-Length".into(), total.to_string()));
            respond(conn, "200 OK", &headers, b"");
        }
        ("GET", Some((start, end))) if start < end && end <= total => {
            headers.push(("Content-Length".into(), (end - start).to_string()));
            headers.push((
                "Content-Range".into(),
                format!("bytes {start}-{}/{total}", end - 1),
            ));
            respond(
                conn,
                "206 Partial Content",
                &headers,
                &content[start as usize..end as usize],
            );
        }
        ("GET", None) => {
            headers.push(("Content-Length".into(), total.to_string()));
            respond(conn, "200 OK", &headers, &content);
        }
        _ => respond(
            conn,
            "416 Range Not Satisfiable",
            &[("Content-Length".into(), "0".into())],
            b"",
        ),
    }
}

/// What the fault proxy does with the next connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward both ways.
    Pass,
    /// Forward after waiting this long (a distant region).
    Delay(Duration),
    /// Close the connection at once, before any byte (a reset).
    Drop,
    /// Forward the request, then only this many bytes of the answer, then close.
    Cut(usize),
    /// Answer `503 Service Unavailable` without contacting the server.
    Unavailable,
}

struct ProxyState {
    /// Faults for the next connections, in order; `default` once they run out.
    queue: std::collections::VecDeque<Fault>,
    default: Fault,
    connections: usize,
}

/// A loopback TCP proxy in front of `upstream` that injects [`Fault`]s per connection.
pub struct FaultProxy {
    acceptor: Acceptor,
    state: Arc<Mutex<ProxyState>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream`, passing everything through.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let state = Arc::new(Mutex::new(ProxyState {
            queue: Default::default(),
            default: Fault::Pass,
            connections: 0,
        }));
        let st = Arc::clone(&state);
        let acceptor = Acceptor::start(move |conn| {
            let fault = {
                let mut s = st.lock().unwrap();
                s.connections += 1;
                let d = s.default;
                s.queue.pop_front().unwrap_or(d)
            };
            proxy(conn, upstream, fault);
        });
        FaultProxy { acceptor, state }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr
    }

    /// Applies `faults` to the next connections, one each.
    pub fn next(&self, faults: &[Fault]) {
        self.state
            .lock()
            .unwrap()
            .queue
            .extend(faults.iter().copied());
    }

    /// Applies `fault` to every connection without a queued one.
    pub fn always(&self, fault: Fault) {
        self.state.lock().unwrap().default = fault;
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.lock().unwrap().connections
    }
}

fn proxy(mut client: TcpStream, upstream: SocketAddr, fault: Fault) {
    match fault {
        Fault::Drop => {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Fault::Unavailable => {
            let _ = read_head(&mut client);
            let body = b"injected";
            return respond(
                &mut client,
                "503 Service Unavailable",
                &[("Content-Length".into(), body.len().to_string())],
                body,
            );
        }
        Fault::Delay(d) => std::thread::sleep(d),
        Fault::Pass | Fault::Cut(_) => {}
    }
    let Ok(mut server) = TcpStream::connect_timeout(&upstream, SOCKET_TIMEOUT) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = server.set_read_timeout(Some(SOCKET_TIMEOUT));
    // The servers here close after one answer, so: request up, answer down.
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(Shutdown::Write);
    });
    let limit = match fault {
        Fault::Cut(n) => n as u64,
        _ => u64::MAX,
    };
    let _ = std::io::copy(&mut (&mut server).take(limit), &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = up.join();
}

/// A moto S3 server on loopback, stopped (killed and reaped) on drop.
pub struct Moto {
    _server: Spawned,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The port.
    pub addr: SocketAddr,
}

/// Where a `moto_server` executable may be: `FFCV_MOTO_SERVER`, the CI's virtual
/// environment under `target/`, then `PATH`.
fn moto_candidates() -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os("FFCV_MOTO_SERVER") {
        c.push(PathBuf::from(p));
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    c.push(root.join("target/moto-venv/bin/moto_server"));
    if let Some(path) = std::env::var_os("PATH") {
        c.extend(std::env::split_paths(&path).map(|d| d.join("moto_server")));
    }
    c
}

impl Moto {
    /// Starts moto on a free loopback port and waits (at most 30 s) until it answers;
    /// `Err` says why it could not (the caller skips its test with that message).
    pub fn start() -> Result<Moto, String> {
        let server = Spawned::start(
            moto_candidates(),
            "moto_server not found (set FFCV_MOTO_SERVER, or pip install 'moto[server]')",
            |port| {
                vec![
                    "-H".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.to_string(),
                ]
            },
        )?;
        let addr = server.addr;
        Ok(Moto {
            _server: server,
            endpoint: format!("http://{addr}"),
            addr,
        })
    }

    /// Creates `bucket` (if new) and uploads `bytes` as `key`.
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let (code, body) = self
            .request_signed(&format!("/{bucket}"), b"")
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert!(code == 200 || code == 409, "create bucket: {code} {body}");
        let (code, body) = self
            .request_signed(&format!("/{bucket}/{key}"), bytes)
            .unwrap_or_else(|e| panic!("upload {bucket}/{key}: {e}"));
        assert_eq!(code, 200, "upload {bucket}/{key}: {body}");
    }

    /// `PUT path` with an AWS-style `Authorization` header: moto routes a request to S3
    /// by the service in its credential scope and does not check the signature.
    fn request_signed(&self, path: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
        let mut conn = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2))?;
        conn.set_read_timeout(Some(SOCKET_TIMEOUT))?;
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
             x-amz-date: 20261201T120000Z\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=0000\r\n\r\n",
            self.addr,
            body.len()
        );
        conn.write_all(head.as_bytes())?;
        conn.write_all(body)?;
        let mut out = Vec::new();
        conn.read_to_end(&mut out)?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok((code, text))
    }
}
