//! Parquet files as a [`Table`], for `ffcv write parquet`.
//!
//! Each file's footer is read once when it is opened (the schema and the row groups);
//! record `i` of the sorted files is row `i` counted across them. A row group is decoded
//! whole, only the columns asked for (the `parquet` crate's Arrow reader; uncompressed,
//! snappy, gzip and lz4 pages: snappy is what pyarrow and Hugging Face `datasets` write
//! by default; zstd and brotli are left out of the build), and
//! kept in a small cache while the writer's threads take its rows. A page that does not
//! decode (bad compression, a checksum mismatch, a truncated column chunk) fails every
//! record of its row group, naming the file and the row.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use crate::arrow_cells::{BatchCache, Group, Groups, row_cells, var_list_columns};
use crate::error::Result;
use crate::table_fields::{Cell, Table, input_error};

/// Parquet files, opened.
pub struct ParquetTable {
    paths: Vec<PathBuf>,
    metadata: Vec<ArrowReaderMetadata>,
    groups: Groups,
    cache: BatchCache,
    broken: Vec<(PathBuf, String)>,
}

impl ParquetTable {
    /// Opens `paths` (reading their footers); `threads` sizes the cache of decoded row
    /// groups. A file that is not a Parquet file fails the command, or with `keep_going`
    /// is left out and listed as broken.
    pub fn open(paths: Vec<PathBuf>, threads: usize, keep_going: bool) -> Result<Self> {
        let mut table = ParquetTable {
            paths: Vec::new(),
            metadata: Vec::new(),
            groups: Groups::default(),
            cache: BatchCache::new(2 * threads),
            broken: Vec::new(),
        };
        for path in paths {
            let opened = File::open(&path)
                .map_err(|e| format!("cannot open: {e}"))
                .and_then(|file| {
                    ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                        .map_err(|e| format!("not a readable Parquet file: {e}"))
                });
            let metadata = match opened {
                Ok(m) => m,
                Err(reason) if keep_going => {
                    table.broken.push((path, reason));
                    continue;
                }
                Err(reason) => return Err(input_error(&path, reason)),
            };
            let file = table.paths.len();
            let mut first_row = 0u64;
            for (index, group) in metadata.metadata().row_groups().iter().enumerate() {
                let rows = usize::try_from(group.num_rows()).map_err(|_| {
                    input_error(
                        &path,
                        format!("row group {index} has {} rows", group.num_rows()),
                    )
                })?;
                table.groups.push(Group {
                    file,
                    index,
                    first_row,
                    rows,
                });
                first_row += rows as u64;
            }
            table.paths.push(path);
            table.metadata.push(metadata);
        }
        Ok(table)
    }

    /// Row group `group`, decoded with the top-level columns among `columns`.
    fn load(
        &self,
        group: &Group,
        columns: &[&str],
    ) -> std::result::Result<Vec<arrow_array::RecordBatch>, String> {
        let metadata = &self.metadata[group.file];
        let fail = |e: &dyn std::fmt::Display| {
            let e = e.to_string();
            // A codec left out of the build (zstd, brotli): say what is read.
            let hint = if e.contains("Disabled feature") {
                " (uncompressed, snappy, gzip and lz4 pages are read: rewrite the file with \
                 compression=\"snappy\")"
            } else {
                ""
            };
            format!("cannot decode row group {}: {e}{hint}", group.index)
        };
        let file = File::open(&self.paths[group.file]).map_err(|e| format!("cannot open: {e}"))?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata.clone());
        let roots = metadata
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| columns.contains(&f.name().as_str()))
            .map(|(i, _)| i);
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let reader = builder
            .with_row_groups(vec![group.index])
            .with_projection(mask)
            .with_batch_size(group.rows.max(1))
            .build()
            .map_err(|e| fail(&e))?;
        reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| fail(&e))
    }
}

impl Table for ParquetTable {
    fn format(&self) -> &'static str {
        "Parquet"
    }

    fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn num_records(&self) -> usize {
        self.groups.total
    }

    fn locate(&self, i: usize) -> (&Path, u64, String) {
        self.groups.locate(&self.paths, i)
    }

    fn columns(&self) -> Vec<String> {
        self.metadata.first().map_or_else(Vec::new, |m| {
            m.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        })
    }

    fn cells(&self, i: usize, columns: &[&str]) -> std::result::Result<Vec<Cell>, String> {
        let (g, row) = self.groups.find(i);
        let group = &self.groups.groups[g];
        let batches = self.cache.get(g, columns, || self.load(group, columns))?;
        row_cells(&batches, row, columns)
    }

    fn broken(&self) -> &[(PathBuf, String)] {
        &self.broken
    }

    fn var_list_columns(&self) -> Vec<String> {
        self.metadata
            .first()
            .map_or_else(Vec::new, |m| var_list_columns(m.schema()))
    }
}
