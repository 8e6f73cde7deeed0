//! A loopback TCP proxy that delays every byte the client sends by a fixed time, to model
//! a store in another region for `ffcv-bench --remote`: each HTTP request reaches the
//! server that much later, while the answers stream back at loopback speed, so latency
//! grows by the delay and bandwidth is unchanged.
//!
//! Written with std threads (three per connection: the client reader, the delayed writer
//! and the answer copier) because the benchmark needs nothing more and must not depend on
//! the test harness's proxy. It counts the requests it forwards (header ends seen in the
//! client's bytes: the range `GET`s and `HEAD`s it carries have no body).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::loopback::Loopback;

/// The proxy; stopped on drop (its listener closes and every connection is shut down).
pub struct DelayProxy {
    listener: Loopback,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`, the
    /// client's bytes `delay` late.
    pub fn start(upstream: SocketAddr, delay: Duration) -> io::Result<DelayProxy> {
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let listener = {
            let (requests, connections) = (Arc::clone(&requests), Arc::clone(&connections));
            Loopback::start("delay-proxy", move |client, open| {
                let Ok(server) = TcpStream::connect(upstream) else {
                    return;
                };
                connections.fetch_add(1, Ordering::Relaxed);
                open.track(&client);
                open.track(&server);
                let requests = Arc::clone(&requests);
                let _ = std::thread::Builder::new()
                    .name("delay-proxy-conn".into())
                    .spawn(move || relay(client, server, delay, &requests));
            })?
        };
        Ok(DelayProxy {
            listener,
            requests,
            connections,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.listener.addr()
    }

    /// Requests forwarded so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

/// Counts `\r\n\r\n` in a stream given in pieces (a match may span two pieces; matches
/// do not overlap): `matched` is how much of the pattern the bytes so far end with.
struct HeaderEnds {
    matched: usize,
}

impl HeaderEnds {
    fn count(&mut self, chunk: &[u8]) -> u64 {
        const END: &[u8; 4] = b"\r\n\r\n";
        let mut n = 0;
        for &b in chunk {
            self.matched = if b == END[self.matched] {
                self.matched + 1
            } else if b == b'\r' {
                // A mismatch can still start the pattern again.
                1
            } else {
                0
            };
            if self.matched == END.len() {
                n += 1;
                self.matched = 0;
            }
        }
        n
    }
}

/// One connection: the client's bytes go to the server `delay` after they arrived (a
/// writer thread releases them in order), the server's come straight back.
fn relay(client: TcpStream, server: TcpStream, delay: Duration, requests: &AtomicU64) {
    let (Ok(mut client_in), Ok(mut server_in), Ok(mut server_out)) =
        (client.try_clone(), server.try_clone(), server.try_clone())
    else {
        return;
    };
    let mut client_out = client;
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::Builder::new()
        .name("delay-proxy-out".into())
        .spawn(move || {
            for (due, bytes) in rx {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if server_out.write_all(&bytes).is_err() {
                    break;
                }
            }
            let _ = server_out.shutdown(Shutdown::Write);
        });
    let answers = std::thread::Builder::new()
        .name("delay-proxy-back".into())
        .spawn(move || {
            // Large reads: the answers are pages of megabytes, and this process shares
            // the cores with the loader it measures.
            let mut buf = vec![0u8; 1 << 20];
            loop {
                match server_in.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if client_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = client_out.shutdown(Shutdown::Write);
        });
    let mut ends = HeaderEnds { matched: 0 };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match client_in.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                requests.fetch_add(ends.count(&buf[..n]), Ordering::Relaxed);
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(tx);
    if let Ok(w) = writer {
        let _ = w.join();
    }
    if let Ok(a) = answers {
        let _ = a.join();
    }
    let _ = server.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn header_ends_are_counted_across_pieces() {
        let mut h = HeaderEnds { matched: 0 };
        assert_eq!(h.count(b"GET / HTTP/1.1\r\nA: b\r\n\r"), 0);
        assert_eq!(h.count(b"\nGET /x HTTP/1.1\r\n\r\n"), 2);
        assert_eq!(h.count(b"\r\n"), 0);
    }

    #[test]
    fn bytes_pass_both_ways_and_requests_are_counted() {
        // An echo server upstream: what the client sends comes back through the proxy.
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let up = upstream.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            while got.len() < 38 {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(&got).unwrap();
        });
        let proxy = DelayProxy::start(up, Duration::from_millis(5)).unwrap();
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        let sent = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        c.write_all(sent).unwrap();
        let mut back = vec![0u8; sent.len()];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back[..], &sent[..]);
        assert_eq!(proxy.requests(), 2);
        assert_eq!(proxy.connections(), 1);
        echo.join().unwrap();
    }
}
