//! `ffcv write parquet|arrow|tfrecord INPUT... OUT`: Parquet files, Arrow IPC files or
//! TFRecord files of `tf.train.Example`s as an FFCV `.beton` file.
//!
//! The inputs are expanded and sorted as WebDataset shards are
//! ([`crate::webdataset::expand_inputs`]; a folder stands for its files of the format),
//! the files are opened (footers or record headers read), and the fields are the
//! `--field NAME=COLUMN:KIND` flags or, without them, inferred from the first record
//! ([`crate::table_fields`]); the fields used are printed as flags. Record `i` of the
//! sorted files is sample `i` of the file (or of the set, with `--shards`). A record that
//! cannot be converted stops the write with an error naming its file and the record;
//! with `--skip-unreadable` every record is checked first and the bad ones are left out,
//! listed on stdout and in `OUT.skipped.json`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use beton_io::from_fn;
use ffcv::image::ImageMode;

use super::write_images::{ImageOptions, image_store, passed_note};
use super::write_output::{WriteTarget, print_shards, progress_bar, written};
use crate::error::{CliError, Result};
use crate::table_fields::{
    Cell, Converter, FieldMap, Kind, Table, field_specs, infer, input_error, var_array_rows,
};
use crate::webdataset::expand_inputs;

/// Which reader the command uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Parquet files.
    Parquet,
    /// Arrow IPC stream or file format.
    Arrow,
    /// TFRecord files of `tf.train.Example`s.
    TfRecord,
}

impl Format {
    /// Whether a file in a folder given as an input is one of the format's.
    fn takes(self, name: &str) -> bool {
        match self {
            Format::Parquet => name.ends_with(".parquet"),
            Format::Arrow => name.ends_with(".arrow") || name.ends_with(".feather"),
            Format::TfRecord => name.contains(".tfrecord"),
        }
    }
}

/// Arguments of `ffcv write parquet`, `ffcv write arrow` and `ffcv write tfrecord`.
#[derive(clap::Args, Debug)]
pub struct TableArgs {
    /// The input files: paths, glob patterns (`data/*.parquet`) and brace lists
    /// (`train-{00000..00003}-of-00004.tfrecord`), expanded and sorted byte-wise; a folder
    /// stands for its files of the format (`*.parquet`; `*.arrow`, as `save_to_disk`
    /// writes them; names holding `.tfrecord`).
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
    /// The .beton file to write.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// A field, NAME=COLUMN:KIND: the column (TFRecord: the feature key) stored as KIND
    /// (image, int, float, json, array, var_array, bytes), e.g. `--field image=image:image
    /// --field label=label:int --field tokens=input_ids:var_array`. Repeat it for each
    /// field, in file order. `array` is an NDArrayField (every record the first record's
    /// dtype and shape); `var_array` a VarArrayField (every record the first record's
    /// dtype and row shape, any number of rows, 0 too). Without it the fields are inferred
    /// from the first record: image structs and JPEG/PNG bytes images, integers ints,
    /// floats floats, strings and other bytes bytes; for Parquet and Arrow, columns of a
    /// variable-size list type (List, LargeList) of numbers var_array, fixed-size lists
    /// array; for TFRecord, which has no schema, numeric lists array (var_array only
    /// with --field).
    #[arg(long = "field", value_name = "NAME=COLUMN:KIND")]
    pub fields: Vec<String>,
    /// The image options.
    #[command(flatten)]
    pub image: ImageOptions,
    /// Leave out records that cannot be converted (an image that does not decode, a null,
    /// a value of another kind, a TFRecord checksum mismatch, a row group that does not
    /// decode) instead of failing: every record is checked once beforehand; they are
    /// listed at the end and in OUT.skipped.json.
    #[arg(long)]
    pub skip_unreadable: bool,
    /// Page size, writer threads and shards.
    #[command(flatten)]
    pub target: WriteTarget,
}

/// A record left out by `--skip-unreadable` (`record` is `None` for a file's broken tail).
struct Skipped {
    file: PathBuf,
    record: Option<u64>,
    error: String,
}

/// The input files: `inputs` expanded, folders replaced by their files of `format`.
fn input_files(format: Format, inputs: &[String]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in expand_inputs(inputs)? {
        if !path.is_dir() {
            files.push(path);
            continue;
        }
        let entries = std::fs::read_dir(&path)
            .map_err(|e| input_error(&path, format!("cannot list the folder: {e}")))?;
        let before = files.len();
        for entry in entries {
            let entry =
                entry.map_err(|e| input_error(&path, format!("cannot list the folder: {e}")))?;
            if entry.file_name().to_str().is_some_and(|n| format.takes(n)) && entry.path().is_file()
            {
                files.push(entry.path());
            }
        }
        if files.len() == before {
            return Err(input_error(
                &path,
                "the folder holds no input file of this format",
            ));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Runs `ffcv write parquet`, `arrow` or `tfrecord`.
pub fn run(format: Format, args: &TableArgs) -> Result<()> {
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
    let files = input_files(format, &args.inputs)?;
    let workers = args.target.threads();
    let keep_going = args.skip_unreadable;
    let table: Box<dyn Table> = match format {
        Format::Parquet => Box::new(crate::parquet_input::ParquetTable::open(
            files.clone(),
            workers,
            keep_going,
        )?),
        Format::Arrow => Box::new(crate::arrow_input::ArrowTable::open(
            files.clone(),
            workers,
            keep_going,
        )?),
        Format::TfRecord => Box::new(crate::tfrecord::TfRecordTable::open(
            files.clone(),
            keep_going,
        )?),
    };
    let table = table.as_ref();
    let columns = table.columns();
    let all: Vec<&str> = columns.iter().map(String::as_str).collect();
    // The first record that reads (with --skip-unreadable; else record 0, or its error).
    let mut first = None;
    for i in 0..table.num_records() {
        match table.cells(i, &all) {
            Ok(cells) => {
                first = Some((i, cells));
                break;
            }
            Err(_) if keep_going => {}
            Err(reason) => {
                let (path, _, place) = table.locate(i);
                return Err(input_error(path, format!("{place}: {reason}")));
            }
        }
    }
    let Some((first, first_cells)) = first else {
        if let Some((path, reason)) = table.broken().first() {
            return Err(input_error(path, reason.clone()));
        }
        let path = files.first().map_or(Path::new(""), PathBuf::as_path);
        return Err(input_error(
            path,
            format!(
                "no readable records in the {} {} files given",
                files.len(),
                table.format()
            ),
        ));
    };
    let maps = if given.is_empty() {
        let (maps, left_out) = infer(&columns, &first_cells, &table.var_list_columns());
        for (column, why) in left_out {
            println!("left out: column `{column}` ({why})");
        }
        maps
    } else {
        for map in &given {
            if !columns.contains(&map.column) {
                return Err(CliError::Usage(format!(
                    "--field {}: the first record has no column `{}` (it has: {})",
                    map.flag(),
                    map.column,
                    columns.join(", ")
                )));
            }
        }
        given
    };
    if maps.is_empty() {
        return Err(CliError::Usage(
            "no column can be stored: give the fields with --field".into(),
        ));
    }
    let flags: Vec<String> = maps
        .iter()
        .map(|m| format!("--field {}", m.flag()))
        .collect();
    println!("fields: {}", flags.join(" "));
    let mapped: Vec<&str> = maps.iter().map(|m| m.column.as_str()).collect();
    let mut mapped_first: Vec<_> = mapped
        .iter()
        .map(|c| first_cells[columns.iter().position(|k| k == c).unwrap_or(0)].clone())
        .collect();
    first_rows(table, first, &maps, &mut mapped_first);
    let specs = field_specs(&maps, &mapped_first).map_err(|reason| {
        let (path, _, place) = table.locate(first);
        input_error(path, format!("{place}: {reason}"))
    })?;
    let converter = Converter {
        table,
        maps: &maps,
        specs: &specs,
        images: &images,
    };
    let (kept, skipped) = if keep_going {
        check_records(&converter, workers)
    } else {
        ((0..table.num_records()).collect(), Vec::new())
    };
    let n = kept.len() as u64;
    let out = args.target.shards.writer_path(&args.out);
    if n == 0 {
        report_skipped(&skipped, table, &out)?;
        return Err(input_error(
            &files[0],
            format!(
                "every one of the {} records was skipped as unreadable",
                table.num_records()
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
            let (values, mode) = converter.convert(kept[i as usize], i, false)?;
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
    let image_note = if maps.iter().any(|m| m.kind == Kind::Image) {
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
        "wrote {name}: {} records from {} {} files{image_note}, {} data pages, {} bytes",
        summary.num_samples,
        table.paths().len(),
        table.format(),
        summary.num_pages,
        summary.file_size
    );
    print_shards(&written_shards);
    if keep_going {
        report_skipped(&skipped, table, &out)?;
    }
    Ok(())
}

/// Replaces each `var_array` field's cell in `cells` (record `first`'s) that is an empty
/// list of lists, which has no row to give the row shape, by the first later record's
/// cell that has one. Records that do not read are passed over here; converting them
/// reports them.
fn first_rows(table: &dyn Table, first: usize, maps: &[FieldMap], cells: &mut [Cell]) {
    let unknown = |cells: &[Cell]| -> Vec<usize> {
        (0..maps.len())
            .filter(|&f| maps[f].kind == Kind::VarArray && var_array_rows(&cells[f]) == Ok(None))
            .collect()
    };
    let mut missing = unknown(cells);
    for i in first + 1..table.num_records() {
        if missing.is_empty() {
            return;
        }
        let columns: Vec<&str> = missing.iter().map(|&f| maps[f].column.as_str()).collect();
        let Ok(found) = table.cells(i, &columns) else {
            continue;
        };
        missing.retain(|&f| {
            let cell = &found[columns
                .iter()
                .position(|c| *c == maps[f].column)
                .unwrap_or(0)];
            if matches!(var_array_rows(cell), Ok(Some(_))) {
                cells[f] = cell.clone();
                return false;
            }
            true
        });
    }
}

/// Converts every record once (images decoded, not encoded) on `workers` threads: the
/// records that convert, in order, and the ones that do not, after the broken files.
fn check_records(converter: &Converter<'_>, workers: usize) -> (Vec<usize>, Vec<Skipped>) {
    let table = converter.table;
    let total = table.num_records();
    let bar = progress_bar(total as u64, "records checked");
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(total).max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return;
                    }
                    if let Err(error) = converter.convert(i, i as u64, true) {
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
    let mut skipped: Vec<Skipped> = table
        .broken()
        .iter()
        .map(|(file, reason)| Skipped {
            file: file.clone(),
            record: None,
            error: reason.clone(),
        })
        .collect();
    let mut bad = failures.iter().map(|&(i, _)| i).peekable();
    let kept = (0..total)
        .filter(|&i| {
            let is_bad = bad.peek() == Some(&i);
            if is_bad {
                bad.next();
            }
            !is_bad
        })
        .collect();
    skipped.extend(failures.into_iter().map(|(i, error)| {
        let (file, record, _) = table.locate(i);
        Skipped {
            file: file.to_path_buf(),
            record: Some(record),
            error,
        }
    }));
    (kept, skipped)
}

/// Prints the records left out and writes them to `OUT.skipped.json`.
fn report_skipped(skipped: &[Skipped], table: &dyn Table, out: &Path) -> Result<()> {
    println!(
        "skipped {} unreadable records or file tails:",
        skipped.len()
    );
    for s in skipped {
        match s.record {
            Some(_) => println!("  {}", s.error),
            None => println!("  {}: {}", crate::object_io::display_name(&s.file), s.error),
        }
    }
    let path = |p: &Path| serde_json::Value::from(crate::object_io::display_name(p));
    let doc = serde_json::json!({
        "files": table.paths().iter().map(|p| path(p)).collect::<Vec<_>>(),
        "records": table.num_records(),
        "skipped": skipped.iter().map(|s| serde_json::json!({
            "file": path(&s.file),
            "record": s.record,
            "error": s.error,
        })).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    crate::object_io::write_skip_report(out, text.as_bytes())
}
