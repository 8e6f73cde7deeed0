//! The accept loop the loopback fixtures of `ffcv-bench --remote` (the range server and
//! the delay proxy) share: a listener on a free loopback port whose acceptor thread hands
//! each connection to a handler, and which on drop stops accepting, joins that thread and
//! shuts every socket the handler registered, so no connection thread outlives it.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Sockets to shut when the listener is dropped (clones of the connections' streams).
#[derive(Clone, Default)]
pub struct OpenSockets(Arc<Mutex<Vec<TcpStream>>>);

impl OpenSockets {
    /// Registers a clone of `stream`, so that dropping the listener ends its connection.
    pub fn track(&self, stream: &TcpStream) {
        if let Ok(s) = stream.try_clone() {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }

    fn shut_all(&self) {
        for s in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// A listening loopback socket and its acceptor thread; stopped on drop.
pub struct Loopback {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    open: OpenSockets,
    acceptor: Option<JoinHandle<()>>,
}

impl Loopback {
    /// Listens on a free loopback port; the thread `name` calls `handle` with each
    /// accepted connection (the handler starts its own threads and registers their
    /// sockets with [`OpenSockets::track`]).
    pub fn start(
        name: &str,
        mut handle: impl FnMut(TcpStream, &OpenSockets) + Send + 'static,
    ) -> io::Result<Loopback> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let open = OpenSockets::default();
        let acceptor = {
            let (stop, open) = (Arc::clone(&stop), open.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Ok(conn) = conn {
                            handle(conn, &open);
                        }
                    }
                })?
        };
        Ok(Loopback {
            addr,
            stop,
            open,
            acceptor: Some(acceptor),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        // Ends every connection: their reads and writes fail once the sockets are shut.
        self.open.shut_all();
    }
}
