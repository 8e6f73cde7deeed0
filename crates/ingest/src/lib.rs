//! Conversions into `.beton` files: the readers of WebDataset tar shards, Parquet files,
//! Arrow IPC files and TFRecord files, the mapping of their members or columns to fields
//! (given as `NAME=SOURCE:KIND` or inferred from the first record), the write driver
//! (skipping unreadable records, shards, JPEG passthrough) and object storage (inputs
//! fetched from, and shards uploaded to, `s3://`, `gs://`, `az://` URLs).
//!
//! Both front ends run the same code: `ffcv write webdataset|parquet|arrow|tfrecord`
//! and `ffcv_rs.writer.write_webdataset` & co. in Python. A conversion is a [`Job`]
//! given to [`write_webdataset`] or [`write_table`] with an [`Observer`], which is told
//! the lines the command line prints and the progress counts; the [`Report`] says what
//! was written and what was skipped.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use ffcv_ingest::{Job, Quiet, write_webdataset};
//!
//! let dir = tempfile::tempdir()?;
//! // A WebDataset shard of two records, each a `cls` member.
//! let mut tar = tar::Builder::new(Vec::new());
//! for (key, label) in [("a", "3"), ("b", "7")] {
//!     let mut header = tar::Header::new_gnu();
//!     header.set_size(label.len() as u64);
//!     header.set_cksum();
//!     tar.append_data(&mut header, format!("{key}.cls"), label.as_bytes())?;
//! }
//! std::fs::write(dir.path().join("shard-0.tar"), tar.into_inner()?)?;
//!
//! let mut job = Job::new(
//!     vec![dir.path().join("shard-*.tar").display().to_string()],
//!     dir.path().join("out.beton"),
//! );
//! job.fields = vec!["label=cls:int".into()];
//! let report = write_webdataset(&job, Arc::new(Quiet))?;
//! assert_eq!(report.fields, [("label".to_owned(), "cls:int".to_owned())]);
//! assert_eq!(report.written[0].summary.num_samples, 2);
//!
//! let reader = beton_io::Reader::open(dir.path().join("out.beton"))?;
//! assert_eq!(reader.num_samples(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod arrow_cells;
pub mod arrow_input;
pub mod convert_table;
pub mod convert_webdataset;
pub mod error;
pub mod job;
pub mod jpeg_passthrough;
pub mod object_io;
pub mod options;
pub mod output;
pub mod parquet_input;
pub mod report;
pub mod table_fields;
pub mod tfrecord;
pub mod webdataset;
pub mod webdataset_fields;

pub use convert_table::{Format, write_table};
pub use convert_webdataset::write_webdataset;
pub use error::{Error, RecordError, RecordId, Result};
pub use job::Job;
pub use options::{ImageOptions, Target, WriteModeName};
pub use output::Shards;
pub use report::{ImageCounts, Observer, Quiet, Report, Skipped};
