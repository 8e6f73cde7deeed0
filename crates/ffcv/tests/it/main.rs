//! The facade's integration tests, one binary: each module is one behaviour of the Loader
//! (orders, exactly-once epochs, decoding and transforms against FFCV 1.0.2's fixtures,
//! errors that keep their cause, held batches, resume, shards, remote and disk caches,
//! index sets changed between epochs, the GPU stage where a device is present), and the
//! decoders run outside a loader (`BatchDecoder`).

mod loader_support;

mod batch_decoder;
mod changing_subsets;
mod gpu_loader;
mod image_kinds;
mod loader_augment;
mod loader_builder;
mod loader_cache_policy;
mod loader_copy_path;
mod loader_decode_errors;
mod loader_disk_cache;
mod loader_distributed_seed;
mod loader_drop_mid_epoch;
mod loader_dtypes;
mod loader_errors_keep_their_cause;
mod loader_exactly_once;
mod loader_field_types;
mod loader_fixtures;
mod loader_held_batches;
mod loader_hostile_images;
mod loader_images;
mod loader_next_timeout;
mod loader_orders;
mod loader_read_errors;
mod loader_recompile;
mod loader_remote;
mod loader_resume;
mod loader_shards;
mod loader_shards_s3;
mod loader_slot_stage;
mod loader_stats;
mod loader_stress;
mod loader_tracing;
mod loader_transforms;
mod loader_var_array;
mod mixture;
mod quasi_buffer_sizing;
mod transforms_mixup;
mod transforms_native;
mod views;
