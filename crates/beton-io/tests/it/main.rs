//! beton-io's integration tests, one binary: each module is one behaviour of the format
//! (FFCV 1.0.2's fixtures read exactly, byte-identical writes, round trips, corrupt files,
//! ranged opening, shards, custom fields and their handlers' errors).

mod corrupt_files;
mod custom_fields;
mod fixed_bytes_field;
mod fixtures_compat;
mod handler_errors_keep_their_cause;
mod image_field;
mod python_json;
mod ranged_open;
mod shard_write;
mod var_array_field;
mod writer_byte_identical;
mod writer_roundtrip;
