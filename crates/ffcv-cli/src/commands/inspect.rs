//! `ffcv inspect FILE [--json]`: the header, layout and field descriptors of a .beton file.

use std::io::Write;
use std::path::PathBuf;

use beton_io::Reader;
use serde_json::{Map, Value, json};

use crate::error::{CliError, Result};

/// Arguments of `ffcv inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// The .beton file (a path, `file://`, `s3://` or `http(s)://` URL), or the first of
    /// several read as one dataset (shards); a glob pattern (`'data/train-*.beton'`) or an
    /// `s3://` prefix (`s3://bucket/train-`) names every match, sorted.
    pub file: PathBuf,
    /// More shards of the same dataset, after FILE (global sample ids run through the
    /// files in the order given).
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ffcv inspect`.
pub fn run(args: &InspectArgs) -> Result<()> {
    let reader = crate::dataset_args::open(&args.file, &args.more)?.reader;
    let text = if args.json {
        format!("{}\n", summary(&reader))
    } else {
        table(&reader)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Stdout)
}

/// The `--json` object: header, layout, page facts and field descriptors.
pub fn summary(reader: &Reader) -> Value {
    let header = reader.header();
    let layout = reader.layout();
    let page_map = reader.page_map();
    let fields: Vec<Value> = reader
        .fields()
        .iter()
        .map(|field| {
            let mut object = Map::new();
            object.insert("name".into(), json!(field.name));
            object.insert("type_id".into(), json!(field.type_id));
            object.insert("type".into(), json!(field.field_type.type_name()));
            object.insert("metadata_offset".into(), json!(field.metadata_offset));
            object.insert("metadata_itemsize".into(), json!(field.metadata_itemsize));
            // Each type's arguments (NDArray dtype and shape, ...) as beton-io names them.
            for (key, value) in field.field_type.describe_arguments() {
                let value = serde_json::from_str(&value.to_python_json())
                    .expect("beton-io's JSON text parses");
                object.insert(key.into(), value);
            }
            Value::Object(object)
        })
        .collect();
    json!({
        "file": reader.path().display().to_string(),
        "version": header.version,
        "num_fields": header.num_fields,
        "page_size": header.page_size,
        "num_samples": header.num_samples,
        "alloc_table_ptr": header.alloc_table_ptr,
        "metadata_offset": layout.metadata_offset,
        "metadata_itemsize": layout.metadata_itemsize,
        "metadata_size": layout.metadata_size,
        "data_region_start": layout.data_region_start,
        "alloc_table_rows": layout.alloc_table_rows,
        "file_size": layout.file_size,
        "num_pages": page_map.num_pages(),
        "data_pages": page_map.data_pages().len(),
        "fields": fields,
    })
}

/// The human-readable form.
fn table(reader: &Reader) -> String {
    let header = reader.header();
    let layout = reader.layout();
    let page_map = reader.page_map();
    let mut text = String::new();
    let mut line = |key: &str, value: String| text.push_str(&format!("{key:<14}{value}\n"));
    line("file", reader.path().display().to_string());
    line("version", header.version.to_string());
    line("samples", header.num_samples.to_string());
    line("fields", header.num_fields.to_string());
    line(
        "page size",
        format!(
            "{} ({})",
            header.page_size,
            human_bytes(u64::from(header.page_size))
        ),
    );
    line(
        "pages",
        format!(
            "{} in the file, {} holding sample data",
            page_map.num_pages(),
            page_map.data_pages().len()
        ),
    );
    line(
        "metadata",
        format!(
            "at {}, {} rows of {} bytes ({} bytes)",
            layout.metadata_offset,
            header.num_samples,
            layout.metadata_itemsize,
            layout.metadata_size
        ),
    );
    line(
        "data region",
        format!("starts at {}", layout.data_region_start),
    );
    line(
        "alloc table",
        format!(
            "at {}, {} rows",
            header.alloc_table_ptr, layout.alloc_table_rows
        ),
    );
    line(
        "file size",
        format!("{} ({})", layout.file_size, human_bytes(layout.file_size)),
    );

    let rows: Vec<[String; 6]> = reader
        .fields()
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let arguments: Vec<String> = field
                .field_type
                .describe_arguments()
                .into_iter()
                .map(|(key, value)| match value {
                    beton_io::JsonValue::String(text) => format!("{key} {text}"),
                    other => format!("{key} {}", other.to_python_json()),
                })
                .collect();
            let arguments = arguments.join(" ");
            [
                index.to_string(),
                field.name.clone(),
                format!("{} ({})", field.field_type.type_name(), field.type_id),
                field.metadata_offset.to_string(),
                field.metadata_itemsize.to_string(),
                arguments,
            ]
        })
        .collect();
    let headings = [
        "#",
        "name",
        "type (id)",
        "meta offset",
        "meta size",
        "arguments",
    ];
    let mut widths = headings.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    text.push_str("\nfields:\n");
    let mut push_row = |cells: [&str; 6]| {
        let mut row = String::new();
        for (cell, width) in cells.iter().zip(widths) {
            row.push_str(&format!("  {cell:<width$}"));
        }
        text.push_str(row.trim_end());
        text.push('\n');
    };
    push_row(headings);
    for row in &rows {
        push_row([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]]);
    }
    text
}

/// `2097152` -> `2 MiB`, for the human table only.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
