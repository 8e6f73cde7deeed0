//! The accept loop every loopback server and proxy here shares: a listener on a free
//! loopback port, one thread per connection, and a stop that refuses new connections,
//! ends idle ones and joins every thread, so that no connection thread outlives its
//! server (a test that goes wrong fails instead of hanging, and a benchmark's client
//! keeping idle keep-alive connections does not hold its server open).

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::SOCKET_TIMEOUT;

/// A connection's thread and a clone of its socket, kept so that stopping can end it.
type Worker = (JoinHandle<()>, TcpStream);

/// Shuts a connection down both ways when dropped, also when its handler panics: the
/// acceptor's clone of the socket would otherwise keep it open and its client waiting.
struct EndOnDrop(Option<TcpStream>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Accepts connections on a loopback listener until stopped; stops on drop.
pub(crate) struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    workers: Arc<Mutex<Vec<Worker>>>,
    thread: Option<JoinHandle<()>>,
}

/// The workers' list, also after a panicking connection thread poisoned it (the other
/// connections must still be stopped).
fn lock(workers: &Mutex<Vec<Worker>>) -> MutexGuard<'_, Vec<Worker>> {
    workers.lock().unwrap_or_else(|e| e.into_inner())
}

impl Acceptor {
    /// Listens on a free loopback port and runs `handle` on each accepted connection in a
    /// thread of its own (named `NAME-conn`), with read and write timeouts set. When
    /// `handle` returns, the connection is shut down both ways, so the client sees its
    /// end even while the acceptor still holds a clone of the socket.
    pub(crate) fn start(
        name: &str,
        handle: impl Fn(TcpStream) + Send + Sync + 'static,
    ) -> io::Result<Acceptor> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Arc<Mutex<Vec<Worker>>> = Arc::default();
        let handle = Arc::new(handle);
        let conn_name = format!("{name}-conn");
        let thread = {
            let (stop, workers) = (Arc::clone(&stop), Arc::clone(&workers));
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(conn) = conn else { continue };
                        let _ = conn.set_read_timeout(Some(SOCKET_TIMEOUT));
                        let _ = conn.set_write_timeout(Some(SOCKET_TIMEOUT));
                        let Ok(kept) = conn.try_clone() else { continue };
                        let h = Arc::clone(&handle);
                        let spawned =
                            std::thread::Builder::new()
                                .name(conn_name.clone())
                                .spawn(move || {
                                    let _end = EndOnDrop(conn.try_clone().ok());
                                    h(conn);
                                });
                        let mut list = lock(&workers);
                        // Finished connections leave the list here, so that a long run
                        // of short connections does not pile up open descriptors.
                        list.retain(|(w, _)| !w.is_finished());
                        if let Ok(worker) = spawned {
                            list.push((worker, kept));
                        }
                    }
                    // The listener closes here: later connections are refused.
                })?
        };
        Ok(Acceptor {
            addr,
            stop,
            workers,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting (later connections are refused), ends the open connections and
    /// joins every thread. Each connection's read side is shut, not both: an answer
    /// being written still reaches its client, and the connection ends at its next read
    /// (an idle keep-alive connection at once).
    pub(crate) fn stop(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            // Wakes the blocking accept, which then sees `stop`.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let workers = std::mem::take(&mut *lock(&self.workers));
        for (_, socket) in &workers {
            let _ = socket.shutdown(Shutdown::Read);
        }
        for (worker, _) in workers {
            let _ = worker.join();
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}
