//! Paths of the reference files the tests read: the `.beton` files FFCV 1.0.2 wrote and
//! the orders numpy and torch produced, all under the workspace's `tests/fixtures/`.

use std::path::PathBuf;

/// The workspace's `tests/fixtures` directory.
pub fn dir() -> PathBuf {
    // This crate is `crates/testkit`; the fixtures are two levels up.
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures"))
}

/// A file FFCV 1.0.2 wrote (`tests/fixtures/ffcv-1.0.2/NAME`, e.g. `scalars.beton`).
pub fn ffcv_102(name: &str) -> PathBuf {
    dir().join("ffcv-1.0.2").join(name)
}
