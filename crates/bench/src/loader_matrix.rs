//! `loader/*` rows: the `ffcv::Loader` end to end, one bounded measurement per configuration
//! (one warm-up epoch, then [`EPOCHS`] timed epochs, median reported).
//!
//! The matrix on the CIFAR-like data set: OS cache on/off × Sequential/Random/QuasiRandom ×
//! 1 worker and every CPU with the default decoders (`copy`: every field is copy-only, so the
//! loader fills it batch-wide and no pipeline code runs, compiled or not), plus
//! `batches_ahead` 1 beside the default 3. The compiler is compared on the CIFAR training
//! chain (`cifar-train`: flip, normalize to f32, CHW), which the executor really runs: each
//! compiled row is measured together with its interpreted twin, their epochs alternating,
//! and carries their ratio. On the 128 KiB data set: both caches with Random on every CPU.
//! On the photographs (`photos`: JPEGs of 350–500 px cut from real photographs, see
//! `ffcv_cli::photos`): RandomResizedCrop to 224 alone, and FFCV's ImageNet training chain
//! (RandomResizedCrop 224 → flip → normalize to f32 → CHW) compiled against interpreted, on
//! one worker and every CPU.
//! The consumer only drops each batch (as `ffcv bench` without `--touch`), so a row measures
//! the loader alone. The `tracing-overhead` row bounds the cost of the loader's
//! instrumentation with no subscriber installed against the run-to-run noise.
//! With `--transform FIELD=OP[,OP…]` the decoder-only rows run the user's ops after their
//! decoder and carry a name suffix (the rule is in [`crate::row_transforms`]).

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use beton_io::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage, from_fn};
use ffcv::decode::NdArrayDecoder;
use ffcv::image::{SyntheticImageSpec, synthetic_jpeg};
use ffcv::jit::ElemType;
use ffcv::transforms;

use ffcv::{Loader, LoaderBuilder, LoaderStats, Order, PipelineSpec};
use serde_json::json;

use crate::datasets::Dataset;
use crate::report::Row;
use crate::row_transforms::RowTransforms;
use crate::timing::Timing;

/// Timed epochs per row (after one warm-up epoch).
pub const EPOCHS: usize = 5;

/// Samples of the `cifar-train` rows: the first 20 batches of 512 of the data set. The
/// interpreted chain runs at a fraction of the compiled one's rate, so a whole
/// 50,000-sample epoch per round would make the pairs dominate the `--small` run.
/// (All of a smaller data set.)
pub const CIFAR_TRAIN_SAMPLES: u64 = 20 * 512;

/// CIFAR-10's per-channel means on the 0..255 scale (FFCV's CIFAR example's values).
pub const CIFAR_MEAN: [f64; 3] = [125.307, 122.961, 113.8575];
/// CIFAR-10's per-channel standard deviations on the 0..255 scale.
pub const CIFAR_STD: [f64; 3] = [51.5865, 50.847, 51.255];

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// OS page cache (`true`) or the process cache.
    pub os_cache: bool,
    /// The traversal order.
    pub order: OrderName,
    /// `None` = every CPU (`num_workers = -1`).
    pub workers: Option<usize>,
    /// What the loader runs on each sample.
    pub pipeline: PipelineName,
    /// Queue depth.
    pub batches_ahead: usize,
    /// Stage every batch on CUDA device 0 (a GPU row; skipped without a device).
    pub cuda: bool,
}

/// The built-in orders by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderName {
    /// `sequential`.
    Sequential,
    /// `random`.
    Random,
    /// `quasi-random`.
    QuasiRandom,
}

impl OrderName {
    fn name(self) -> &'static str {
        match self {
            OrderName::Sequential => "sequential",
            OrderName::Random => "random",
            OrderName::QuasiRandom => "quasi-random",
        }
    }

    fn order(self) -> Order {
        match self {
            OrderName::Sequential => Order::Sequential,
            OrderName::Random => Order::Random,
            OrderName::QuasiRandom => Order::QuasiRandom,
        }
    }
}

/// What a row's loader runs on each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineName {
    /// The default decoders. On raw fields (NDArray, Int, Float, Bytes) every pipeline is a
    /// copying decoder alone, which the loader fills batch-wide without running pipeline
    /// code, so `compile` has nothing to act on and the row is not a compiler comparison.
    Copy,
    /// The data set's `JPEG_DECODER` on the image field (a native decoding kernel, no
    /// transforms), compiled pipelines.
    Rrc64,
    /// FFCV's CIFAR training chain on the image field (`NDArrayDecoder` →
    /// `RandomHorizontalFlip(0.5)` → `NormalizeImage(CIFAR mean, std, float32)` →
    /// `ToTorchImage`) over the first [`CIFAR_TRAIN_SAMPLES`] samples, compiled (`true`) or
    /// interpreted.
    CifarTrain {
        /// Cranelift-compiled (`true`) or interpreted pipelines.
        compile: bool,
    },
    /// FFCV's ImageNet decoder alone on the photographs: RandomResizedCrop to 224×224 (a
    /// native decoding kernel, no transforms).
    Rrc224,
    /// FFCV's ImageNet training chain on the photographs: RandomResizedCrop 224 →
    /// `RandomHorizontalFlip(0.5)` → `NormalizeImage(ImageNet mean, std, float32)` →
    /// `ToTorchImage`, compiled (`true`) or interpreted, over the first
    /// [`PHOTOS_TRAIN_SAMPLES`] samples.
    ImagenetF32 {
        /// Cranelift-compiled (`true`) or interpreted pipelines.
        compile: bool,
    },
    /// The same chain normalizing to float16 (each value rounded once from its `f64`
    /// value), compiled or interpreted.
    ImagenetF16 {
        /// Cranelift-compiled (`true`) or interpreted pipelines.
        compile: bool,
    },
}

impl PipelineName {
    /// The row-name segment(s): `copy`, `rrc64`, `cifar-train/jit`, `cifar-train/interp`.
    pub fn name(self) -> &'static str {
        match self {
            PipelineName::Copy => "copy",
            PipelineName::Rrc64 => "rrc64",
            PipelineName::CifarTrain { compile: true } => "cifar-train/jit",
            PipelineName::CifarTrain { compile: false } => "cifar-train/interp",
            PipelineName::Rrc224 => "rrc224",
            PipelineName::ImagenetF32 { compile: true } => "imagenet-f32/jit",
            PipelineName::ImagenetF32 { compile: false } => "imagenet-f32/interp",
            PipelineName::ImagenetF16 { compile: true } => "imagenet-f16/jit",
            PipelineName::ImagenetF16 { compile: false } => "imagenet-f16/interp",
        }
    }

    /// Whether the row's pipeline on its data set's field is a decoder alone (`copy`,
    /// `rrc64`, `rrc224`): the rows that `--transform` changes.
    pub fn is_decoder_only(self) -> bool {
        matches!(
            self,
            PipelineName::Copy | PipelineName::Rrc64 | PipelineName::Rrc224
        )
    }

    /// Whether the loader compiles pipelines (`LoaderBuilder::compile`).
    pub fn compile(self) -> bool {
        !matches!(
            self,
            PipelineName::CifarTrain { compile: false }
                | PipelineName::ImagenetF32 { compile: false }
                | PipelineName::ImagenetF16 { compile: false }
        )
    }

    /// Whether the row is one half of a compiled/interpreted comparison: only a pipeline
    /// the executor runs can tell the compiler from the interpreter.
    pub fn compares_compiler(self) -> bool {
        matches!(
            self,
            PipelineName::CifarTrain { .. }
                | PipelineName::ImagenetF32 { .. }
                | PipelineName::ImagenetF16 { .. }
        )
    }

    /// The interpreted twin of a compiled comparison pipeline (itself for the others).
    pub fn interpreted(self) -> PipelineName {
        match self {
            PipelineName::CifarTrain { .. } => PipelineName::CifarTrain { compile: false },
            PipelineName::ImagenetF32 { .. } => PipelineName::ImagenetF32 { compile: false },
            PipelineName::ImagenetF16 { .. } => PipelineName::ImagenetF16 { compile: false },
            other => other,
        }
    }

    fn description(self) -> String {
        match self {
            PipelineName::Copy => "default decoders (copy-only, filled batch-wide)".to_owned(),
            PipelineName::Rrc64 => "compiled".to_owned(),
            PipelineName::CifarTrain { compile } => format!(
                "flip -> normalize f32 -> CHW on the first {CIFAR_TRAIN_SAMPLES} samples, {}",
                if compile { "compiled" } else { "interpreted" }
            ),
            PipelineName::Rrc224 => format!("{PHOTOS_DECODER}, compiled"),
            PipelineName::ImagenetF32 { compile } => format!(
                "{PHOTOS_DECODER} -> flip -> normalize f32 -> CHW on the first \
                 {PHOTOS_TRAIN_SAMPLES} samples, {}",
                if compile { "compiled" } else { "interpreted" }
            ),
            PipelineName::ImagenetF16 { compile } => format!(
                "{PHOTOS_DECODER} -> flip -> normalize f16 -> CHW on the first \
                 {PHOTOS_TRAIN_SAMPLES} samples, {}",
                if compile { "compiled" } else { "interpreted" }
            ),
        }
    }
}

impl Config {
    /// The row name:
    /// `loader/<dataset>/<os|proc>/<order>/<1t|all>/<pipeline>[/ahead<N>][/cuda0]`, where
    /// the pipeline is `copy`, `rrc64`, `cifar-train/jit` or `cifar-train/interp` (the
    /// default `batches_ahead` 3 is left out of the name).
    pub fn row_name(&self, label: &str) -> String {
        let mut name = format!(
            "loader/{label}/{}/{}/{}/{}",
            if self.os_cache { "os" } else { "proc" },
            self.order.name(),
            match self.workers {
                Some(n) => format!("{n}t"),
                None => "all".to_owned(),
            },
            self.pipeline.name()
        );
        if self.batches_ahead != 3 {
            name.push_str(&format!("/ahead{}", self.batches_ahead));
        }
        if self.cuda {
            name.push_str("/cuda0");
        }
        name
    }

    /// The row name under `transforms` (those that apply to the data set): a decoder-only
    /// row that runs them gets their suffix (`/+image=flip,chw`), other rows keep
    /// [`Config::row_name`].
    pub fn row_name_with(&self, label: &str, transforms: &RowTransforms) -> String {
        let name = self.row_name(label);
        if self.runs(transforms) {
            name + &transforms.suffix()
        } else {
            name
        }
    }

    /// Whether the row runs `transforms` (those that apply to its data set).
    pub fn runs(&self, transforms: &RowTransforms) -> bool {
        !transforms.is_empty() && self.pipeline.is_decoder_only()
    }

    /// The same configuration with another pipeline.
    fn with(self, pipeline: PipelineName) -> Config {
        Config { pipeline, ..self }
    }
}

/// The configuration the tracing row and the GPU row start from: OS cache, Random, every
/// CPU, default queue depth, with the data set's own pipeline.
fn reference(label: &str) -> Config {
    Config {
        os_cache: true,
        order: OrderName::Random,
        workers: None,
        pipeline: match label {
            JPEG_LABEL => PipelineName::Rrc64,
            PHOTOS_LABEL => PipelineName::Rrc224,
            _ => PipelineName::Copy,
        },
        batches_ahead: 3,
        cuda: false,
    }
}

/// The configurations measured on the data set labelled `label`, in groups: the
/// configurations of one group are measured together, their timed epochs alternating (a
/// compiled row and its interpreted twin), so that a slow phase of a shared machine hits
/// both alike and their ratio stays fair.
pub fn groups(label: &str) -> Vec<Vec<Config>> {
    let base = reference(label);
    let mut groups = Vec::new();
    if label == "3k" {
        for os_cache in [true, false] {
            for order in [
                OrderName::Sequential,
                OrderName::Random,
                OrderName::QuasiRandom,
            ] {
                for workers in [Some(1), None] {
                    groups.push(vec![Config {
                        os_cache,
                        order,
                        workers,
                        ..base
                    }]);
                }
            }
        }
        groups.push(vec![Config {
            batches_ahead: 1,
            ..base
        }]);
        // The compiler comparison: the pipeline's cost does not depend on where the pages
        // come from, so a few configurations suffice (one and every worker, both caches).
        for config in [
            Config {
                workers: Some(1),
                ..base
            },
            base,
            Config {
                os_cache: false,
                order: OrderName::QuasiRandom,
                ..base
            },
        ] {
            let jit = PipelineName::CifarTrain { compile: true };
            groups.push(vec![config.with(jit), config.with(jit.interpreted())]);
        }
    } else if label == JPEG_LABEL {
        for workers in [Some(1), None] {
            groups.push(vec![Config { workers, ..base }]);
        }
        groups.push(vec![Config {
            os_cache: false,
            order: OrderName::QuasiRandom,
            ..base
        }]);
    } else if label == PHOTOS_LABEL {
        // The decoder alone, then the whole chain with its interpreted twin: their
        // difference is what the transforms cost at 224, and the pair's ratio is the
        // compiler's gain on a real training pipeline.
        for workers in [Some(1), None] {
            groups.push(vec![Config { workers, ..base }]);
        }
        for jit in [
            PipelineName::ImagenetF32 { compile: true },
            PipelineName::ImagenetF16 { compile: true },
        ] {
            for workers in [Some(1), None] {
                let config = Config { workers, ..base };
                groups.push(vec![config.with(jit), config.with(jit.interpreted())]);
            }
        }
    } else {
        for os_cache in [true, false] {
            groups.push(vec![Config { os_cache, ..base }]);
        }
    }
    // The GPU row: the reference configuration with every output staged on the device.
    groups.push(vec![Config { cuda: true, ..base }]);
    groups
}

/// Every configuration measured on the data set labelled `label`.
pub fn configs(label: &str) -> Vec<Config> {
    groups(label).into_iter().flatten().collect()
}

/// The name of the tracing-overhead row of data set `label`.
pub fn tracing_row_name(label: &str) -> String {
    format!("loader/{label}/tracing-overhead")
}

/// Every row name this suite can produce for data set `label` (no `--transform`).
#[cfg(test)]
pub fn row_names(label: &str) -> Vec<String> {
    row_names_with(label, &RowTransforms::default())
}

/// Every row name this suite can produce for data set `label` under `transforms` (all of
/// the run's: those on fields the data set lacks are dropped here).
pub fn row_names_with(label: &str, transforms: &RowTransforms) -> Vec<String> {
    let fields = dataset_fields(label);
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let transforms = transforms.for_fields(&fields);
    let mut names: Vec<String> = configs(label)
        .iter()
        .map(|c| c.row_name_with(label, &transforms))
        .collect();
    if label == "3k" {
        names.push(tracing_row_name_with(label, &transforms));
    }
    names
}

/// The tracing-overhead row's name under `transforms`: it is measured on the reference
/// row, a decoder-only row, so it carries the same suffix.
pub fn tracing_row_name_with(label: &str, transforms: &RowTransforms) -> String {
    let suffix = if reference(label).runs(transforms) {
        transforms.suffix()
    } else {
        String::new()
    };
    tracing_row_name(label) + &suffix
}

/// The fields of the data set labelled `label`, known without writing it (the names
/// `--only` is matched against depend on them under `--transform`).
pub fn dataset_fields(label: &str) -> Vec<String> {
    match label {
        JPEG_LABEL | PHOTOS_LABEL => vec!["image".to_owned(), "label".to_owned()],
        _ => crate::datasets::small()
            .into_iter()
            .find(|recipe| recipe.label == label)
            .and_then(|recipe| recipe.spec.fields().ok())
            .map(|fields| fields.into_iter().map(|f| f.name).collect())
            .unwrap_or_default(),
    }
}

/// Batch size of the rows on data set `label` (FFCV's benchmark sizes).
pub fn batch_size(label: &str) -> usize {
    match label {
        "3k" => 512,
        JPEG_LABEL | PHOTOS_LABEL => 128,
        _ => 64,
    }
}

/// Label of the JPEG data set.
pub const JPEG_LABEL: &str = "jpeg";
/// JPEG images in the data set: 160 to 256 pixels a side, quality 90.
pub const JPEG_SAMPLES: u64 = 2000;
/// The JPEG rows' decoder: FFCV's RandomResizedCrop to 64x64.
pub const JPEG_DECODER: &str = "random-resized-crop:64x64";

/// Label of the photograph data set.
pub const PHOTOS_LABEL: &str = "photos";
/// JPEG images in the photograph data set: 350 to 500 pixels a side, quality 90, 4:2:0.
/// Few, so that `--small` stays bounded: each photo costs about a millisecond to decode.
pub const PHOTOS_SAMPLES: u64 = 1024;
/// Samples of the `imagenet-f32` and `imagenet-f16` rows: the first 4 batches of 128. The
/// interpreted chains run at a fraction of the compiled ones' rate, and there are eight such
/// rows; whole epochs would push `--small` past its 3 minutes.
pub const PHOTOS_TRAIN_SAMPLES: u64 = 4 * 128;
/// The photograph rows' decoder: FFCV's ImageNet RandomResizedCrop to 224x224.
pub const PHOTOS_DECODER: &str = "random-resized-crop:224x224";

/// The JPEG data set under `dir`: `JPEG_SAMPLES` synthetic JPEGs (`image`) with a label,
/// written once and reused while its recorded parameters match.
pub fn ensure_jpeg(dir: &Path, progress: &dyn Fn(&str)) -> Result<Dataset, String> {
    // Revision 2: JPEGs from the libjpeg-identical encoder.
    let set = ImageSet {
        label: JPEG_LABEL,
        samples: JPEG_SAMPLES,
        params: format!(
            "revision 2\nffcv::image::synthetic_jpeg seed 11, {JPEG_SAMPLES} images of 160..=256 px, quality 90, label = index % 10\n"
        ),
        sample_description: format!("JPEG 160-256 px, {JPEG_DECODER}"),
    };
    ensure_images(dir, &set, progress, &|i| {
        synthetic_jpeg(11, i, SyntheticImageSpec::default(), 90).map_err(|err| err.to_string())
    })
}

/// The photograph data set under `dir`: `PHOTOS_SAMPLES` JPEGs cut from photographs
/// (`ffcv write synthetic --kind photos --seed 13`, quality 90) with a label, written once
/// and reused while its recorded parameters match.
pub fn ensure_photos(dir: &Path, progress: &dyn Fn(&str)) -> Result<Dataset, String> {
    let (lo, hi) = ffcv_cli::photos::DEFAULT_SIDES;
    let set = ImageSet {
        label: PHOTOS_LABEL,
        samples: PHOTOS_SAMPLES,
        params: format!(
            "revision 2\nffcv_cli::photos::photo_jpeg seed 13, {PHOTOS_SAMPLES} images of {lo}..={hi} px, quality 90, label = index % 10\n"
        ),
        sample_description: format!("JPEG photographs {lo}-{hi} px"),
    };
    ensure_images(dir, &set, progress, &|i| {
        ffcv_cli::photos::photo_jpeg(13, i, (lo, hi), 90)
    })
}

/// An image data set of the loader rows: `image` (JPEG) and `label` fields.
pub(crate) struct ImageSet {
    pub(crate) label: &'static str,
    pub(crate) samples: u64,
    /// What identifies the content; a file whose recorded parameters differ is rewritten.
    pub(crate) params: String,
    pub(crate) sample_description: String,
}

/// The data set `set` under `dir`, sample `i`'s JPEG from `jpeg(i)` (`(bytes, width,
/// height)`), written once and reused while its recorded parameters match.
pub(crate) fn ensure_images(
    dir: &Path,
    set: &ImageSet,
    progress: &dyn Fn(&str),
    jpeg: &(dyn Fn(u64) -> Result<(Vec<u8>, u32, u32), String> + Sync),
) -> Result<Dataset, String> {
    let path = dir.join(format!("loader-{}.beton", set.label));
    let params_path = dir.join(format!("loader-{}.params", set.label));
    let params = &set.params;
    let samples = set.samples;
    let reusable = std::fs::read_to_string(&params_path).is_ok_and(|old| old == *params)
        && beton_io::Reader::open(&path).is_ok_and(|r| r.num_samples() == samples);
    if !reusable {
        progress(&format!("writing {} ({samples} JPEGs)", path.display()));
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let _ = std::fs::remove_file(&params_path);
        let fields = vec![
            FieldSpec::new("image", FieldType::RgbImage),
            FieldSpec::new("label", FieldType::Int),
        ];
        DatasetWriter::new(&path, fields)
            .and_then(|writer| {
                writer.write(&from_fn(samples, |i| {
                    let (bytes, width, height) =
                        jpeg(i).map_err(|err| -> beton_io::SourceError { err.into() })?;
                    Ok(vec![
                        FieldValue::RgbImage(RgbImage::Jpeg {
                            width: width as u16,
                            height: height as u16,
                            bytes,
                        }),
                        FieldValue::Int(i as i64 % 10),
                    ])
                }))
            })
            .map_err(|err| err.to_string())?;
        std::fs::write(&params_path, params)
            .map_err(|err| format!("cannot write {}: {err}", params_path.display()))?;
    }
    Ok(Dataset {
        path,
        label: set.label.to_owned(),
        field: "image".to_owned(),
        sample_description: set.sample_description.clone(),
    })
}

/// The figures of one configuration.
#[derive(Debug, Clone)]
struct Measured {
    epochs: Timing,
    /// The timed epochs in the order they ran (round by round, for per-round ratios).
    rounds: Vec<f64>,
    samples_per_epoch: u64,
    payload_per_epoch: u64,
    storage_per_epoch: u64,
    file_read_per_epoch: u64,
    /// What the process cache read in the warm-up epoch (slots empty at its start).
    file_read_first_epoch: u64,
    payload_first_epoch: u64,
    latencies_ms: Vec<f64>,
    wait_pages: f64,
    decode: f64,
    wait_slot: f64,
    /// Peak RSS of the whole process: with a group of several loaders, of all of them.
    peak_rss: Option<u64>,
    workers: usize,
}

fn num_samples(dataset: &Dataset) -> Result<u64, String> {
    Ok(beton_io::Reader::open(&dataset.path)
        .map_err(|err| err.to_string())?
        .num_samples())
}

/// The loader builder of a row: what a user would build for `config` on `dataset`, with
/// `transforms` (those that apply to the data set) after the decoders of a decoder-only row.
pub fn builder(
    dataset: &Dataset,
    config: &Config,
    transforms: &RowTransforms,
) -> Result<LoaderBuilder, String> {
    let builder = Loader::builder(&dataset.path)
        .batch_size(batch_size(&dataset.label))
        .num_workers(config.workers.map_or(-1, |n| n as i64))
        .os_cache(config.os_cache)
        .order(config.order.order())
        .seed(0)
        .compile(config.pipeline.compile())
        .batches_ahead(config.batches_ahead);
    let builder = match config.pipeline {
        PipelineName::Copy => builder,
        PipelineName::Rrc64 => {
            let decoder = JPEG_DECODER
                .parse()
                .map_err(|err| format!("{JPEG_DECODER}: {err}"))?;
            builder.decoder(dataset.field.as_str(), decoder)
        }
        PipelineName::Rrc224 => builder.decoder(dataset.field.as_str(), photos_decoder()?),
        PipelineName::ImagenetF32 { .. } | PipelineName::ImagenetF16 { .. } => {
            let dtype = if matches!(config.pipeline, PipelineName::ImagenetF16 { .. }) {
                ElemType::F16
            } else {
                ElemType::F32
            };
            let ffcv::DecoderChoice::Decoder(decoder) = photos_decoder()? else {
                return Err(format!("{PHOTOS_DECODER} names no decoder"));
            };
            builder
                .indices((0..PHOTOS_TRAIN_SAMPLES.min(num_samples(dataset)?)).collect::<Vec<u64>>())
                .pipeline(
                    dataset.field.as_str(),
                    PipelineSpec::from_arc(decoder)
                        .then(
                            transforms::random_horizontal_flip(0.5)
                                .expect("the fixed chains' parameters are valid"),
                        )
                        .then(
                            transforms::normalize_image(
                                transforms::IMAGENET_MEAN,
                                transforms::IMAGENET_STD,
                                dtype,
                            )
                            .expect("the fixed chains' parameters are valid"),
                        )
                        .then(transforms::to_torch_image()),
                )
        }
        PipelineName::CifarTrain { .. } => builder
            .indices((0..CIFAR_TRAIN_SAMPLES.min(num_samples(dataset)?)).collect::<Vec<u64>>())
            .pipeline(
                dataset.field.as_str(),
                PipelineSpec::new(NdArrayDecoder)
                    .then(
                        transforms::random_horizontal_flip(0.5)
                            .expect("the fixed chains' parameters are valid"),
                    )
                    .then(
                        transforms::normalize_image(CIFAR_MEAN, CIFAR_STD, ElemType::F32)
                            .expect("the fixed chains' parameters are valid"),
                    )
                    .then(transforms::to_torch_image()),
            ),
    };
    let builder = if config.runs(transforms) {
        with_transforms(builder, dataset, config.pipeline, transforms)?
    } else {
        builder
    };
    Ok(if config.cuda {
        builder.device(ffcv::gpu::DeviceSpec::Cuda(0))
    } else {
        builder
    })
}

/// `builder` with each field of `transforms` given one pipeline: the row's decoder for it
/// (the data set's field under `pipeline`, else the field type's default) and the ops.
fn with_transforms(
    mut builder: LoaderBuilder,
    dataset: &Dataset,
    pipeline: PipelineName,
    transforms: &RowTransforms,
) -> Result<LoaderBuilder, String> {
    let reader = beton_io::Reader::open(&dataset.path).map_err(|err| err.to_string())?;
    for t in transforms.fields() {
        let decoder = if t.field == dataset.field {
            match pipeline {
                PipelineName::Rrc64 => Some(
                    JPEG_DECODER
                        .parse()
                        .map_err(|err| format!("{JPEG_DECODER}: {err}"))?,
                ),
                PipelineName::Rrc224 => Some(photos_decoder()?),
                _ => None,
            }
        } else {
            None
        };
        let spec =
            ffcv::transform_spec::field_pipeline(&reader, &t.field, decoder.as_ref(), &t.ops)
                .map_err(|err| format!("--transform {t:?}: {err}"))?;
        builder = builder.pipeline(t.field.clone(), spec);
    }
    Ok(builder)
}

fn photos_decoder() -> Result<ffcv::DecoderChoice, String> {
    PHOTOS_DECODER
        .parse()
        .map_err(|err| format!("{PHOTOS_DECODER}: {err}"))
}

/// One loader of a group and what its timed epochs measured so far.
struct Run {
    loader: Loader,
    first: LoaderStats,
    before: LoaderStats,
    rounds: Vec<f64>,
    latencies_ms: Vec<f64>,
    storage: Option<u64>,
}

/// Measures the configurations of one group: every loader is built and warmed up, then the
/// timed epochs alternate between them (round `r` runs epoch `r` of each in turn).
fn measure_group(
    dataset: &Dataset,
    group: &[Config],
    transforms: &RowTransforms,
) -> Result<Vec<Measured>, String> {
    let mut runs = Vec::with_capacity(group.len());
    for config in group {
        let mut loader = builder(dataset, config, transforms)?
            .build()
            .map_err(|err| err.to_string())?;
        // The warm-up epoch starts with empty slots, so its reads are the order's own
        // cost; later epochs may find pages still held from the epoch before
        // (`retain_pages`).
        run_epoch(&mut loader, &mut Vec::new())?;
        let first = loader.stats();
        runs.push(Run {
            loader,
            first,
            before: first,
            rounds: Vec::with_capacity(EPOCHS),
            latencies_ms: Vec::new(),
            storage: Some(0),
        });
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    for _ in 0..EPOCHS {
        for run in &mut runs {
            // What the kernel fetched from the device for this process (0 when the file
            // is in the page cache), counted around this loader's epochs only.
            let io_before = storage_read_bytes();
            let started = Instant::now();
            run_epoch(&mut run.loader, &mut run.latencies_ms)?;
            run.rounds.push(started.elapsed().as_secs_f64());
            run.storage = match (run.storage, io_before, storage_read_bytes()) {
                (Some(sum), Some(a), Some(b)) => Some(sum + b.saturating_sub(a)),
                _ => None,
            };
        }
    }
    let peak_rss = peak_rss_bytes();
    Ok(runs
        .into_iter()
        .map(|run| {
            let after = run.loader.stats();
            let before = run.before;
            let per_epoch = |a: u64, b: u64| (b - a) / EPOCHS as u64;
            let seconds_per_epoch = |a: std::time::Duration, b: std::time::Duration| {
                (b - a).as_secs_f64() / EPOCHS as f64
            };
            let mut seconds = run.rounds.clone();
            seconds.sort_by(f64::total_cmp);
            let mut latencies_ms = run.latencies_ms;
            latencies_ms.sort_by(f64::total_cmp);
            Measured {
                epochs: Timing { seconds },
                rounds: run.rounds,
                samples_per_epoch: per_epoch(before.samples, after.samples),
                payload_per_epoch: per_epoch(before.payload_bytes, after.payload_bytes),
                storage_per_epoch: run.storage.unwrap_or(0) / EPOCHS as u64,
                // What the process cache read from the file (0 with the OS cache, whose
                // page faults no counter sees).
                file_read_per_epoch: per_epoch(before.storage_bytes_read, after.storage_bytes_read),
                file_read_first_epoch: run.first.storage_bytes_read,
                payload_first_epoch: run.first.payload_bytes,
                latencies_ms,
                wait_pages: seconds_per_epoch(before.wait_pages, after.wait_pages),
                decode: seconds_per_epoch(before.decode, after.decode),
                wait_slot: seconds_per_epoch(before.wait_slot, after.wait_slot),
                peak_rss,
                workers: run.loader.num_workers(),
            }
        })
        .collect())
}

/// One configuration measured alone.
#[cfg(test)]
fn measure(dataset: &Dataset, config: &Config) -> Result<Measured, String> {
    measure_group(
        dataset,
        std::slice::from_ref(config),
        &RowTransforms::default(),
    )?
    .pop()
    .ok_or_else(|| "no measurement".to_owned())
}

/// One epoch; each batch's wait (the consumer's view of latency) goes to `latencies_ms`.
fn run_epoch(loader: &mut Loader, latencies_ms: &mut Vec<f64>) -> Result<(), String> {
    let mut epoch = loader.iter();
    loop {
        let asked = Instant::now();
        let Some(batch) = epoch.next() else {
            return Ok(());
        };
        let batch = batch.map_err(|err| err.to_string())?;
        latencies_ms.push(asked.elapsed().as_secs_f64() * 1e3);
        black_box(batch.len());
    }
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// `read_bytes` of `/proc/self/io`: bytes this process caused to be fetched from storage.
fn storage_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let line = io.lines().find(|line| line.starts_with("read_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn row_of(dataset: &Dataset, config: &Config, m: &Measured) -> Row {
    let median = m.epochs.median();
    let mut row = Row {
        name: config.row_name(&dataset.label),
        config: format!(
            "{}, batch {}, {} cache, {}, {} workers, {}, batches_ahead {}",
            dataset.sample_description,
            batch_size(&dataset.label),
            if config.os_cache { "OS" } else { "process" },
            config.order.name(),
            m.workers,
            config.pipeline.description(),
            config.batches_ahead
        ) + if config.cuda {
            ", staged on cuda:0"
        } else {
            ""
        },
        samples_per_sec: m.samples_per_epoch as f64 / median,
        bytes_per_sec: m.payload_per_epoch as f64 / median,
        ..Row::default()
    };
    // Bytes fetched per payload byte: the process cache's reads from the file, or for the
    // OS cache the device reads (page faults served from RAM are free and not counted).
    let fetched = if config.os_cache {
        m.storage_per_epoch
    } else {
        m.file_read_per_epoch
    };
    let amplification =
        (m.payload_per_epoch > 0).then(|| fetched as f64 / m.payload_per_epoch as f64);
    // The process cache's read amplification is the first epoch's: later ones may
    // read less (pages kept in their slots), which says nothing about the order.
    let (amplification, retained_amplification) = if config.os_cache {
        (amplification, None)
    } else {
        (
            (m.payload_first_epoch > 0)
                .then(|| m.file_read_first_epoch as f64 / m.payload_first_epoch as f64),
            amplification,
        )
    };
    let extra = [
        ("dataset", json!(dataset.label)),
        ("epoch_seconds", m.epochs.summary()),
        (
            "batch_latency_ms",
            json!({
                "p50": quantile(&m.latencies_ms, 0.5),
                "p99": quantile(&m.latencies_ms, 0.99),
            }),
        ),
        ("peak_rss_bytes", json!(m.peak_rss)),
        ("storage_bytes_read", json!(m.storage_per_epoch)),
        ("file_bytes_read", json!(m.file_read_per_epoch)),
        ("read_amplification", json!(amplification)),
        (
            "read_amplification_later_epochs",
            json!(retained_amplification),
        ),
        (
            "time_breakdown_seconds",
            json!({
                "wait_pages": m.wait_pages,
                "decode": m.decode,
                "wait_slot": m.wait_slot,
                "epoch": median,
            }),
        ),
        ("num_workers", json!(m.workers)),
        ("epochs", json!(EPOCHS)),
    ];
    for (key, value) in extra {
        row.extra.insert(key.to_owned(), value);
    }
    row
}

/// Nanoseconds to create and enter one `debug_span!` with no subscriber installed (the
/// bench installs none), over `iterations` spans.
pub fn disabled_span_ns(iterations: u32) -> f64 {
    let started = Instant::now();
    for i in 0..iterations {
        let span = tracing::debug_span!("bench_probe", i);
        let _entered = span.enter();
        black_box(&span);
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(iterations.max(1))
}

/// The tracing-overhead row: the instrumentation points a fully instrumented epoch would
/// pass (a page-load span per page read, and stage, slot-wait and consumer-wait spans per
/// batch), times the measured cost of a disabled span, against the epoch time and its noise
/// (spread of the timed epochs of the reference row).
fn tracing_row(
    dataset: &Dataset,
    reference: &Row,
    m: &Measured,
    page_size: u64,
    transforms: &RowTransforms,
) -> Row {
    let span_ns = disabled_span_ns(1_000_000);
    let batches = m.latencies_ms.len() as f64 / EPOCHS as f64;
    let pages = (m.payload_per_epoch as f64 / page_size as f64).ceil();
    let spans_per_epoch = 3.0 * batches + pages;
    let median = m.epochs.median();
    let overhead = spans_per_epoch * span_ns * 1e-9 / median;
    let spread =
        m.epochs.seconds.last().unwrap_or(&median) - m.epochs.seconds.first().unwrap_or(&median);
    let noise = spread / median;
    let mut row = Row {
        name: tracing_row_name_with(&dataset.label, transforms),
        config: format!(
            "{} spans/epoch x {span_ns:.1} ns (disabled span, no subscriber) vs {median:.4} s epochs of {}",
            spans_per_epoch as u64, reference.name
        ),
        samples_per_sec: reference.samples_per_sec,
        bytes_per_sec: reference.bytes_per_sec,
        ratio: Some(1.0 - overhead),
        ratio_to: Some("uninstrumented bound".to_owned()),
        ..Row::default()
    };
    for (key, value) in [
        ("dataset", json!(dataset.label)),
        ("disabled_span_ns", json!(span_ns)),
        ("spans_per_epoch", json!(spans_per_epoch)),
        ("overhead_fraction", json!(overhead)),
        ("noise_fraction", json!(noise)),
        ("below_noise", json!(overhead < noise)),
    ] {
        row.extra.insert(key.to_owned(), value);
    }
    row
}

/// Marks a compiled row measured beside its interpreted twin: `ratio` is the compiled
/// row's throughput over the twin's (medians of the same alternating rounds), and
/// `round_ratios` the spread of that ratio over the rounds (twin's epoch time over this
/// row's, round by round), the noise to read it against.
fn compare_with_twin(row: &mut Row, m: &Measured, twin_name: &str, twin: &Measured) {
    let mut per_round: Vec<f64> = m
        .rounds
        .iter()
        .zip(&twin.rounds)
        .map(|(own, other)| other / own)
        .collect();
    per_round.sort_by(f64::total_cmp);
    row.ratio = Some(twin.epochs.median() / m.epochs.median());
    row.ratio_to = Some(twin_name.to_owned());
    row.extra.insert(
        "round_ratios".to_owned(),
        json!({
            "min": per_round.first(),
            "median": Timing { seconds: per_round.clone() }.median(),
            "max": per_round.last(),
        }),
    );
    row.extra
        .insert("alternated_with".to_owned(), json!(twin_name));
}

/// Measures the rows for `dataset` whose names pass `keep`. A group is measured whole when
/// any of its rows is kept (a compiled row needs its interpreted twin for its ratio). A
/// group that fails (e.g. the memory guard) gives no rows; its error goes to `progress`.
pub fn rows(
    dataset: &Dataset,
    transforms: &RowTransforms,
    keep: &dyn Fn(&str) -> bool,
    progress: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    let reader = beton_io::Reader::open(&dataset.path).map_err(|err| err.to_string())?;
    let page_size = reader.page_size();
    // Only the transforms on fields this file has apply to its rows.
    let fields: Vec<&str> = reader.fields().iter().map(|f| f.name.as_str()).collect();
    let transforms = &transforms.for_fields(&fields);
    let mut rows = Vec::new();
    let reference = reference(&dataset.label);
    let want_tracing =
        dataset.label == "3k" && keep(&tracing_row_name_with(&dataset.label, transforms));
    for group in groups(&dataset.label) {
        let names: Vec<String> = group
            .iter()
            .map(|c| c.row_name_with(&dataset.label, transforms))
            .collect();
        let has_reference = group.contains(&reference) && want_tracing;
        if !names.iter().any(|name| keep(name)) && !has_reference {
            continue;
        }
        progress(&format!("measuring {}", names.join(" + ")));
        match measure_group(dataset, &group, transforms) {
            Ok(measured) => {
                let mut group_rows: Vec<Row> = group
                    .iter()
                    .zip(&measured)
                    .zip(&names)
                    .map(|((config, m), name)| {
                        let mut row = row_of(dataset, config, m);
                        if config.runs(transforms) {
                            row.name = name.clone();
                            row.config.push_str(&transforms.description());
                        }
                        row
                    })
                    .collect();
                let is_pair = group.len() == 2
                    && measured.len() == 2
                    && group.iter().all(|c| c.pipeline.compares_compiler())
                    && group[0].pipeline.compile()
                    && !group[1].pipeline.compile();
                if is_pair {
                    compare_with_twin(&mut group_rows[0], &measured[0], &names[1], &measured[1]);
                }
                for ((config, m), row) in group.iter().zip(&measured).zip(group_rows) {
                    if *config == reference && want_tracing {
                        rows.push(tracing_row(dataset, &row, m, page_size, transforms));
                    }
                    if keep(&row.name) {
                        rows.push(row);
                    }
                }
            }
            Err(err) if group.iter().any(|c| c.cuda) && err.contains("no CUDA driver") => {
                progress(&format!("{}: skipped: no CUDA device", names.join(" + ")));
            }
            Err(err) => progress(&format!("{}: skipped: {err}", names.join(" + "))),
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cifar_matrix_covers_every_cache_order_and_worker_choice() {
        let names = row_names("3k");
        assert_eq!(names.len(), 2 * 3 * 2 + 1 + 3 * 2 + 1 + 1);
        for name in [
            "loader/3k/os/sequential/1t/copy",
            "loader/3k/proc/quasi-random/all/copy",
            "loader/3k/os/random/all/copy/ahead1",
            "loader/3k/os/random/1t/cifar-train/jit",
            "loader/3k/proc/quasi-random/all/cifar-train/interp",
            "loader/3k/tracing-overhead",
            "loader/3k/os/random/all/copy/cuda0",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        assert_eq!(
            row_names("128k"),
            [
                "loader/128k/os/random/all/copy",
                "loader/128k/proc/random/all/copy",
                "loader/128k/os/random/all/copy/cuda0"
            ]
        );
        assert_eq!(
            row_names(JPEG_LABEL),
            [
                "loader/jpeg/os/random/1t/rrc64",
                "loader/jpeg/os/random/all/rrc64",
                "loader/jpeg/proc/quasi-random/all/rrc64",
                "loader/jpeg/os/random/all/rrc64/cuda0"
            ]
        );
    }

    #[test]
    fn the_photograph_rows_cover_the_decoder_and_the_training_chain_on_both_worker_counts() {
        assert_eq!(
            row_names(PHOTOS_LABEL),
            [
                "loader/photos/os/random/1t/rrc224",
                "loader/photos/os/random/all/rrc224",
                "loader/photos/os/random/1t/imagenet-f32/jit",
                "loader/photos/os/random/1t/imagenet-f32/interp",
                "loader/photos/os/random/all/imagenet-f32/jit",
                "loader/photos/os/random/all/imagenet-f32/interp",
                "loader/photos/os/random/1t/imagenet-f16/jit",
                "loader/photos/os/random/1t/imagenet-f16/interp",
                "loader/photos/os/random/all/imagenet-f16/jit",
                "loader/photos/os/random/all/imagenet-f16/interp",
                "loader/photos/os/random/all/rrc224/cuda0"
            ]
        );
        assert_eq!(batch_size(PHOTOS_LABEL), 128);
    }

    #[test]
    fn only_a_pipeline_the_executor_runs_is_labelled_as_a_compiler_comparison() {
        for label in ["3k", "128k", JPEG_LABEL, PHOTOS_LABEL] {
            for group in groups(label) {
                for config in &group {
                    let name = config.row_name(label);
                    let labelled = name.contains("/jit") || name.contains("/interp");
                    assert_eq!(labelled, config.pipeline.compares_compiler(), "{name}");
                    // Copy-only rows keep the default (compiled) setting: there is no code
                    // for the compiler to act on, so they are not run twice.
                    if !config.pipeline.compares_compiler() {
                        assert_eq!(group.len(), 1, "{name} is measured alone");
                        assert!(config.pipeline.compile(), "{name}");
                    }
                }
                // A comparison is a compiled row and its interpreted twin, measured in one
                // alternating group and otherwise configured alike.
                if group.iter().any(|c| c.pipeline.compares_compiler()) {
                    let [jit, interp] = group.as_slice() else {
                        panic!("{group:?} is not a pair");
                    };
                    assert!(jit.pipeline.compile());
                    assert_eq!(*interp, jit.with(jit.pipeline.interpreted()));
                    assert!(jit.pipeline.compile() && !interp.pipeline.compile());
                }
            }
        }
        assert!(
            groups("3k").iter().any(|g| g.len() == 2),
            "the CIFAR matrix compares the compiler"
        );
    }

    /// A small CIFAR-like data set labelled `3k` (so rows get the 3k batch size, 512).
    fn small_cifar(dir: &Path) -> Dataset {
        let mut recipe = crate::datasets::small().remove(1);
        assert_eq!(recipe.label, "3k");
        recipe.samples = 1030;
        recipe.page_size = 2 << 20;
        crate::datasets::ensure(dir, &recipe, &|_| {}).unwrap()
    }

    fn first_batch(
        dataset: &Dataset,
        config: &Config,
    ) -> (Vec<ffcv::OutputInfo>, Vec<u64>, Vec<u8>) {
        let mut loader = builder(dataset, config, &RowTransforms::default())
            .unwrap()
            .build()
            .unwrap();
        let outputs = loader.outputs().to_vec();
        let batch = loader.iter().next().unwrap().unwrap();
        let image = batch.output("image").unwrap().bytes().to_vec();
        (outputs, batch.sample_ids().to_vec(), image)
    }

    #[test]
    fn compiled_and_interpreted_rows_run_the_cifar_training_chain_and_copy_rows_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = small_cifar(dir.path());
        let base = Config {
            os_cache: true,
            order: OrderName::Random,
            workers: Some(2),
            pipeline: PipelineName::Copy,
            batches_ahead: 3,
            cuda: false,
        };
        let image = |outputs: &[ffcv::OutputInfo]| {
            let info = outputs.iter().find(|o| o.name == "image").unwrap().clone();
            (info.shape, info.dtype.descr())
        };
        let (copy_outputs, copy_ids, pixels) = first_batch(&dataset, &base);
        assert_eq!(image(&copy_outputs), (vec![32, 32, 3], "|u1".to_owned()));
        let jit = first_batch(
            &dataset,
            &base.with(PipelineName::CifarTrain { compile: true }),
        );
        let interp = first_batch(
            &dataset,
            &base.with(PipelineName::CifarTrain { compile: false }),
        );
        for (outputs, ids, _) in [&jit, &interp] {
            assert_eq!(image(outputs), (vec![3, 32, 32], "<f4".to_owned()));
            assert_eq!(*ids, copy_ids, "same seed, same order");
        }
        assert!(jit.2 == interp.2, "compiled and interpreted batches differ");

        // Every sample is its stored pixels, normalized per channel and laid out CHW,
        // mirrored or not; the flip draws both outcomes over a batch of 512.
        let values: Vec<f32> = jit
            .2
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (mut flipped, mut kept) = (0, 0);
        for sample in 0..copy_ids.len() {
            let stored = &pixels[sample * 3072..][..3072];
            let out = &values[sample * 3072..][..3072];
            let matches = |mirror: bool| {
                (0..3).all(|c| {
                    (0..32).all(|y| {
                        (0..32).all(|x| {
                            let sx = if mirror { 31 - x } else { x };
                            let v = f64::from(stored[(y * 32 + sx) * 3 + c]);
                            let want = (v - CIFAR_MEAN[c]) / CIFAR_STD[c];
                            (f64::from(out[(c * 32 + y) * 32 + x]) - want).abs() < 1e-5
                        })
                    })
                })
            };
            match (matches(false), matches(true)) {
                (true, _) => kept += 1,
                (false, true) => flipped += 1,
                (false, false) => panic!("sample {sample} is neither its pixels nor their mirror"),
            }
        }
        assert_eq!(kept + flipped, 512);
        assert!(kept > 0 && flipped > 0, "kept {kept}, flipped {flipped}");
    }

    #[test]
    fn a_compiled_row_carries_its_ratio_to_the_interpreted_twin_of_the_same_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let dataset = small_cifar(dir.path());
        let alone = rows(
            &dataset,
            &RowTransforms::default(),
            &|name| name == "loader/3k/os/random/1t/cifar-train/interp",
            &|_| {},
        )
        .unwrap();
        // Keeping only the twin still measures the pair; only the kept row comes back.
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].name, "loader/3k/os/random/1t/cifar-train/interp");
        assert_eq!(alone[0].ratio, None);

        let pair = rows(
            &dataset,
            &RowTransforms::default(),
            &|name| name.starts_with("loader/3k/os/random/1t/cifar-train/"),
            &|_| {},
        )
        .unwrap();
        let [jit, interp] = pair.as_slice() else {
            panic!("{pair:?}");
        };
        assert_eq!(jit.name, "loader/3k/os/random/1t/cifar-train/jit");
        assert_eq!(interp.name, "loader/3k/os/random/1t/cifar-train/interp");
        assert_eq!(jit.ratio_to.as_deref(), Some(interp.name.as_str()));
        let ratio = jit.ratio.unwrap();
        assert!(ratio.is_finite() && ratio > 0.0);
        let expected = jit.samples_per_sec / interp.samples_per_sec;
        assert!(
            (ratio - expected).abs() < 1e-9 * expected,
            "{ratio} vs {expected}"
        );
        let spread = &jit.to_json()["round_ratios"];
        let (min, max) = (
            spread["min"].as_f64().unwrap(),
            spread["max"].as_f64().unwrap(),
        );
        assert!(min <= max, "{spread}");
        assert_eq!(jit.extra["alternated_with"], interp.name.as_str());
        assert!(jit.config.contains("compiled") && interp.config.contains("interpreted"));
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), Some(50.0));
        assert_eq!(quantile(&values, 0.99), Some(99.0));
        assert_eq!(quantile(&values, 1.0), Some(100.0));
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_row_reports_every_figure_under_its_stable_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.beton");
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/ffcv-1.0.2/scalars.beton"
            ),
            &path,
        )
        .unwrap();
        let dataset = Dataset {
            path,
            label: "scalars".to_owned(),
            field: "value".to_owned(),
            sample_description: "int + float".to_owned(),
        };
        let config = Config {
            os_cache: false,
            order: OrderName::Random,
            workers: Some(1),
            pipeline: PipelineName::Copy,
            batches_ahead: 1,
            cuda: false,
        };
        let m = measure(&dataset, &config).unwrap();
        // 100 samples, batch 64, drop_last: one batch of 64 per epoch.
        assert_eq!(m.samples_per_epoch, 64);
        assert_eq!(m.latencies_ms.len(), EPOCHS);
        assert_eq!(m.workers, 1);
        // Each sample's payload is its two scalars (8 bytes each).
        assert_eq!(m.payload_per_epoch, 64 * 16);
        let row = row_of(&dataset, &config, &m).to_json();
        assert_eq!(row["name"], "loader/scalars/proc/random/1t/copy/ahead1");
        for key in [
            "epoch_seconds",
            "batch_latency_ms",
            "peak_rss_bytes",
            "storage_bytes_read",
            "file_bytes_read",
            "read_amplification",
            "time_breakdown_seconds",
        ] {
            assert!(!row[key].is_null(), "{key} missing in {row}");
        }
        assert_eq!(row["dataset"], "scalars");
        assert!(row["samples_per_sec"].as_f64().unwrap() > 0.0);
    }
}
