//! The command line's integration tests, one binary: each module runs the built `ffcv`
//! program on one behaviour (write, inspect, dump, order, bench, doctor, resume, shards,
//! remote sources), checking its output and exit codes on good and bad input.

mod support;

mod bad_input;
mod cli_bench;
mod cli_doctor;
mod cli_field_types;
mod cli_hostile_images;
mod cli_image_kinds;
mod cli_images;
mod cli_jpeg_passthrough;
mod cli_memory_limit;
mod cli_mix;
mod cli_object_storage;
mod cli_order;
mod cli_remote;
mod cli_resume;
mod cli_shards;
mod cli_table_var_array;
mod cli_tables;
mod cli_tfrecord;
mod cli_var_array;
mod cli_views;
mod cli_webdataset;
mod dump_fixtures;
mod help_texts;
mod inspect_fixtures;
mod numeric_flags;
mod proportion_mode;
mod write_shards;
mod write_synthetic;
