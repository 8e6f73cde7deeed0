//! WebDataset tar shards as a `.beton` file ([`write_webdataset`]).
//!
//! The inputs are expanded and sorted ([`crate::webdataset::expand_inputs`]), every tar
//! header is scanned into records, and the fields are the job's `NAME=EXT:KIND` mapping
//! or, without one, inferred from the first record ([`crate::webdataset_fields`]); the
//! fields used are told as flags, so a run can be repeated with them. Record `i` of the
//! sorted shards is sample `i` of the file (or of the set, with shards). A record that
//! cannot be converted stops the write with an error naming its shard and key; with
//! `skip_unreadable` every record is checked first (images decoded, `cls`, `json` and
//! `npy` members parsed, tar structure followed), and the bad ones are left out, listed
//! in the report and in `OUT.skipped.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{RecordId, Result};
use crate::job::{Job, check_all, parse_fields, record_error, skip_report, write_records};
use crate::object_io::{Staged, display_name};
use crate::report::{ImageCounts, Observer, Report, Skipped, shard_lines, written};
use crate::webdataset::{Shards, expand_inputs, shard_error};
use crate::webdataset_fields::{Converter, FieldMap, Kind, field_specs, infer};

/// Converts the job's WebDataset shards (see the module docs); what it did.
pub fn write_webdataset(job: &Job, observer: Arc<dyn Observer>) -> Result<Report> {
    let _staged = Staged::hold();
    let images = job.image.image_store()?;
    let given = parse_fields(&job.fields, FieldMap::parse, |m: &FieldMap| {
        (m.name.as_str(), m.flag())
    })?;
    let shards = Shards::scan(expand_inputs(&job.inputs)?, job.skip_unreadable)?;
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
    observer.line(&format!("fields: {}", flags.join(" ")));
    let specs = field_specs(&maps, &shards, first)?;
    let converter = Converter {
        shards: &shards,
        maps: &maps,
        specs: &specs,
        images: &images,
    };
    let records = &shards.records;
    let workers = job.target.threads();
    let (kept, skipped) = if job.skip_unreadable {
        let (kept, failures) = check_all(records.len(), workers, observer.as_ref(), |i| {
            converter.convert(&records[i], i as u64, true).map(|_| ())
        });
        let mut skipped: Vec<Skipped> = shards
            .broken
            .iter()
            .map(|b| Skipped {
                input: display_name(&shards.paths[b.shard]),
                record: None,
                error: b.reason.clone(),
            })
            .collect();
        skipped.extend(failures.into_iter().map(|(i, error)| Skipped {
            input: display_name(shards.path_of(&records[i])),
            record: Some(records[i].key.clone()),
            error,
        }));
        (kept, skipped)
    } else {
        ((0..records.len()).collect(), Vec::new())
    };
    let out = job.target.out_path(&job.out);
    let mut report = Report {
        fields: maps
            .iter()
            .map(|m| (m.name.clone(), format!("{}:{}", m.ext, m.kind.name())))
            .collect(),
        left_out: Vec::new(),
        inputs: shards.paths.iter().map(|p| display_name(p)).collect(),
        records: records.len() as u64,
        written: Vec::new(),
        skipped,
        skip_report: None,
        images: Default::default(),
    };
    if kept.is_empty() {
        report_skipped(&mut report, &out, observer.as_ref())?;
        return Err(shard_error(
            shards.path_of(first),
            format!(
                "every one of the {} records was skipped as unreadable",
                records.len()
            ),
        ));
    }
    let (written_shards, mut counts) =
        write_records(job, specs.clone(), &kept, &observer, |k, i| {
            let record = &records[k];
            converter.convert(record, i, false).map_err(|message| {
                record_error(
                    shards.path_of(record),
                    RecordId::Key(record.key.clone()),
                    message,
                )
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
        "wrote {name}: {} records from {} shards{image_note}, {} data pages, {} bytes",
        summary.num_samples,
        shards.paths.len(),
        summary.num_pages,
        summary.file_size
    ));
    for line in shard_lines(&written_shards) {
        observer.line(&line);
    }
    report.written = written_shards;
    report.images = counts;
    if job.skip_unreadable {
        report_skipped(&mut report, &out, observer.as_ref())?;
    }
    Ok(report)
}

/// The summary line's image part (`", first image field R raw + J jpg"`, with `" (N stored
/// unchanged)"` under passthrough), or nothing when no field is an image.
pub(crate) fn image_note(has_image: bool, passthrough: bool, counts: &ImageCounts) -> String {
    if !has_image {
        return String::new();
    }
    let unchanged = if passthrough {
        format!(" ({} stored unchanged)", counts.unchanged)
    } else {
        String::new()
    };
    format!(
        ", first image field {} raw + {} jpg{unchanged}",
        counts.raw, counts.jpg
    )
}

/// Tells the records left out and writes them to `OUT.skipped.json`.
fn report_skipped(report: &mut Report, out: &Path, observer: &dyn Observer) -> Result<()> {
    observer.line(&format!(
        "skipped {} unreadable records or shard tails:",
        report.skipped.len()
    ));
    for s in &report.skipped {
        match &s.record {
            Some(_) => observer.line(&format!("  {}", s.error)),
            None => observer.line(&format!("  {}: {}", s.input, s.error)),
        }
    }
    let doc = serde_json::json!({
        "shards": report.inputs,
        "records": report.records,
        "skipped": report.skipped.iter().map(|s| serde_json::json!({
            "shard": s.input,
            "key": s.record,
            "error": s.error,
        })).collect::<Vec<_>>(),
    });
    report.skip_report = Some(skip_report(out, &doc, observer)?);
    Ok(())
}
