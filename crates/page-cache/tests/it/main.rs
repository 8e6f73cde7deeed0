//! page-cache's integration tests, one binary: the OS and process caches read the same
//! bytes, retention, the memory guard, the disk cache, failures, and the remote sources
//! against real loopback servers (HTTP, moto S3, Azurite).

mod common;

mod disk_cache;
mod failures;
mod generated;
mod memory_guard;
mod process_matches_os;
mod remote_azure;
mod remote_http;
mod remote_s3;
mod remote_upload;
mod retention;
