//! Pipeline JIT (placeholder).
