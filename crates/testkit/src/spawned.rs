//! A test server program (moto, Azurite) run as a child process on a free loopback port:
//! found among candidate paths, started, waited for until it accepts connections, and
//! killed and reaped on drop. Shared by `servers` (moto) and `azurite`.

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
