//! The `ffcv` command line (placeholder).
fn main() {}
