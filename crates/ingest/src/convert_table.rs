//! Parquet files, Arrow IPC files or TFRecord files of `tf.train.Example`s as a `.beton`
//! file ([`write_table`]).
//!
//! The inputs are expanded and sorted as WebDataset shards are
//! ([`crate::webdataset::expand_inputs`]; a folder stands for its files of the format),
//! the files are opened (footers or record headers read), and the fields are the job's
//! `NAME=COLUMN:KIND` mapping or, without one, inferred from the first record
//! ([`crate::table_fields`]); the fields used are told as flags. Record `i` of the sorted
//! files is sample `i` of the file (or of the set, with shards). A record that cannot be
//! converted stops the write with an error naming its file and the record; with
//! `skip_unreadable` every record is checked first and the bad ones are left out, listed
//! in the report and in `OUT.skipped.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::convert_webdataset::image_note;
use crate::error::{Error, RecordId, Result};
use crate::job::{Job, check_all, parse_fields, record_error, skip_report, write_records};
use crate::object_io::{Staged, display_name};
use crate::report::{Observer, Report, Skipped, shard_lines, written};
use crate::table_fields::{
    Cell, Converter, FieldMap, Kind, Table, field_specs, infer, input_error, var_array_rows,
};
use crate::webdataset::expand_inputs;

/// Which reader a table conversion uses.
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

/// Opens the table of `files` in `format`.
fn open(
    format: Format,
    files: &[PathBuf],
    workers: usize,
    keep_going: bool,
) -> Result<Box<dyn Table>> {
    Ok(match format {
        Format::Parquet => Box::new(crate::parquet_input::ParquetTable::open(
            files.to_vec(),
            workers,
            keep_going,
        )?),
        Format::Arrow => Box::new(crate::arrow_input::ArrowTable::open(
            files.to_vec(),
            workers,
            keep_going,
        )?),
        Format::TfRecord => Box::new(crate::tfrecord::TfRecordTable::open(
            files.to_vec(),
            keep_going,
        )?),
    })
}

/// Converts the job's Parquet, Arrow IPC or TFRecord files (see the module docs); what it
/// did.
pub fn write_table(format: Format, job: &Job, observer: Arc<dyn Observer>) -> Result<Report> {
    let _staged = Staged::hold();
    let images = job.image.image_store()?;
    let given = parse_fields(&job.fields, FieldMap::parse, |m: &FieldMap| {
        (m.name.as_str(), m.flag())
    })?;
    let files = input_files(format, &job.inputs)?;
    let workers = job.target.threads();
    let keep_going = job.skip_unreadable;
    let table = open(format, &files, workers, keep_going)?;
    let table = table.as_ref();
    let columns = table.columns();
    let all: Vec<&str> = columns.iter().map(String::as_str).collect();
    // The first record that reads (with skip_unreadable; else record 0, or its error).
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
    let mut left_out = Vec::new();
    let maps = if given.is_empty() {
        let (maps, out) = infer(&columns, &first_cells, &table.var_list_columns());
        for (column, why) in out {
            observer.line(&format!("left out: column `{column}` ({why})"));
            left_out.push((column, why));
        }
        maps
    } else {
        for map in &given {
            if !columns.contains(&map.column) {
                return Err(Error::Usage(format!(
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
        return Err(Error::Usage(
            "no column can be stored: give the fields with --field".into(),
        ));
    }
    let flags: Vec<String> = maps
        .iter()
        .map(|m| format!("--field {}", m.flag()))
        .collect();
    observer.line(&format!("fields: {}", flags.join(" ")));
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
    let total = table.num_records();
    let (kept, skipped) = if keep_going {
        let (kept, failures) = check_all(total, workers, observer.as_ref(), |i| {
            converter.convert(i, i as u64, true).map(|_| ())
        });
        let mut skipped: Vec<Skipped> = table
            .broken()
            .iter()
            .map(|(file, reason)| Skipped {
                input: display_name(file),
                record: None,
                error: reason.clone(),
            })
            .collect();
        skipped.extend(failures.into_iter().map(|(i, error)| {
            let (file, record, _) = table.locate(i);
            Skipped {
                input: display_name(file),
                record: Some(record.to_string()),
                error,
            }
        }));
        (kept, skipped)
    } else {
        ((0..total).collect(), Vec::new())
    };
    let out = job.target.out_path(&job.out);
    let mut report = Report {
        fields: maps
            .iter()
            .map(|m| (m.name.clone(), format!("{}:{}", m.column, m.kind.name())))
            .collect(),
        left_out,
        inputs: table.paths().iter().map(|p| display_name(p)).collect(),
        records: total as u64,
        written: Vec::new(),
        skipped,
        skip_report: None,
        images: Default::default(),
    };
    if kept.is_empty() {
        report_skipped(&mut report, &out, observer.as_ref())?;
        return Err(input_error(
            &files[0],
            format!("every one of the {total} records was skipped as unreadable"),
        ));
    }
    let (written_shards, mut counts) =
        write_records(job, specs.clone(), &kept, &observer, |k, i| {
            converter.convert(k, i, false).map_err(|message| {
                let (file, record, _) = table.locate(k);
                record_error(file, RecordId::Row(record), message)
            })
        })?;
    counts.unchanged = images.passed_through();
    let (summary, name) = written(&written_shards);
    let image_note = image_note(
        maps.iter().any(|m| m.kind == Kind::Image),
        job.image.jpeg_passthrough,
        &counts,
    );
    observer.line(&format!(
        "wrote {name}: {} records from {} {} files{image_note}, {} data pages, {} bytes",
        summary.num_samples,
        table.paths().len(),
        table.format(),
        summary.num_pages,
        summary.file_size
    ));
    for line in shard_lines(&written_shards) {
        observer.line(&line);
    }
    report.written = written_shards;
    report.images = counts;
    if keep_going {
        report_skipped(&mut report, &out, observer.as_ref())?;
    }
    Ok(report)
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

/// Tells the records left out and writes them to `OUT.skipped.json`.
fn report_skipped(report: &mut Report, out: &Path, observer: &dyn Observer) -> Result<()> {
    observer.line(&format!(
        "skipped {} unreadable records or file tails:",
        report.skipped.len()
    ));
    for s in &report.skipped {
        match &s.record {
            Some(_) => observer.line(&format!("  {}", s.error)),
            None => observer.line(&format!("  {}: {}", s.input, s.error)),
        }
    }
    let doc = serde_json::json!({
        "files": report.inputs,
        "records": report.records,
        "skipped": report.skipped.iter().map(|s| serde_json::json!({
            "file": s.input,
            // The record's number, as the command line has always written it.
            "record": s.record.as_ref().and_then(|r| r.parse::<u64>().ok()),
            "error": s.error,
        })).collect::<Vec<_>>(),
    });
    report.skip_report = Some(skip_report(out, &doc, observer)?);
    Ok(())
}
