//! Sample orders (placeholder).
