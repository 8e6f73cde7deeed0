//! Cross-crate integration tests, one binary: files written by one crate read by the
//! others (orders, the loader).

mod synthetic_files_through_the_loader;
mod written_files_feed_orders;
