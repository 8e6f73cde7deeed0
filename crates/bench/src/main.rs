//! The benchmark runner behind `cargo xtask bench --small` (placeholder main; the framework is being built).

mod report;

fn main() {
    let _ = report::Row::default();
}
