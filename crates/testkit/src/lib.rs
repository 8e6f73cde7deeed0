//! What the workspace's tests share, in one crate (`publish = false`) that no library or
//! front end depends on, so that no test includes another crate's files by path. It is a
//! dev-dependency of the crates it tests and a normal dependency only of the benchmark
//! tool (`ffcv-bench`), whose remote benchmark runs the same servers:
//!
//! - [`servers`]: a loopback HTTP/1.1 file server with range requests, a TCP fault proxy
//!   and the moto S3 server; [`azurite`]: the Azure Storage emulator. Both start real
//!   processes or sockets on loopback and stop them on drop.
//! - [`fixtures`]: where the FFCV 1.0.2 reference files are.
//! - [`image_variants`]: the test image folder (photographs and every odd format).
//! - [`corrupt`]: damaged copies of a valid `.beton` file, each with the error the reader
//!   must report.
//! - [`own_process`]: runs one test alone in a child process, for tests that measure the
//!   whole process (its threads, its peak memory, a global tracing subscriber).
//!
//! Each crate's integration tests are one binary (`tests/it/main.rs`) that depends on this
//! crate:
//!
//! ```
//! let scalars = ffcv_testkit::fixtures::ffcv_102("scalars.beton");
//! assert!(scalars.ends_with("tests/fixtures/ffcv-1.0.2/scalars.beton"));
//! ```

pub mod azurite;
pub mod corrupt;
pub mod fixtures;
pub mod image_variants;
mod isolate;
pub mod servers;
mod spawned;

pub use isolate::own_process;
