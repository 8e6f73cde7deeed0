//! A test server program (moto, Azurite) run as a child process on a free loopback port:
//! found among candidate paths, started, waited for until it accepts connections, and
//! killed and reaped on drop; and one HTTP exchange with it ([`exchange`]). Shared by
//! `servers` (moto) and `azurite`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server program; stopped on drop.
pub struct Spawned {
    child: Child,
    /// Where it listens (`127.0.0.1:PORT`).
    pub addr: SocketAddr,
}

impl Spawned {
    /// Starts the first of `candidates` that is a file, with the arguments `args(port)`
    /// gives for a free loopback port, and waits until it accepts connections. `Err`
    /// says why it could not (`missing` when no candidate exists); callers skip their
    /// test with that message.
    pub fn start(
        candidates: Vec<PathBuf>,
        missing: &str,
        args: impl FnOnce(u16) -> Vec<String>,
    ) -> Result<Spawned, String> {
        let exe = candidates
            .into_iter()
            .find(|p| p.is_file())
            .ok_or_else(|| missing.to_owned())?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new(&exe)
            .args(args(port))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // Made before waiting, so that an early return still reaps the child.
        let mut spawned = Spawned { child, addr };
        let t0 = Instant::now();
        while t0.elapsed() < START_TIMEOUT {
            if let Ok(Some(status)) = spawned.child.try_wait() {
                return Err(format!("{} exited at start: {status}", exe.display()));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(spawned);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "{} did not answer within {} s",
            exe.display(),
            START_TIMEOUT.as_secs()
        ))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one HTTP/1.1 request (`head`, the request line and headers ending in a blank
/// line, with `Connection: close`; then `body`) to `addr` and reads the whole answer,
/// waiting up to `answer_timeout` on the socket. Returns the status code (0 when the
/// answer has none) and the answer as text.
pub(crate) fn exchange(
    addr: &SocketAddr,
    answer_timeout: Duration,
    head: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut conn = TcpStream::connect_timeout(addr, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(answer_timeout))?;
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
