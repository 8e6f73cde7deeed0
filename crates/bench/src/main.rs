//! Bench runner (placeholder).
fn main() {}
