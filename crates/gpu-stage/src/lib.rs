//! GPU staging (placeholder).
