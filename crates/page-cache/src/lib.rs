//! Page caches (placeholder).
