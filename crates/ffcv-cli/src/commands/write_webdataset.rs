//! `ffcv write webdataset INPUT... OUT`: WebDataset tar shards as an FFCV `.beton` file.
//!
//! The inputs are expanded and sorted ([`crate::webdataset::expand_inputs`]), every tar
//! header is scanned into records, and the fields are the `--field NAME=EXT:KIND` flags
//! or, without them, inferred from the first record ([`crate::webdataset_fields`]); the
//! fields used are printed as flags, so a run can be repeated with them. Record `i` of
//! the sorted shards is sample `i` of the file (or of the set, with `--shards`). A
//! record that cannot be converted stops the write with an error naming its shard and
//! key; with `--skip-unreadable` every record is checked first (images decoded, `cls`,
//! `json` and `npy` members parsed, tar structure followed), and the bad ones are left
//! out, listed on stdout and in `OUT.skipped.json`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use beton_io::from_fn;
use ffcv::image::ImageMode;

use super::write_images::{ImageOptions, image_store, passed_note};
use super::write_output::{WriteTarget, print_shards, progress_bar, written};
use crate::error::{CliError, Result};
use crate::webdataset::{Shards, expand_inputs, shard_error};
use crate::webdataset_fields::{Converter, FieldMap, field_specs, infer};

/// Arguments of `ffcv write webdataset`.
#[derive(clap::Args, Debug)]
pub struct WebDatasetArgs {
    /// The tar shards: paths, glob patterns (`data/*.tar`) and brace lists
    /// (`shard-{000..009}.tar`, `{train,extra}.tar`), expanded and sorted byte-wise.
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    /// The .beton file to write.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// A field, NAME=EXT:KIND: the record member with extension EXT stored as KIND
    /// (image, int, json, array, bytes), e.g. `--field image=jpg:image --field
    /// label=cls:int`. Repeat it for each field, in file order. Without it the fields are
    /// the first record's members, named by extension: jpg/jpeg/png images, cls ints,
    /// json JSON, npy arrays (dtype and shape of the first record's), others bytes.
    #[arg(long = "field", value_name = "NAME=EXT:KIND")]
    pub fields: Vec<String>,
    /// The image options.
    #[command(flatten)]
    pub image: ImageOptions,
    /// Leave out records that cannot be converted (a broken tar member, an image that does
    /// not decode, a cls that is not an integer, a missing member, an array of another
    /// shape) instead of failing: every record is checked once beforehand (on every
    /// process of a --shard-index job, since the split counts the records kept); they
    /// are listed at the end and in OUT.skipped.json.
    #[arg(long)]
    pub skip_unreadable: bool,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// A record left out by `--skip-unreadable`.
struct Skipped {
    shard: PathBuf,
    key: Option<String>,
    error: String,
}

/// Runs `ffcv write webdataset`.
pub fn run(args: &WebDatasetArgs) -> Result<()> {
    let images = image_store(&args.image)?;
    let given: Vec<FieldMap> = args
        .fields
        .iter()
        .map(|f| FieldMap::parse(f))
        .collect::<Result<_>>()?;
    for (i, map) in given.iter().enumerate() {
        if given[..i].iter().any(|m| m.name == map.name) {
            return Err(CliError::Usage(format!(
                "--field {}: the field `{}` is given twice",
                map.flag(),
                map.name
            )));
        }
    }
    let shards = Shards::scan(expand_inputs(&args.inputs)?, args.skip_unreadable)?;
    let Some(first) = shards
        .records
        .iter()
        .find(|r| r.problem.is_none())
        .or(shards.records.first())
    else {
        if let Some(broken) = shards.broken.first() {
            return Err(shard_error(
                &shards.paths[broken.shard],
                broken.reason.clone(),
            ));
        }
        let path = shards.paths.first().map_or(Path::new(""), PathBuf::as_path);
        return Err(shard_error(
            path,
            format!("no records in the {} shards given", shards.paths.len()),
        ));
    };
    let maps = if given.is_empty() {
        infer(first)
    } else {
        given
    };
    let flags: Vec<String> = maps
        .iter()
        .map(|m| format!("--field {}", m.flag()))
        .collect();
    println!("fields: {}", flags.join(" "));
    let specs = field_specs(&maps, &shards, first)?;
    let converter = Converter {
        shards: &shards,
        maps: &maps,
        specs: &specs,
        images: &images,
    };
    let workers = args.target.threads();
    let (kept, skipped) = if args.skip_unreadable {
        check_records(&converter, workers)
    } else {
        ((0..shards.records.len()).collect(), Vec::new())
    };
    let n = kept.len() as u64;
    let out = args.target.shards.writer_path(&args.out);
    if n == 0 {
        report_skipped(&skipped, &shards, &out)?;
        return Err(shard_error(
            shards.path_of(first),
            format!(
                "every one of the {} records was skipped as unreadable",
                shards.records.len()
            ),
        ));
    }
    args.target.shards.check(n, "records")?;
    let writer = args
        .target
        .writer(&args.out, specs.clone())?
        .with_num_workers(workers);
    let (raw, jpg) = (AtomicU64::new(0), AtomicU64::new(0));
    let part = args.target.shards.samples(n);
    let bar = progress_bar(part.end - part.start, "records");
    let written_shards = {
        let bar = bar.clone();
        let source = from_fn(n, |i| {
            let record = &shards.records[kept[i as usize]];
            let (values, mode) = converter.convert(record, i, false)?;
            match mode {
                Some(ImageMode::Raw) => raw.fetch_add(1, Ordering::Relaxed),
                Some(ImageMode::Jpeg) => jpg.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            Ok(values)
        });
        args.target.shards.write(
            &writer.with_progress(move |done| bar.set_position(done)),
            &source,
        )
    };
    bar.finish_and_clear();
    let written_shards = written_shards?;
    let (summary, name) = written(&written_shards);
    let images = if maps
        .iter()
        .any(|m| m.kind == crate::webdataset_fields::Kind::Image)
    {
        format!(
            ", first image field {} raw + {} jpg{}",
            raw.load(Ordering::Relaxed),
            jpg.load(Ordering::Relaxed),
            passed_note(&images)
        )
    } else {
        String::new()
    };
    println!(
        "wrote {name}: {} records from {} shards{images}, {} data pages, {} bytes",
        summary.num_samples,
        shards.paths.len(),
        summary.num_pages,
        summary.file_size
    );
    print_shards(&written_shards);
    if args.skip_unreadable {
        report_skipped(&skipped, &shards, &out)?;
    }
    Ok(())
}

/// Converts every record once (images decoded, not encoded) on `workers` threads: the
/// records that convert, in order, and the ones that do not, with the broken shards.
fn check_records(converter: &Converter<'_>, workers: usize) -> (Vec<usize>, Vec<Skipped>) {
    let records = &converter.shards.records;
    let bar = progress_bar(records.len() as u64, "records checked");
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(records.len()).max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(record) = records.get(i) else { return };
                    if let Err(error) = converter.convert(record, i as u64, true) {
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((i, error));
                    }
                    bar.inc(1);
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    failures.sort_by_key(|&(i, _)| i);
    let mut skipped: Vec<Skipped> = converter
        .shards
        .broken
        .iter()
        .map(|b| Skipped {
            shard: converter.shards.paths[b.shard].clone(),
            key: None,
            error: b.reason.clone(),
        })
        .collect();
    let mut bad = failures.iter().map(|&(i, _)| i).peekable();
    let kept = (0..records.len())
        .filter(|&i| {
            if bad.peek() == Some(&i) {
                bad.next();
                false
            } else {
                true
            }
        })
        .collect();
    skipped.extend(failures.into_iter().map(|(i, error)| Skipped {
        shard: converter.shards.path_of(&records[i]).to_path_buf(),
        key: Some(records[i].key.clone()),
        error,
    }));
    (kept, skipped)
}

/// Prints the records left out and writes them to `OUT.skipped.json`.
fn report_skipped(skipped: &[Skipped], shards: &Shards, out: &Path) -> Result<()> {
    println!(
        "skipped {} unreadable records or shard tails:",
        skipped.len()
    );
    for s in skipped {
        match &s.key {
            Some(_) => println!("  {}", s.error),
            None => println!(
                "  {}: {}",
                crate::object_io::display_name(&s.shard),
                s.error
            ),
        }
    }
    let path = |p: &Path| serde_json::Value::from(crate::object_io::display_name(p));
    let doc = serde_json::json!({
        "shards": shards.paths.iter().map(|p| path(p)).collect::<Vec<_>>(),
        "records": shards.records.len(),
        "skipped": skipped.iter().map(|s| serde_json::json!({
            "shard": path(&s.shard),
            "key": s.key,
            "error": s.error,
        })).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    crate::object_io::write_skip_report(out, text.as_bytes())
}
