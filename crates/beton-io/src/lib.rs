//! The FFCV `.beton` format (placeholder; filled by the foundation issue).
