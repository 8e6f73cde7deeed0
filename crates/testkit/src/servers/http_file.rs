//! The loopback HTTP/1.1 file server: named files at `/data/NAME`, held in memory or read
//! from disk for each answer, with `HEAD`, ranged `GET`, an ETag per content version and
//! `If-Match`, and the knobs the remote-source tests turn (answer the next GETs with 503,
//! ignore `If-Match`, replace a file, stop, the requests seen).
//!
//! One answer per connection unless keep-alive is asked for: the fault proxy's faults
//! are per connection, so the tests need each request on a connection of its own; the
//! remote benchmark asks for keep-alive, so that its rows measure ffcv's remote path and
//! not the cost of new connections.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::acceptor::Acceptor;

/// A request the HTTP server saw: method and the `Range` header, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The byte range asked for (`start..end`).
    pub range: Option<(u64, u64)>,
}

/// Where a served file's bytes come from.
#[derive(Debug, Clone)]
pub enum FileBody {
    /// These bytes, held by the server; its ETag changes with each
    /// [`HttpFileServer::replace`].
    Memory(Vec<u8>),
    /// This file, read (`pread`) for each answer, so that files of hundreds of megabytes
    /// cost no memory; its ETag follows the file's length and modification time.
    Disk(PathBuf),
}

/// A file as the server holds it.
enum Stored {
    Memory { bytes: Arc<Vec<u8>>, version: usize },
    Disk(PathBuf),
}

struct State {
    /// `(name, file)`, served as `/data/NAME`.
    files: Vec<(String, Stored)>,
    /// The version the next replaced file gets (its ETag is `"vN"`).
    next_version: usize,
    /// Answer this many next GETs with 503 before serving again.
    fail_next: usize,
    /// Whether `If-Match` is honoured (a plain server may ignore it).
    honor_if_match: bool,
    seen: Vec<Seen>,
}

/// The files and options of an [`HttpFileServer`] before it starts.
#[derive(Debug, Default)]
pub struct HttpFileServerBuilder {
    files: Vec<(String, FileBody)>,
    keep_alive: bool,
}

impl HttpFileServerBuilder {
    /// Serves `body` as `/data/NAME`.
    pub fn file(mut self, name: &str, body: FileBody) -> Self {
        self.files.push((name.to_owned(), body));
        self
    }

    /// Whether a connection stays open for the client's next request (HTTP/1.1
    /// keep-alive); without it every answer closes its connection. Off by default.
    pub fn keep_alive(mut self, yes: bool) -> Self {
        self.keep_alive = yes;
        self
    }

    /// Starts the server on a free loopback port.
    pub fn start(self) -> io::Result<HttpFileServer> {
        let Some(first) = self.files.first().map(|(name, _)| name.clone()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an HTTP file server needs at least one file",
            ));
        };
        let files = self
            .files
            .into_iter()
            .map(|(name, body)| {
                let stored = match body {
                    FileBody::Memory(bytes) => Stored::Memory {
                        bytes: Arc::new(bytes),
                        version: 1,
                    },
                    FileBody::Disk(path) => Stored::Disk(path),
                };
                (name, stored)
            })
            .collect();
        let state = Arc::new(Mutex::new(State {
            files,
            next_version: 2,
            fail_next: 0,
            honor_if_match: true,
            seen: Vec::new(),
        }));
        let keep_alive = self.keep_alive;
        let st = Arc::clone(&state);
        let acceptor =
            Acceptor::start("http-file-server", move |conn| serve(conn, &st, keep_alive))?;
        Ok(HttpFileServer {
            acceptor,
            state,
            first,
        })
    }
}

/// A loopback HTTP/1.1 server of named files at `/data/NAME`, with `HEAD`, ranged
/// `GET`, an ETag per content version and `If-Match`; stopped on drop.
pub struct HttpFileServer {
    acceptor: Acceptor,
    state: Arc<Mutex<State>>,
    /// The first file's name: the one [`url`](Self::url) and [`replace`](Self::replace)
    /// mean.
    first: String,
}

impl HttpFileServer {
    /// Serves `content` as `/data/NAME`, one answer per connection.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound (a test cannot run without one).
    pub fn start(name: &str, content: Vec<u8>) -> HttpFileServer {
        HttpFileServer::builder()
            .file(name, FileBody::Memory(content))
            .start()
            .expect("start the HTTP file server on loopback")
    }

    /// A server of several files, or of files on disk, or with keep-alive.
    pub fn builder() -> HttpFileServerBuilder {
        HttpFileServerBuilder::default()
    }

    /// The first file's URL.
    pub fn url(&self) -> String {
        self.url_of(&self.first)
    }

    /// The URL of the file `name`.
    pub fn url_of(&self, name: &str) -> String {
        format!("http://{}/data/{name}", self.acceptor.addr())
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr()
    }

    /// The URL of the first file reached through a proxy at `proxy`.
    pub fn url_via(&self, proxy: SocketAddr) -> String {
        self.url_of_via(&self.first, proxy)
    }

    /// The URL of the file `name` reached through a proxy at `proxy`.
    pub fn url_of_via(&self, name: &str, proxy: SocketAddr) -> String {
        format!("http://{proxy}/data/{name}")
    }

    /// Replaces the first file with `content`, held in memory with a new ETag, as an
    /// upload over the same name would.
    pub fn replace(&self, content: Vec<u8>) {
        let mut s = self.state.lock().unwrap();
        let version = s.next_version;
        s.next_version += 1;
        let first = s
            .files
            .iter_mut()
            .find(|(name, _)| *name == self.first)
            .expect("the first file is never removed");
        first.1 = Stored::Memory {
            bytes: Arc::new(content),
            version,
        };
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

    /// Stops accepting: later connections are refused. Answers being written are
    /// finished; then every connection closes and the server's threads are joined.
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

/// Longest request head read; a longer one ends the connection.
const MAX_HEAD: usize = 16 * 1024;

/// Reads an HTTP request head (up to the blank line); `None` on EOF, garbage or a head
/// longer than [`MAX_HEAD`].
pub(super) fn read_head(input: &mut impl BufRead) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let limit = (MAX_HEAD - head.len()) as u64;
        if Read::take(&mut *input, limit).read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" || line == "\n" {
            return Some(head);
        }
        if head.len() >= MAX_HEAD {
            return None;
        }
    }
}

/// The value of the header `name` in `head` (case-insensitive).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `bytes=A-B` as `A..B+1`.
fn parse_range(v: &str) -> Option<(u64, u64)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let (a, b) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    b.checked_add(1).map(|end| (a, end))
}

/// Writes an answer's head: the status line, `Connection: close` when `close`,
/// `headers` (each line ending in CRLF) and a `Content-Length` of `length`.
fn respond_head(
    out: &mut impl Write,
    status: &str,
    headers: &str,
    length: u64,
    close: bool,
) -> io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    write!(
        out,
        "HTTP/1.1 {status}\r\n{connection}{headers}Content-Length: {length}\r\n\r\n"
    )
}

/// Writes one answer: its head (see [`respond_head`]) and `body`.
pub(super) fn respond(
    out: &mut impl Write,
    status: &str,
    headers: &str,
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    respond_head(out, status, headers, body.len() as u64, close)?;
    out.write_all(body)?;
    out.flush()
}

/// Answers requests on one connection: one, or until the client closes it when
/// `keep_alive` (or asks `Connection: close`).
fn serve(conn: TcpStream, state: &Mutex<State>, keep_alive: bool) {
    if keep_alive {
        // A kept-alive connection may idle between a benchmark's epochs; stopping the
        // server still ends it.
        let _ = conn.set_read_timeout(None);
    }
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut input = BufReader::new(conn);
    while let Some(head) = read_head(&mut input) {
        let close = !keep_alive
            || header(&head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if answer(&mut out, &head, state, close).is_err() || close {
            return;
        }
    }
}

/// The bytes of a file as one answer sees them.
enum Content {
    Memory(Arc<Vec<u8>>),
    Disk(File),
}

fn answer(out: &mut TcpStream, head: &str, state: &Mutex<State>, close: bool) -> io::Result<()> {
    let mut parts = head.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let range = header(head, "range").and_then(parse_range);
    let (file, fail, honor) = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method: method.into(),
            range,
        });
        let fail = method == "GET" && s.fail_next > 0;
        if fail {
            s.fail_next -= 1;
        }
        let file = s
            .files
            .iter()
            .find(|(name, _)| target.strip_prefix("/data/") == Some(name.as_str()))
            .map(|(_, stored)| match stored {
                Stored::Memory { bytes, version } => {
                    Ok((Arc::clone(bytes), format!("\"v{version}\"")))
                }
                Stored::Disk(path) => Err(path.clone()),
            });
        (file, fail, s.honor_if_match)
    };
    let Some(file) = file else {
        return respond(out, "404 Not Found", "", b"", close);
    };
    if fail {
        return respond(out, "503 Service Unavailable", "", b"overloaded", close);
    }
    let (content, total, e_tag) = match file {
        Ok((bytes, e_tag)) => {
            let total = bytes.len() as u64;
            (Content::Memory(bytes), total, e_tag)
        }
        Err(path) => match open_disk(&path) {
            Ok((file, total, e_tag)) => (Content::Disk(file), total, e_tag),
            Err(e) => {
                let why = format!("{}: {e}", path.display());
                return respond(out, "500 Internal Server Error", "", why.as_bytes(), close);
            }
        },
    };
    if honor && header(head, "if-match").is_some_and(|m| m != e_tag) {
        return respond(out, "412 Precondition Failed", "", b"", close);
    }
    let common = format!(
        "ETag: {e_tag}\r\nLast-Modified: Tue, 01 Dec 2026 12:00:00 GMT\r\nAccept-Ranges: bytes\r\n"
    );
    let (status, headers, span) = match (method, range) {
        ("HEAD", _) => {
            // A HEAD answer has the length of the whole file and no body.
            respond_head(out, "200 OK", &common, total, close)?;
            return out.flush();
        }
        ("GET", Some((start, end))) if start < end && end <= total => (
            "206 Partial Content",
            format!(
                "{common}Content-Range: bytes {start}-{}/{total}\r\n",
                end - 1
            ),
            start..end,
        ),
        ("GET", None) => ("200 OK", common, 0..total),
        _ => return respond(out, "416 Range Not Satisfiable", "", b"", close),
    };
    match content {
        Content::Memory(bytes) => respond(
            out,
            status,
            &headers,
            &bytes[span.start as usize..span.end as usize],
            close,
        ),
        Content::Disk(file) => {
            let mut body = vec![0u8; (span.end - span.start) as usize];
            file.read_exact_at(&mut body, span.start)?;
            respond(out, status, &headers, &body, close)
        }
    }
}

/// Opens a file served from disk: the file, its length and its ETag.
fn open_disk(path: &std::path::Path) -> io::Result<(File, u64, String)> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let nanos = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let total = meta.len();
    Ok((file, total, format!("\"{total}-{nanos}\"")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::Shutdown;

    /// Sends `requests` on one connection, closes its write side and returns all the
    /// server answered.
    fn exchange(addr: SocketAddr, requests: &[u8]) -> Vec<u8> {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(requests).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        all
    }

    #[test]
    fn a_file_on_disk_answers_head_and_ranged_gets_on_one_kept_alive_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let server = HttpFileServer::builder()
            .file("f.bin", FileBody::Disk(path))
            .keep_alive(true)
            .start()
            .unwrap();
        assert!(server.url().ends_with("/data/f.bin"));
        let all = exchange(
            server.addr(),
            b"GET /data/f.bin HTTP/1.1\r\nRange: bytes=10-19\r\n\r\n\
              HEAD /data/f.bin HTTP/1.1\r\n\r\nGET /g HTTP/1.1\r\n\r\n",
        );
        let text = String::from_utf8_lossy(&all);
        assert!(
            text.starts_with("HTTP/1.1 206 Partial Content\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Content-Range: bytes 10-19/1000\r\n"),
            "{text}"
        );
        let body_at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(&all[body_at..body_at + 10], &content[10..20]);
        assert!(text.contains("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 1000\r\n"), "{text}");
        assert!(
            text.ends_with("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
            "{text}"
        );
        assert_eq!(server.seen().len(), 3);
    }

    #[test]
    fn without_keep_alive_each_connection_gets_one_answer() {
        let server = HttpFileServer::start("m.bin", b"0123456789".to_vec());
        let all = exchange(
            server.addr(),
            b"GET /data/m.bin HTTP/1.1\r\nRange: bytes=2-4\r\n\r\nGET /data/m.bin HTTP/1.1\r\n\r\n",
        );
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 206 Partial Content\r\nConnection: close\r\n"));
        assert!(text.ends_with("\r\n\r\n234"), "{text}");
        assert_eq!(server.seen().len(), 1);
    }

    #[test]
    fn the_fault_knobs_answer_503_then_412_after_a_replace() {
        let server = HttpFileServer::start("m.bin", b"first".to_vec());
        let get = b"GET /data/m.bin HTTP/1.1\r\nIf-Match: \"v1\"\r\n\r\n";
        server.fail_next(1);
        let failed = exchange(server.addr(), get);
        assert!(failed.starts_with(b"HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(exchange(server.addr(), get).ends_with(b"\r\n\r\nfirst"));
        server.replace(b"second".to_vec());
        let refused = exchange(server.addr(), get);
        assert!(refused.starts_with(b"HTTP/1.1 412 Precondition Failed\r\n"));
        server.honor_if_match(false);
        assert!(exchange(server.addr(), get).ends_with(b"\r\n\r\nsecond"));
        assert_eq!(
            server.seen()[0],
            Seen {
                method: "GET".into(),
                range: None
            }
        );
    }

    #[test]
    fn a_stopped_server_refuses_connections() {
        let mut server = HttpFileServer::start("m.bin", b"x".to_vec());
        let addr = server.addr();
        server.stop();
        assert!(TcpStream::connect(addr).is_err());
    }

    #[test]
    fn ranges_parse_as_half_open_spans() {
        assert_eq!(parse_range("bytes=5-4"), Some((5, 5)));
        assert_eq!(parse_range("bytes=0-9"), Some((0, 10)));
        assert_eq!(parse_range("bytes=-4"), None);
        assert_eq!(parse_range("bytes=0-18446744073709551615"), None);
    }
}
