//! Real servers on loopback for the remote-source tests and the remote benchmark
//! (`ffcv-bench --remote`), one implementation of each:
//!
//! - [`HttpFileServer`]: a plain HTTP/1.1 file server with range requests, of files in
//!   memory or on disk, one answer per connection or kept alive, with the tests' fault
//!   knobs (`http_file`);
//! - [`FaultProxy`]: a TCP proxy that applies a [`Fault`] per connection (delay, drop,
//!   cut, answer 503, or hold every request for a fixed latency) and counts connections
//!   and requests (`fault_proxy`);
//! - [`Moto`]: the moto S3 server, started if it is installed (`moto`).
//!
//! Written with std threads, as test fixtures of a few hundred lines. Every thread is
//! joined on drop and every connection ended, and the sockets of one-answer connections
//! have timeouts, so a test that goes wrong fails instead of hanging.

use std::time::Duration;

mod acceptor;
mod fault_proxy;
mod http_file;
mod moto;

pub use crate::spawned::Spawned;
pub use fault_proxy::{Fault, FaultProxy};
pub use http_file::{FileBody, HttpFileServer, HttpFileServerBuilder, Seen};
pub use moto::Moto;

/// How long a server or proxy waits on one socket before giving up on it.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(10);
