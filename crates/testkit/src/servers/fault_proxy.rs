//! The loopback TCP proxy in front of a server, with one [`Fault`] per connection: pass,
//! wait before connecting, drop, cut the answer short, answer 503 itself, or hold every
//! byte the client sends for a fixed time (a store in another region, for the remote
//! benchmark). It counts the connections it accepts and the requests it forwards.
//!
//! Three threads per connection (this one copies the answers back, one reads the
//! client's bytes, one writes them to the server when due), so that a held request does
//! not hold up the answers already on their way.

use std::collections::VecDeque;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::SOCKET_TIMEOUT;
use super::acceptor::Acceptor;
use super::http_file::{read_head, respond};

/// What the fault proxy does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward both ways.
    Pass,
    /// Forward after waiting this long before connecting to the server (a slow start).
    Delay(Duration),
    /// Close the connection at once, before any byte (a reset).
    Drop,
    /// Forward the request, then only this many bytes of the answer, then close.
    Cut(usize),
    /// Answer `503 Service Unavailable` without contacting the server.
    Unavailable,
    /// Forward every byte the client sends this long after it arrived, and the answers at
    /// once: each request reaches the server that much later, bandwidth is unchanged (a
    /// store in another region). Such a connection may stay idle without limit (a
    /// benchmark's client keeps its connections between epochs); stopping the proxy ends
    /// it.
    Latency(Duration),
}

struct ProxyState {
    /// Faults for the next connections, in order; `default` once they run out.
    queue: VecDeque<Fault>,
    default: Fault,
}

/// A loopback TCP proxy in front of `upstream` that applies a [`Fault`] to each
/// connection; stopped on drop.
pub struct FaultProxy {
    acceptor: Acceptor,
    state: Arc<Mutex<ProxyState>>,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicU64>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream`, passing everything through.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound (a test cannot run without one).
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        FaultProxy::start_with(upstream, Fault::Pass).expect("start the fault proxy on loopback")
    }

    /// Starts a proxy to `upstream` that applies `default` to every connection without a
    /// queued fault ([`next`](Self::next)).
    pub fn start_with(upstream: SocketAddr, default: Fault) -> io::Result<FaultProxy> {
        let state = Arc::new(Mutex::new(ProxyState {
            queue: VecDeque::new(),
            default,
        }));
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let acceptor = {
            let (st, connections, requests) = (
                Arc::clone(&state),
                Arc::clone(&connections),
                Arc::clone(&requests),
            );
            Acceptor::start("fault-proxy", move |conn| {
                connections.fetch_add(1, Ordering::SeqCst);
                let fault = {
                    let mut s = st.lock().unwrap();
                    let d = s.default;
                    s.queue.pop_front().unwrap_or(d)
                };
                proxy(conn, upstream, fault, &requests);
            })?
        };
        Ok(FaultProxy {
            acceptor,
            state,
            connections,
            requests,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr()
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
        self.connections.load(Ordering::SeqCst)
    }

    /// Requests seen so far: the ends of request heads (`\r\n\r\n`) in the clients'
    /// bytes, which counts the `GET`s and `HEAD`s of the remote sources exactly (they
    /// have no body), a 503 answered by the proxy included.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// One connection, under `fault`.
fn proxy(client: TcpStream, upstream: SocketAddr, fault: Fault, requests: &Arc<AtomicU64>) {
    let latency = match fault {
        // Returning closes the connection (the acceptor shuts it).
        Fault::Drop => return,
        Fault::Unavailable => {
            if read_head(&mut BufReader::new(&client)).is_some() {
                requests.fetch_add(1, Ordering::SeqCst);
            }
            let _ = respond(
                &mut &client,
                "503 Service Unavailable",
                "",
                b"injected",
                true,
            );
            return;
        }
        Fault::Delay(d) => {
            std::thread::sleep(d);
            Duration::ZERO
        }
        Fault::Latency(d) => d,
        Fault::Pass | Fault::Cut(_) => Duration::ZERO,
    };
    let Ok(server) = TcpStream::connect_timeout(&upstream, SOCKET_TIMEOUT) else {
        return;
    };
    if matches!(fault, Fault::Latency(_)) {
        // Kept-alive connections may idle between a benchmark's epochs; the acceptor's
        // stop still ends them.
        let _ = client.set_read_timeout(None);
    } else {
        let _ = server.set_read_timeout(Some(SOCKET_TIMEOUT));
    }
    let (Ok(client_in), Ok(server_out)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = {
        let requests = Arc::clone(requests);
        std::thread::Builder::new()
            .name("fault-proxy-up".into())
            .spawn(move || forward_requests(client_in, server_out, latency, &requests))
    };
    let limit = match fault {
        Fault::Cut(n) => n as u64,
        _ => u64::MAX,
    };
    copy_answers(&server, &client, limit);
    // The answers have ended (or were cut): so has the connection, both ways, which also
    // ends the thread reading the client.
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

/// Copies the server's bytes to the client, at most `limit` of them.
fn copy_answers(mut server: &TcpStream, mut client: &TcpStream, limit: u64) {
    // Large reads: the benchmark's answers are pages of megabytes, and its proxy shares
    // the cores with the loader it measures.
    let mut buf = vec![0u8; 1 << 20];
    let mut left = limit;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match server.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if client.write_all(&buf[..n]).is_err() {
                    break;
                }
                left -= n as u64;
            }
        }
    }
    let _ = client.flush();
}

/// The client's bytes to the server, each `latency` after it arrived (a writer thread
/// releases them in order), counting request heads; then the server's write side is
/// shut, as the client's was.
fn forward_requests(
    mut client: TcpStream,
    mut server: TcpStream,
    latency: Duration,
    requests: &AtomicU64,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::Builder::new()
        .name("fault-proxy-out".into())
        .spawn(move || {
            for (due, bytes) in rx {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if server.write_all(&bytes).is_err() {
                    break;
                }
            }
            let _ = server.shutdown(Shutdown::Write);
        });
    let mut ends = HeaderEnds::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                requests.fetch_add(ends.count(&buf[..n]), Ordering::SeqCst);
                if tx
                    .send((Instant::now() + latency, buf[..n].to_vec()))
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
}

/// Counts `\r\n\r\n` in a stream given in pieces (a match may span two pieces; matches
/// do not overlap): `matched` is how much of the pattern the bytes so far end with.
#[derive(Default)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::HttpFileServer;
    use std::net::TcpListener;

    #[test]
    fn header_ends_are_counted_across_pieces() {
        let mut h = HeaderEnds::default();
        assert_eq!(h.count(b"GET / HTTP/1.1\r\nA: b\r\n\r"), 0);
        assert_eq!(h.count(b"\nGET /x HTTP/1.1\r\n\r\n"), 2);
        assert_eq!(h.count(b"\r\n"), 0);
    }

    #[test]
    fn held_bytes_pass_both_ways_and_requests_are_counted() {
        // An echo server upstream: what the client sends comes back through the proxy.
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let up = upstream.local_addr().unwrap();
        let sent = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let echo = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            while got.len() < sent.len() {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(&got).unwrap();
        });
        let proxy = FaultProxy::start_with(up, Fault::Latency(Duration::from_millis(5))).unwrap();
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.write_all(sent).unwrap();
        let mut back = vec![0u8; sent.len()];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back[..], &sent[..]);
        assert_eq!(proxy.requests(), 2);
        assert_eq!(proxy.connections(), 1);
        echo.join().unwrap();
    }

    /// One GET of the whole file through `proxy`: all bytes it answered.
    fn get(proxy: &FaultProxy) -> Vec<u8> {
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        // A dropped connection may refuse the request: what came back tells.
        let _ = c.write_all(b"GET /data/f HTTP/1.1\r\n\r\n");
        let mut all = Vec::new();
        let _ = c.read_to_end(&mut all);
        all
    }

    #[test]
    fn each_connection_gets_the_next_queued_fault() {
        let server = HttpFileServer::start("f", vec![7u8; 1000]);
        let proxy = FaultProxy::start(server.addr());
        proxy.next(&[
            Fault::Drop,
            Fault::Cut(20),
            Fault::Unavailable,
            Fault::Delay(Duration::from_millis(1)),
        ]);
        assert!(get(&proxy).is_empty());
        assert_eq!(get(&proxy).len(), 20);
        assert!(get(&proxy).starts_with(b"HTTP/1.1 503 Service Unavailable\r\n"));
        let whole = get(&proxy);
        assert!(whole.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(whole.ends_with(&[7u8; 1000]));
        assert!(
            get(&proxy).ends_with(&[7u8; 1000]),
            "Pass once the queue is empty"
        );
        assert_eq!(proxy.connections(), 5);
        // The dropped connection never sent its request on; the proxy's own 503 counts.
        assert_eq!(proxy.requests(), 4);
        assert_eq!(server.seen().len(), 3);
    }

    #[test]
    fn dropping_the_proxy_ends_an_idle_kept_alive_connection() {
        let server = HttpFileServer::builder()
            .file("f", crate::servers::FileBody::Memory(b"abc".to_vec()))
            .keep_alive(true)
            .start()
            .unwrap();
        let proxy = FaultProxy::start_with(server.addr(), Fault::Latency(Duration::ZERO)).unwrap();
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.write_all(b"GET /data/f HTTP/1.1\r\n\r\n").unwrap();
        let mut head = [0u8; 17];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200 OK\r\n");
        drop(proxy);
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert!(
            rest.ends_with(b"\r\n\r\nabc"),
            "the answer is finished first"
        );
    }
}
