//! `ffcv order` (placeholder until the traversal engineer's implementation lands).

use std::path::PathBuf;

/// Arguments of `ffcv order`.
#[derive(clap::Args, Debug)]
pub struct OrderArgs {
    /// The .beton file.
    pub file: PathBuf,
}

/// Runs `ffcv order`.
pub fn run(_args: &OrderArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Err("`ffcv order` is not built yet".into())
}
