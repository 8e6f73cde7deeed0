//! The ffcv facade (placeholder).
