//! One module per `ffcv` subcommand; each exposes its clap `Args` and a `run` function.

pub mod bench;
pub mod doctor;
pub mod dump;
pub mod inspect;
pub mod order;
pub mod write;
pub mod write_images;
pub mod write_images_kept;
pub mod write_output;
pub mod write_table;
pub mod write_webdataset;
