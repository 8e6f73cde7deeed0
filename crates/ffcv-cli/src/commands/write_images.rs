//! `ffcv write image-folder SRC OUT`: an image folder (one subfolder per class) as an FFCV
//! `.beton` file, and the JPEG options of `ffcv write synthetic --kind jpeg`.
//!
//! Classes are the subfolders of SRC in sorted (byte-wise) order; a class's label is its
//! position in that order, as torchvision's `ImageFolder` (what FFCV's examples write
//! from). Each class's `.jpg`/`.jpeg`/`.png` files are taken in sorted order and decoded as
//! `PIL.Image.open(p).convert("RGB")` ([`ImageFolder`]); `--skip-unreadable` skips the ones
//! that fail instead of stopping, and lists them. Images are
//! encoded as FFCV's `RGBImageField(write_mode, max_resolution, smart_threshold,
//! jpeg_quality, compress_probability)` does (`ffcv::image::RgbImageEncoder`), on every core by
//! default; the fields are `image` (RGBImageField) and `label` (IntField), FFCV's layout.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use beton_io::{FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::image::{FolderError, ImageError, ImageFolder, ImageMode};
use ffcv_ingest::WriteModeName;
use ffcv_ingest::jpeg_passthrough::{ImageStore, StoreError};

use super::write_output::{WriteTarget, print_shards, progress_bar, written};
use crate::byte_size::parse_byte_size;
use crate::error::{CliError, Result};

/// FFCV's `write_mode` on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteModeArg {
    /// Raw pixels (FFCV's default).
    Raw,
    /// Always JPEG.
    Jpg,
    /// JPEG only for images whose raw pixels exceed --smart-threshold bytes.
    Smart,
    /// JPEG with probability --compress-probability per image.
    Proportion,
}

/// Arguments of `ffcv write image-folder`.
#[derive(clap::Args, Debug)]
pub struct ImageFolderArgs {
    /// The image folder: one subfolder per class, holding JPEG and PNG files.
    pub src: PathBuf,
    /// The .beton file to write.
    pub out: PathBuf,
    /// The image options.
    #[command(flatten)]
    pub image: ImageOptions,
    /// Skip files that cannot be decoded (corrupt, truncated, not an image) instead of
    /// failing: every image is decoded once more beforehand to find them; they are listed at
    /// the end and in OUT.skipped.json. Labels still follow the sorted class folders.
    #[arg(long)]
    pub skip_unreadable: bool,
    /// Keep each image as it is (gray, 16-bit, RGBA) instead of FFCV's RGB8: an ImageField
    /// (an ffcv-rs extension FFCV reads as bytes) of the first image's channels and bits;
    /// every image must be of that kind (docs/writing.md).
    #[arg(long)]
    pub keep_pixels: bool,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// How images are stored: FFCV's `RGBImageField` options (`ffcv write image-folder`,
/// `ffcv write webdataset`).
#[derive(clap::Args, Debug, Clone)]
pub struct ImageOptions {
    /// How images are stored.
    #[arg(long, value_enum, default_value = "raw")]
    pub write_mode: WriteModeArg,
    /// Longest side after writing: larger images are area-downscaled keeping their aspect.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65535))]
    pub max_resolution: Option<u32>,
    /// JPEG quality, 1..=100.
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub jpeg_quality: u8,
    /// `smart` mode: raw images above this many bytes are stored as JPEG (e.g. `200KiB`).
    #[arg(long, value_parser = parse_byte_size)]
    pub smart_threshold: Option<u64>,
    /// `proportion` mode: the probability that an image is stored as JPEG.
    #[arg(long, default_value_t = 0.5, value_parser = crate::numeric_flags::probability)]
    pub compress_probability: f64,
    /// Seed of the `proportion` mode's draws: image i is JPEG when the first draw of
    /// `ffcv::image::sample_generator(seed, i)` falls below --compress-probability. The
    /// same seed writes the same file; the Python writer (`ffcv_rs`) writes with seed 0.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Store a source JPEG's bytes unchanged (no decode, no re-encode) when the write mode
    /// would store it as JPEG, it fits --max-resolution, and the loader's fast decoder
    /// takes it (baseline, 8-bit, gray or 3 components sampled 4:4:4, 4:2:2, 4:4:0 or
    /// 4:2:0); other images are decoded and encoded as without it.
    #[arg(long)]
    pub jpeg_passthrough: bool,
}

/// Options of `ffcv write synthetic` that only `--kind jpeg` uses.
#[derive(clap::Args, Debug, Clone)]
pub struct SyntheticJpegArgs {
    /// `jpeg`, `photos`: the smallest image side (default 160; photos 350).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub min_size: Option<u16>,
    /// `jpeg`, `photos`: the largest image side (default 256; photos 500, at most 560).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_size: Option<u16>,
    /// `jpeg`, `photos`: the JPEG quality, 1..=100 (default 90).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub jpeg_quality: Option<u8>,
}

impl SyntheticJpegArgs {
    /// Applies the options to `spec`; they are a usage error for other kinds.
    pub fn apply(&self, spec: &mut ffcv_cli::synthetic::Spec) -> Result<()> {
        let given =
            self.min_size.is_some() || self.max_size.is_some() || self.jpeg_quality.is_some();
        use ffcv_cli::synthetic::Kind;
        if !matches!(spec.kind, Kind::Jpeg | Kind::Photos) {
            if given {
                return Err(CliError::Usage(format!(
                    "--min-size, --max-size and --jpeg-quality apply to --kind jpeg or photos, \
                     not to {}",
                    spec.kind.name()
                )));
            }
            return Ok(());
        }
        let min = self.min_size.map_or(spec.shape[0], u64::from);
        let max = self.max_size.map_or(spec.shape[1].max(min), u64::from);
        if min > max {
            return Err(CliError::Usage(format!(
                "--min-size {min} is above --max-size {max}"
            )));
        }
        spec.shape = vec![min, max];
        if let Some(q) = self.jpeg_quality {
            spec.jpeg_quality = q;
        }
        Ok(())
    }
}

/// A folder that cannot be used, as the CLI reports it (exit 1).
fn folder_error(err: FolderError) -> CliError {
    let path = match &err {
        FolderError::NotAFolder { path }
        | FolderError::List { path, .. }
        | FolderError::NoClasses { path }
        | FolderError::NoImages { path, .. } => path.clone(),
    };
    // The error's text starts with the path; the variant prints it once.
    let text = err.to_string();
    let prefix = format!("{}: ", path.display());
    let reason = text.strip_prefix(&prefix).unwrap_or(&text).to_owned();
    CliError::ImageFolder { path, reason }
}

impl ImageOptions {
    /// The conversion library's image options: the same values.
    pub fn options(&self) -> ffcv_ingest::ImageOptions {
        ffcv_ingest::ImageOptions {
            write_mode: match self.write_mode {
                WriteModeArg::Raw => WriteModeName::Raw,
                WriteModeArg::Jpg => WriteModeName::Jpg,
                WriteModeArg::Smart => WriteModeName::Smart,
                WriteModeArg::Proportion => WriteModeName::Proportion,
            },
            max_resolution: self.max_resolution,
            jpeg_quality: self.jpeg_quality,
            smart_threshold: self.smart_threshold,
            compress_probability: self.compress_probability,
            seed: self.seed,
            jpeg_passthrough: self.jpeg_passthrough,
        }
    }
}

/// The image store the options describe (a usage error when they do not fit together,
/// or with `--jpeg-passthrough` and `--write-mode raw`, which stores no JPEG).
pub fn image_store(args: &ImageOptions) -> Result<ImageStore> {
    Ok(args.options().image_store()?)
}

/// `" (N stored unchanged)"` with `--jpeg-passthrough`, else nothing.
pub fn passed_note(store: &ImageStore) -> String {
    if store.passthrough {
        format!(" ({} stored unchanged)", store.passed_through())
    } else {
        String::new()
    }
}

/// Runs `ffcv write image-folder`.
pub fn image_folder(args: &ImageFolderArgs) -> Result<()> {
    let store = image_store(&args.image)?;
    let mut folder = ImageFolder::scan(&args.src).map_err(folder_error)?;
    if args.skip_unreadable {
        folder
            .skip_unreadable(args.target.workers.unwrap_or(0))
            .map_err(folder_error)?;
    }
    if args.keep_pixels {
        if args.image.max_resolution.is_some() || args.image.jpeg_passthrough {
            return Err(CliError::ImageFolder {
                path: args.src.clone(),
                reason: "--keep-pixels stores every image as it is: it takes neither \
                         --max-resolution nor --jpeg-passthrough"
                    .into(),
            });
        }
        return super::write_images_kept::image_folder_kept(
            &args.src,
            &args.out,
            &args.target,
            &folder,
        );
    }
    let fields = vec![
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ];
    let writer = args.target.writer(&args.out, fields)?;
    let (raw, jpg) = (AtomicU64::new(0), AtomicU64::new(0));
    let images = folder.images();
    let n = images.len() as u64;
    args.target.shards.check(n, "images")?;
    let part = args.target.shards.samples(n);
    let bar = progress_bar(part.end - part.start, "images");
    let shards = {
        let bar = bar.clone();
        let source = from_fn(n, |i| {
            let entry = &images[i as usize];
            let file = |source| ImageError::File {
                path: entry.path.clone(),
                source: Box::new(source),
            };
            let bytes = std::fs::read(&entry.path).map_err(|source| ImageError::Io {
                path: entry.path.clone(),
                source,
            })?;
            // The writers' one seeding rule (`ffcv::image::sample_generator`), which the
            // Python writer follows too: the same folder gives the same file.
            let encoded = store.store(&bytes, i).map_err(|err| match err {
                StoreError::Decode(err) => file(err).to_string(),
                StoreError::Encode(err) => {
                    format!("{}: cannot encode: {err}", entry.path.display())
                }
            })?;
            match encoded.mode {
                ImageMode::Raw => raw.fetch_add(1, Ordering::Relaxed),
                ImageMode::Jpeg => jpg.fetch_add(1, Ordering::Relaxed),
            };
            Ok(vec![encoded.into(), FieldValue::Int(entry.label)])
        });
        args.target.shards.write(
            &writer.with_progress(move |done| bar.set_position(done)),
            &source,
        )
    };
    bar.finish_and_clear();
    let shards = shards?;
    let (summary, name) = written(&shards);
    let classes = folder.classes();
    println!(
        "wrote {name}: {} images in {} classes ({}), {} raw + {} jpg{}, {} data pages, {} \
         bytes",
        summary.num_samples,
        classes.len(),
        classes.join(", "),
        raw.load(Ordering::Relaxed),
        jpg.load(Ordering::Relaxed),
        passed_note(&store),
        summary.num_pages,
        summary.file_size
    );
    print_shards(&shards);
    println!(
        "ignored {} non-image files in the class folders",
        folder.non_images().len()
    );
    if args.skip_unreadable {
        let skipped = folder.skipped();
        println!("skipped {} unreadable files:", skipped.len());
        for u in skipped {
            println!("  {}: {}", u.path.display(), u.error);
        }
        let report = ffcv_ingest::object_io::write_skip_report(
            &args.target.shards.writer_path(&args.out),
            folder.report_json().as_bytes(),
        )?;
        println!("listed in {report}");
    }
    Ok(())
}
