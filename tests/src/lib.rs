//! Cross-crate integration tests live in `tests/tests/`; this library only locates the fixtures.
