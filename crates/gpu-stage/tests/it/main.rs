//! gpu-stage's integration tests, one binary: the stage on a device where one is present
//! (skipped with a message elsewhere), and what can be checked on the host (slot table,
//! configuration, kernel source, rounding and normalisation references).

mod device_spec;
mod float_rounding;
mod gpu_stage;
mod kernel_source_on_host;
mod normalize_reference;
mod slot_table;
mod stage_config;
