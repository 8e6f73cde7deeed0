//! The library half of the `ffcv` command line: the deterministic synthetic datasets that
//! `ffcv write synthetic` writes, shared with the benchmarks and the cross-crate tests.
//!
//! The `ffcv` binary (inspect, dump, order, write, bench, doctor) lives in `main.rs`; only
//! what other packages reuse is exported here.
//!
//! # Example
//!
//! ```
//! use beton_io::{DatasetWriter, Reader, from_fn};
//! use ffcv_cli::synthetic::{Kind, Spec};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("cifar.beton");
//! let spec = Spec { seed: 7, ..Spec::new(Kind::CifarRaw) };
//! let fields = spec.fields()?;
//! DatasetWriter::new(&path, fields)?
//!     .with_num_workers(1)
//!     .write(&from_fn(10, |i| Ok(spec.sample(i))))?;
//! let reader = Reader::open(&path)?;
//! assert_eq!(reader.num_samples(), 10);
//! let image = reader.field_index("image").unwrap();
//! assert_eq!(reader.field_data(3, image)?.unwrap().len(), 32 * 32 * 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod photos;
pub mod synthetic;
