//! The options of a conversion: how images are stored ([`ImageOptions`], FFCV's
//! `RGBImageField` options and `--jpeg-passthrough`) and where and how the file is
//! written ([`Target`]: page size, writer threads, shards).

use std::path::{Path, PathBuf};

use beton_io::{DatasetWriter, FieldSpec};
use ffcv::image::{RgbImageEncoder, WriteMode};

use crate::error::{Error, Result};
use crate::jpeg_passthrough::ImageStore;
use crate::output::Shards;

/// FFCV's `write_mode` of an `RGBImageField`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteModeName {
    /// Raw pixels (FFCV's default).
    #[default]
    Raw,
    /// Always JPEG.
    Jpg,
    /// JPEG only for images whose raw pixels exceed the smart threshold.
    Smart,
    /// JPEG with the compress probability per image.
    Proportion,
}

impl WriteModeName {
    /// The mode named `name` (`raw`, `jpg`, `smart`, `proportion`, FFCV's spellings).
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "raw" => Self::Raw,
            "jpg" => Self::Jpg,
            "smart" => Self::Smart,
            "proportion" => Self::Proportion,
            other => {
                return Err(Error::Usage(format!(
                    "write mode `{other}`: use raw, jpg, smart or proportion"
                )));
            }
        })
    }
}

/// How images are stored: FFCV's `RGBImageField(write_mode, max_resolution,
/// smart_threshold, jpeg_quality, compress_probability)`, the seed of the `proportion`
/// draws and `--jpeg-passthrough`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageOptions {
    /// How images are stored.
    pub write_mode: WriteModeName,
    /// Longest side after writing: larger images are area-downscaled keeping their aspect.
    pub max_resolution: Option<u32>,
    /// JPEG quality, 1..=100.
    pub jpeg_quality: u8,
    /// `smart` mode: raw images above this many bytes are stored as JPEG.
    pub smart_threshold: Option<u64>,
    /// `proportion` mode: the probability that an image is stored as JPEG.
    pub compress_probability: f64,
    /// Seed of the `proportion` mode's draws (sample `i`'s draw comes from it and `i`).
    pub seed: u64,
    /// Store a source JPEG's bytes unchanged when the write mode would store it as JPEG,
    /// it fits `max_resolution` and the loader's fast decoder takes it.
    pub jpeg_passthrough: bool,
}

impl Default for ImageOptions {
    /// FFCV's defaults: raw, no bound, quality 90, probability 0.5, seed 0, no passthrough.
    fn default() -> Self {
        Self {
            write_mode: WriteModeName::Raw,
            max_resolution: None,
            jpeg_quality: 90,
            smart_threshold: None,
            compress_probability: 0.5,
            seed: 0,
            jpeg_passthrough: false,
        }
    }
}

impl ImageOptions {
    /// The encoder the options describe ([`Error::Usage`] when they do not fit together).
    pub fn encoder(&self) -> Result<RgbImageEncoder> {
        if !(1..=100).contains(&self.jpeg_quality) {
            return Err(Error::Usage(format!(
                "--jpeg-quality {} is not in 1..=100",
                self.jpeg_quality
            )));
        }
        if self.max_resolution == Some(0) {
            return Err(Error::Usage("--max-resolution must be at least 1".into()));
        }
        let write_mode = match self.write_mode {
            WriteModeName::Raw => WriteMode::Raw,
            WriteModeName::Jpg => WriteMode::Jpg,
            WriteModeName::Smart => WriteMode::Smart {
                threshold: self.smart_threshold,
            },
            WriteModeName::Proportion => {
                if !(0.0..=1.0).contains(&self.compress_probability) {
                    return Err(Error::Usage(format!(
                        "--compress-probability {} is not in [0, 1]",
                        self.compress_probability
                    )));
                }
                WriteMode::Proportion {
                    compress_probability: self.compress_probability,
                }
            }
        };
        if self.smart_threshold.is_some() && self.write_mode != WriteModeName::Smart {
            return Err(Error::Usage(
                "--smart-threshold applies to --write-mode smart".into(),
            ));
        }
        Ok(RgbImageEncoder {
            write_mode,
            max_resolution: self.max_resolution,
            jpeg_quality: self.jpeg_quality,
        })
    }

    /// The image store the options describe: [`Self::encoder`] with the seed and
    /// passthrough (a usage error with `raw`, which stores no JPEG).
    pub fn image_store(&self) -> Result<ImageStore> {
        if self.jpeg_passthrough && self.write_mode == WriteModeName::Raw {
            return Err(Error::Usage(
                "--jpeg-passthrough applies to --write-mode jpg, smart or proportion (raw \
                 stores no JPEG)"
                    .into(),
            ));
        }
        Ok(ImageStore::new(
            self.encoder()?,
            self.seed,
            self.jpeg_passthrough,
        ))
    }
}

/// Where and how the file is written: page size, writer threads and shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Page size: a power of two, at least 2 MiB, below 4 GiB.
    pub page_size: u64,
    /// Writer threads (`None`: the CPUs available).
    pub workers: Option<usize>,
    /// All N shards, or shard I of N.
    pub shards: Shards,
}

impl Default for Target {
    /// 8 MiB pages, one thread per CPU, one file.
    fn default() -> Self {
        Self {
            page_size: 8 << 20,
            workers: None,
            shards: Shards::default(),
        }
    }
}

impl Target {
    /// The writer of `out` (or of the shard the shard index names) with `fields`, the
    /// page size and the workers (else the writer's default, one thread per CPU); a bad
    /// page size is the writer's error. An `out` URL is written to a staging file first;
    /// [`Shards::write`] uploads it.
    pub fn writer(&self, out: &Path, fields: Vec<FieldSpec>) -> Result<DatasetWriter> {
        let out = crate::object_io::local_output(out)?;
        let writer = DatasetWriter::new(self.shards.writer_path(&out), fields)?
            .with_page_size(self.page_size)?;
        Ok(match self.workers {
            Some(workers) => writer.with_num_workers(workers),
            None => writer,
        })
    }

    /// The writer threads: the workers given, else the CPUs available (at least 1).
    pub fn threads(&self) -> usize {
        self.workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1)
    }

    /// The file the write is named after in reports: the shard's with a shard index.
    pub fn out_path(&self, out: &Path) -> PathBuf {
        self.shards.writer_path(out)
    }
}
