//! A loopback HTTP/1.1 server of files with `HEAD` and ranged `GET` (keep-alive), for
//! `ffcv-bench --remote`: a store that costs nothing per request beyond the bytes, so
//! the rows behind it measure ffcv's remote path and the added latency, not the server.
//! (moto, the S3 row's server, copies the whole object for every range request: about
//! 0.2 s per GET on a 270 MB object, which caps it near 25 MB/s.)
//!
//! Hand-written with std because it is a benchmark fixture of about a hundred lines; each
//! answer is read from the file with `pread`, so nothing is held in memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::loopback::Loopback;

/// The server; stopped on drop.
pub struct RangeServer {
    listener: Loopback,
}

impl RangeServer {
    /// Serves each `(name, path)` as `/NAME` on a free loopback port.
    pub fn start(files: Vec<(String, PathBuf)>) -> io::Result<RangeServer> {
        let files = Arc::new(files);
        let listener = Loopback::start("range-server", move |conn, open| {
            open.track(&conn);
            let files = Arc::clone(&files);
            let _ = std::thread::Builder::new()
                .name("range-server-conn".into())
                .spawn(move || {
                    let shut = conn.try_clone();
                    let _ = serve(conn, &files);
                    // The listener keeps a clone to shut on drop; close the connection
                    // now, so the client sees its end.
                    if let Ok(s) = shut {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                });
        })?;
        Ok(RangeServer { listener })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.listener.addr()
    }
}

/// Answers requests on one connection until the client closes it.
fn serve(conn: TcpStream, files: &[(String, PathBuf)]) -> io::Result<()> {
    let mut out = conn.try_clone()?;
    let mut input = BufReader::new(conn);
    loop {
        let mut request = String::new();
        if input.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let mut range = None;
        loop {
            let mut line = String::new();
            if input.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.trim().eq_ignore_ascii_case("range")
            {
                range = parse_range(v.trim());
            }
        }
        let mut words = request.split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let found = files
            .iter()
            .find(|(name, _)| target.strip_prefix('/') == Some(name.as_str()));
        let Some((_, path)) = found else {
            out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let file = File::open(path)?;
        let meta = file.metadata()?;
        let total = meta.len();
        let e_tag = format!(
            "\"{total}-{}\"",
            meta.modified()
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos())
        );
        let common = format!(
            "ETag: {e_tag}\r\nLast-Modified: Tue, 01 Dec 2026 12:00:00 GMT\r\nAccept-Ranges: bytes\r\n"
        );
        match (method, range) {
            ("HEAD", _) => {
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\n{common}Content-Length: {total}\r\n\r\n"
                )?;
            }
            ("GET", Some((start, end))) if start < end && end <= total => {
                let mut body = vec![0u8; (end - start) as usize];
                file.read_exact_at(&mut body, start)?;
                write!(
                    out,
                    "HTTP/1.1 206 Partial Content\r\n{common}Content-Length: {}\r\n\
                     Content-Range: bytes {start}-{}/{total}\r\n\r\n",
                    end - start,
                    end - 1
                )?;
                out.write_all(&body)?;
            }
            _ => {
                out.write_all(b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\n\r\n")?;
            }
        }
    }
}

/// `bytes=A-B` as `A..B+1`.
fn parse_range(v: &str) -> Option<(u64, u64)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let (a, b) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    b.checked_add(1).map(|end| (a, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn head_and_ranged_gets_answer_the_files_bytes_on_one_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let server = RangeServer::start(vec![("f.bin".into(), path)]).unwrap();
        let mut c = TcpStream::connect(server.addr()).unwrap();
        c.write_all(b"GET /f.bin HTTP/1.1\r\nRange: bytes=10-19\r\n\r\nHEAD /f.bin HTTP/1.1\r\n\r\nGET /g HTTP/1.1\r\n\r\n")
            .unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
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
        assert_eq!(parse_range("bytes=5-4"), Some((5, 5)));
        assert_eq!(parse_range("bytes=-4"), None);
    }
}
