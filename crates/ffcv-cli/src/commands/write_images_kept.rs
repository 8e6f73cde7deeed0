//! `ffcv write image-folder --keep-pixels`: the folder's images kept as they are (gray,
//! 16-bit, RGBA) in an `ImageField` (beton-io's `fields/image.rs`: an ffcv-rs extension
//! FFCV 1.0.2 reads as a `BytesField` of the stored image bytes) instead of FFCV's RGB8
//! `RGBImageField`. The field's kind (channels, bits) is the first image's; every other
//! image must be of that kind. JPEGs, and PNGs of exactly that kind, are stored byte for
//! byte; other PNGs (palettes, low-depth gray) are decoded and stored raw.

use std::sync::atomic::{AtomicU64, Ordering};

use beton_io::{FieldSpec, FieldType, FieldValue, from_fn};
use ffcv::image::{
    ImageError, ImageFolder, StoredFormat, native_args, store_image_bytes, stored_header,
};

use super::write_output::{WriteTarget, print_shards, progress_bar, written};
use crate::error::{CliError, Result};

fn read(path: &std::path::Path) -> std::result::Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|source| {
        ImageError::Io {
            path: path.to_path_buf(),
            source,
        }
        .to_string()
    })
}

/// Writes `folder` (scanned from `src`, unreadable files skipped if asked) to `out` as
/// `image` (ImageField) and `label` (IntField).
pub fn image_folder_kept(
    src: &std::path::Path,
    out: &std::path::Path,
    target: &WriteTarget,
    folder: &ImageFolder,
) -> Result<()> {
    let images = folder.images();
    let first = images.first().ok_or_else(|| CliError::ImageFolder {
        path: src.to_path_buf(),
        reason: "no images to take the kind from".into(),
    })?;
    let bad = |path: &std::path::Path, reason: String| CliError::ImageFolder {
        path: path.to_path_buf(),
        reason,
    };
    let kind = read(&first.path)
        .and_then(|b| native_args(&b).map_err(|e| e.to_string()))
        .map_err(|e| bad(&first.path, e))?;
    let fields = vec![
        FieldSpec::new("image", FieldType::Image(kind)),
        FieldSpec::new("label", FieldType::Int),
    ];
    let writer = target.writer(out, fields)?;
    let kept = AtomicU64::new(0);
    let n = images.len() as u64;
    target.shards.check(n, "images")?;
    let part = target.shards.samples(n);
    let bar = progress_bar(part.end - part.start, "images");
    let shards = {
        let bar = bar.clone();
        let source = from_fn(n, |i| {
            let entry = &images[i as usize];
            let bytes = read(&entry.path)?;
            let stored = store_image_bytes(&bytes, kind)
                .map_err(|e| format!("{}: {e}", entry.path.display()))?;
            if stored_header(&stored).is_ok_and(|h| h.format != StoredFormat::Raw) {
                kept.fetch_add(1, Ordering::Relaxed);
            }
            Ok(vec![
                FieldValue::Bytes(stored),
                FieldValue::Int(entry.label),
            ])
        });
        target.shards.write(
            &writer.with_progress(move |done| bar.set_position(done)),
            &source,
        )
    };
    bar.finish_and_clear();
    let shards = shards?;
    let (summary, name) = written(&shards);
    let classes = folder.classes();
    let stored = part.end - part.start;
    let kept = kept.load(Ordering::Relaxed);
    println!(
        "wrote {name}: {} images in {} classes ({}), kept as they are ({} channels, {} bits): \
         {kept} JPEG/PNG files byte for byte + {} raw, {} data pages, {} bytes",
        summary.num_samples,
        classes.len(),
        classes.join(", "),
        kind.channels,
        kind.bits,
        stored - kept,
        summary.num_pages,
        summary.file_size
    );
    print_shards(&shards);
    Ok(())
}
