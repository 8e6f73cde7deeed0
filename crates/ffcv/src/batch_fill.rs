//! The per-batch fill: each field of a batch's samples copied straight into its output
//! rows (copy-only decoders) or written as records and run through the field's
//! pipeline-jit executor, every output of the slot walked beside its field's plan.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use beton_io::ExtentRule;
use page_cache::EpochContext;
use rayon::prelude::*;

use crate::batch_slots::{OutputBuffer, Slot};
use crate::decode::kernel::{RECORD_BYTES, RECORD_METADATA, write_record};
use crate::decode::{CopyRule, OutputKind, SampleInput};
use crate::error::{Error, Result};
use crate::run_state::{FieldRunner, Shared};

/// Samples per gather task: enough to amortise scheduling, small enough to balance.
const GATHER_CHUNK: usize = 64;

/// The per-epoch part of the fill: each field's plan and, for the fields run by their
/// executor, the record buffer of a batch (allocated once per epoch).
pub(crate) struct BatchFill {
    plans: Vec<FieldPlan>,
    records: Vec<Vec<u8>>,
    /// The rows a group of views decodes for each member (`decode/views.rs`), which the
    /// members' records point at; empty for other fields.
    decoded: Vec<Vec<u8>>,
}

impl BatchFill {
    /// Plans `fields` for batches of up to `batch_size` samples.
    pub(crate) fn new(
        reader: &beton_io::Reader,
        fields: &[FieldRunner],
        batch_size: usize,
    ) -> BatchFill {
        let mut plans: Vec<FieldPlan> = fields.iter().map(|f| FieldPlan::of(reader, f)).collect();
        // Several outputs of one field (views) count its stored bytes once.
        for i in 0..fields.len() {
            plans[i].payload = !fields[..i].iter().any(|f| f.field == fields[i].field);
        }
        let decoded = fields
            .iter()
            .enumerate()
            .map(|(i, f)| match f.group() {
                Some(g) => vec![0u8; batch_size * g.row_bytes(i)],
                None => Vec::new(),
            })
            .collect();
        // Records only for the fields that run through their executor.
        let records = plans
            .iter()
            .map(|p| {
                if p.copy.is_some() {
                    Vec::new()
                } else {
                    vec![0u8; batch_size * RECORD_BYTES]
                }
            })
            .collect();
        BatchFill {
            plans,
            records,
            decoded,
        }
    }

    /// Fills `slot` with the samples `ids` of every field (see [`fill`]).
    pub(crate) fn fill(
        &mut self,
        shared: &Shared,
        fields: &[FieldRunner],
        ctx: &EpochContext,
        epoch: u64,
        ids: &[u64],
        slot: &mut Slot,
    ) -> Result<()> {
        let BatchFill {
            plans,
            records,
            decoded,
        } = self;
        let from = Sources {
            shared,
            fields,
            plans,
            ctx,
            epoch,
        };
        fill(from, ids, (records, decoded), slot)
    }
}

/// What every chunk of a batch is filled from: the loader's shared state, the fields with
/// their plans, and the epoch (its cache and number). The same for every batch of an
/// epoch; one value instead of five arguments threaded through each fill function.
#[derive(Clone, Copy)]
struct Sources<'a> {
    shared: &'a Shared,
    fields: &'a [FieldRunner],
    plans: &'a [FieldPlan],
    ctx: &'a EpochContext,
    epoch: u64,
}

/// How one field of a batch is filled; worked out once per epoch so that the per-sample
/// loop only reads numbers.
#[derive(Debug, Clone, Copy)]
struct FieldPlan {
    /// `Some` when the pipeline is a copying decoder alone: the rows are copied straight
    /// into the slot, without records or a kernel call per sample.
    copy: Option<CopyRule>,
    /// Where the stored bytes are (beton-io's rule for the field's type or handler).
    extent: ExtentRule,
    /// The field's metadata bytes inside a metadata row.
    meta_start: usize,
    meta_len: usize,
    row_bytes: usize,
    /// Int and Float count 8 payload bytes per sample (their value), others their data.
    scalar: bool,
    /// Whether this output counts the field's payload (its first output does).
    payload: bool,
    lengths: bool,
    /// Stored bytes per counted length unit and the most units a row holds: `(1, MAX)`
    /// for byte lengths, `(row of the array, K_max)` for a `Rows` output, whose lengths
    /// count array rows (capped when the decoder truncates).
    length_unit: u64,
    length_cap: u64,
}

impl FieldPlan {
    /// A sample's length from its stored byte count.
    #[inline]
    fn length(&self, stored: u64) -> u64 {
        (stored / self.length_unit).min(self.length_cap)
    }
}

impl FieldPlan {
    fn of(reader: &beton_io::Reader, f: &FieldRunner) -> FieldPlan {
        let field = &reader.fields()[f.field];
        let extent = reader.extent_rule(f.field);
        let copy = if f.spec.transforms.is_empty() {
            f.spec.decoder.copy_rule()
        } else {
            None
        };
        let (length_unit, length_cap) = match (f.output.kind, f.output.shape.first()) {
            (OutputKind::Rows, Some(&k)) if k > 0 => {
                ((f.output.row_bytes / k).max(1) as u64, k as u64)
            }
            (OutputKind::Rows, _) => (1, 0),
            _ => (1, u64::MAX),
        };
        FieldPlan {
            copy,
            extent,
            meta_start: field.metadata_offset as usize,
            meta_len: field.metadata_itemsize as usize,
            row_bytes: f.output.row_bytes,
            scalar: f.field_type.value_in_metadata(),
            payload: true,
            lengths: f.output.kind.has_lengths(),
            length_unit,
            length_cap,
        }
    }
}

/// Samples per fill task: about 256 KiB of output rows (enough to amortise scheduling,
/// small enough to balance), at most [`GATHER_CHUNK`], and at least four tasks per
/// worker when the batch allows.
fn chunk_samples(plans: &[FieldPlan], n: usize, workers: usize) -> usize {
    let row: usize = plans
        .iter()
        .map(|p| {
            if p.copy.is_some() {
                p.row_bytes
            } else {
                RECORD_BYTES
            }
        })
        .sum();
    let by_bytes = (256 * 1024 / row.max(1)).clamp(1, GATHER_CHUNK);
    let by_tasks = n.div_ceil(4 * workers.max(1)).max(1);
    by_bytes.min(by_tasks)
}

/// One field's part of a fill task.
struct Dest<'a> {
    /// Output rows (copied fields) or records (fields run by their executor).
    rows: &'a mut [u8],
    lengths: Option<&'a mut [u64]>,
    /// The slot's dirty marks of these rows (padded copies only).
    dirty: Option<&'a mut [u64]>,
    /// A grouped view's decoded rows (`BatchFill::decoded`).
    decoded: Option<&'a mut [u8]>,
}

/// Fills the slot for batch `ids`: copied fields straight into their rows, other fields
/// as records then through their pipelines; and the slot's lengths and sample ids.
fn fill(
    from: Sources<'_>,
    ids: &[u64],
    (records, decoded): (&mut [Vec<u8>], &mut [Vec<u8>]),
    slot: &mut Slot,
) -> Result<()> {
    let Sources {
        shared,
        fields,
        plans,
        epoch,
        ..
    } = from;
    let n = ids.len();
    let chunk = chunk_samples(plans, n, shared.pool.current_num_threads());
    for (out, p) in slot.outputs.iter_mut().zip(plans) {
        out.lengths.clear();
        if p.lengths {
            out.lengths.resize(n, 0);
        }
        if p.copy == Some(CopyRule::Padded) && p.row_bytes > 0 {
            let rows = out.memory.as_bytes().len() / p.row_bytes;
            if out.dirty.len() != rows {
                out.dirty.clear();
                out.dirty.resize(rows, p.row_bytes as u64);
            }
        } else {
            out.dirty.clear();
        }
    }
    // Split every field's destination into chunks, then group the chunks by sample range
    // so that one task reads each sample's metadata row once for all fields.
    let mut tasks: Vec<Vec<Dest<'_>>> = Vec::with_capacity(n.div_ceil(chunk));
    for (i, (((p, out), rec), dec)) in plans
        .iter()
        .zip(slot.outputs.iter_mut())
        .zip(records.iter_mut())
        .zip(decoded.iter_mut())
        .enumerate()
    {
        let OutputBuffer {
            memory,
            lengths,
            dirty,
        } = out;
        let (rows, width) = if p.copy.is_some() {
            (&mut memory.as_bytes_mut()[..n * p.row_bytes], p.row_bytes)
        } else {
            (&mut rec[..n * RECORD_BYTES], RECORD_BYTES)
        };
        let mut lens = lengths.chunks_mut(chunk);
        let dirty_rows = dirty.len().min(n);
        let mut dirt = dirty[..dirty_rows].chunks_mut(chunk);
        // A grouped view's rows: the decoder's row bytes per sample, `n` samples.
        let dec_row = fields[i].group().map_or(0, |g| g.row_bytes(i));
        let mut dec = dec[..n * dec_row].chunks_mut((chunk * dec_row).max(1));
        for (ci, rows) in rows.chunks_mut(chunk * width).enumerate() {
            if tasks.len() <= ci {
                tasks.push(Vec::with_capacity(plans.len()));
            }
            tasks[ci].push(Dest {
                rows,
                lengths: lens.next(),
                dirty: dirt.next(),
                decoded: dec.next(),
            });
        }
    }
    let payload: u64 = shared.pool.install(|| {
        tasks
            .into_par_iter()
            .enumerate()
            .map(|(ci, mut dests)| {
                let start = ci * chunk;
                let end = (start + chunk).min(n);
                fill_chunk(from, &ids[start..end], &mut dests)
            })
            .try_reduce(|| 0, |a, b| Ok(a + b))
    })?;

    // The executor fields run side by side in one parallel region (each splits its batch
    // into chunks too), so a batch costs at most two fork-joins however many fields it has.
    let run: Vec<usize> = (0..fields.len())
        .filter(|&i| plans[i].copy.is_none())
        .collect();
    if !run.is_empty() {
        let mut bufs: Vec<Option<&mut [u8]>> = slot
            .outputs
            .iter_mut()
            .zip(plans)
            .map(|(b, p)| {
                p.copy
                    .is_none()
                    .then(|| &mut b.memory.as_bytes_mut()[..n * p.row_bytes])
            })
            .collect();
        let jobs: Vec<(usize, &mut [u8])> = bufs
            .iter_mut()
            .enumerate()
            .filter_map(|(i, b)| b.take().map(|b| (i, b)))
            .collect();
        let runs: Vec<Result<()>> = shared.pool.install(|| {
            jobs.into_par_iter()
                .map(|(i, out)| {
                    let f = &fields[i];
                    f.executor
                        .run(pipeline_jit::BatchBuffers {
                            sample_ids: ids,
                            input: &records[i][..n * RECORD_BYTES],
                            output: out,
                            seed: crate::decode::views::view_seed(shared.seed, f.view_index()),
                            epoch,
                        })
                        .map_err(|e| field_error(shared, f, e))
                })
                .collect()
        });
        runs.into_iter().collect::<Result<()>>()?;
    }
    shared
        .counters
        .payload_bytes
        .fetch_add(payload, Ordering::Relaxed);
    slot.sample_ids.clear();
    slot.sample_ids.extend_from_slice(ids);
    Ok(())
}

/// One sample's field, resolved: its stored bytes and its metadata (zero-padded to the
/// 16 bytes a decoder sees).
struct Resolved<'c> {
    data: &'c [u8],
    metadata: [u8; RECORD_METADATA],
}

/// Fills samples `ids` (one chunk of the batch) of every field into `dests`; returns the
/// payload bytes. Two passes: the first reads every metadata row and asks for every
/// sample's first data lines, so that the misses of the chunk overlap; the second copies.
fn fill_chunk(from: Sources<'_>, ids: &[u64], dests: &mut [Dest<'_>]) -> Result<u64> {
    let Sources {
        shared,
        fields,
        plans,
        ctx,
        epoch,
    } = from;
    let nf = fields.len();
    let mut resolved: Vec<Resolved<'_>> = Vec::with_capacity(ids.len() * nf);
    let mut payload = 0u64;
    for (k, &sample) in ids.iter().enumerate() {
        let row = shared.reader.metadata_row(sample)?;
        for (i, (f, p)) in fields.iter().zip(plans).enumerate() {
            let r = resolve(shared, f, p, ctx, sample, row)?;
            let len = r.data.len() as u64;
            if p.payload {
                payload += if p.scalar { 8 } else { len };
            }
            let d = &mut dests[i];
            if let Some(l) = d.lengths.as_deref_mut() {
                l[k] = p.length(len);
            }
            if p.copy.is_some() {
                crate::memory::prefetch(r.data);
                resolved.push(r);
            } else if let Some(g) = f.group() {
                // The group's first member decodes every member's row and writes its record.
                if g.members.first() == Some(&i) {
                    fill_group(shared, f, g, (epoch, sample, k), &r, dests)?;
                }
            } else {
                write_record(
                    &mut d.rows[k * RECORD_BYTES..(k + 1) * RECORD_BYTES],
                    r.data,
                    &r.metadata,
                );
            }
        }
    }
    let mut next = resolved.iter();
    for (k, &sample) in ids.iter().enumerate() {
        for (i, p) in plans.iter().enumerate() {
            let Some(rule) = p.copy else { continue };
            let r = next
                .next()
                .expect("one resolved entry per copied field and sample");
            let d = &mut dests[i];
            let out = &mut d.rows[k * p.row_bytes..(k + 1) * p.row_bytes];
            let mark = d.dirty.as_deref_mut().map(|m| &mut m[k]);
            let covered = match rule {
                CopyRule::Metadata => match r.metadata.get(..out.len()) {
                    Some(m) => {
                        out.copy_from_slice(m);
                        true
                    }
                    None => false,
                },
                CopyRule::Exact if r.data.len() == out.len() => {
                    out.copy_from_slice(r.data);
                    true
                }
                CopyRule::Padded if r.data.len() <= out.len() => {
                    let len = r.data.len();
                    // Only the bytes an earlier batch may have left past `len` need zeros.
                    let was = mark
                        .as_deref()
                        .map_or(out.len(), |&m| (m as usize).min(out.len()));
                    out[..len].copy_from_slice(r.data);
                    if was > len {
                        out[len..was].fill(0);
                    }
                    if let Some(m) = mark {
                        *m = len as u64;
                    }
                    true
                }
                _ => false,
            };
            if !covered {
                let d = &mut dests[i];
                let out = &mut d.rows[k * p.row_bytes..(k + 1) * p.row_bytes];
                decode_one(shared, &fields[i], epoch, sample, r, out)?;
                if let Some(m) = d.dirty.as_deref_mut() {
                    m[k] = p.row_bytes as u64;
                }
            }
        }
    }
    Ok(payload)
}

/// A sample the copy rule does not cover goes through the decoder itself, so that its
/// result (usually an error naming what is wrong) is the decoder's.
fn decode_one(
    shared: &Shared,
    f: &FieldRunner,
    epoch: u64,
    sample: u64,
    r: &Resolved<'_>,
    out: &mut [u8],
) -> Result<()> {
    let input = SampleInput {
        sample,
        data: r.data,
        metadata: &r.metadata,
        // The decoder is operation 0 of its pipeline, as in the kernel path.
        seed: pipeline_jit::rng::sample_seed(
            crate::decode::views::view_seed(shared.seed, f.view_index()),
            epoch,
            sample,
            0,
        ),
        max_image_pixels: f.context.max_image_pixels,
    };
    let decoder = &f.spec.decoder;
    let result = catch_unwind(AssertUnwindSafe(|| decoder.decode(&input, out, &mut [])))
        .unwrap_or_else(|_| Err("decoder panicked".into()));
    result.map_err(|e| {
        let (message, cause) = crate::error::extension_parts(e);
        Error::Decode {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            sample,
            decoder: decoder.name(),
            message,
            cause,
        }
    })
}

/// Decodes sample `sample` (row `k` of the chunk) of every member of view group `g`, whose
/// first member is `f`, into the members' decoded rows, and points their records at them.
fn fill_group(
    shared: &Shared,
    f: &FieldRunner,
    g: &crate::decode::views::ViewGroup,
    (epoch, sample, k): (u64, u64, usize),
    r: &Resolved<'_>,
    dests: &mut [Dest<'_>],
) -> Result<()> {
    let mut rows: Vec<&mut [u8]> = Vec::with_capacity(g.members.len());
    for (i, d) in dests.iter_mut().enumerate() {
        if g.members.contains(&i)
            && let Some(dec) = d.decoded.as_deref_mut()
        {
            let width = g.row_bytes(i);
            rows.push(&mut dec[k * width..(k + 1) * width]);
        }
    }
    let s = crate::decode::views::GroupSample {
        sample,
        data: r.data,
        metadata: &r.metadata,
        seed: shared.seed,
        epoch,
        max_image_pixels: f.context.max_image_pixels,
    };
    let decoded = if rows.len() == g.members.len() {
        crate::decode::views::decode_group(g, &s, &mut rows)
    } else {
        Err("the batch has no rows for every view of the group".to_owned())
    };
    decoded.map_err(|message| Error::Decode {
        path: shared.path.clone(),
        field: f.output.name.clone(),
        sample,
        decoder: f.spec.decoder.name(),
        message,
        cause: None,
    })?;
    for (i, d) in dests.iter_mut().enumerate() {
        if g.members.contains(&i)
            && let Some(dec) = d.decoded.as_deref()
        {
            let width = g.row_bytes(i);
            let row = &dec[k * width..(k + 1) * width];
            write_record(
                &mut d.rows[k * RECORD_BYTES..(k + 1) * RECORD_BYTES],
                row,
                &r.metadata,
            );
        }
    }
    Ok(())
}

/// Reads one field of one sample: its stored bytes (from the epoch's cache, without an
/// allocation lookup) and its metadata.
fn resolve<'c>(
    shared: &Shared,
    f: &FieldRunner,
    p: &FieldPlan,
    ctx: &'c EpochContext,
    sample: u64,
    row: &[u8],
) -> Result<Resolved<'c>> {
    let meta = row
        .get(p.meta_start..p.meta_start + p.meta_len)
        .unwrap_or(&[]);
    let mut metadata = [0u8; RECORD_METADATA];
    let m = meta.len().min(RECORD_METADATA);
    metadata[..m].copy_from_slice(&meta[..m]);
    // The two fixed layouts are applied inline (no call into the reader per sample);
    // beton-io computes the others.
    let extent = match p.extent {
        ExtentRule::None => None,
        ExtentRule::Fixed { .. } | ExtentRule::Sized => p.extent.fixed_extent(meta),
        ExtentRule::Computed => shared.reader.stored_extent(f.field, meta).map_err(|e| {
            // A custom handler's cause stays reachable as the error's source.
            let (reason, cause) = crate::error::extension_parts(e);
            Error::Decode {
                path: shared.path.clone(),
                field: f.output.name.clone(),
                sample,
                decoder: f.spec.decoder.name(),
                message: format!("invalid metadata: {reason}"),
                cause,
            }
        })?,
    };
    let data = match extent {
        None => &[][..],
        Some((ptr, len)) => ctx.read_extent(ptr, len).map_err(|e| Error::Decode {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            sample,
            decoder: f.spec.decoder.name(),
            message: format!("the field stores {len} bytes at {ptr}: {e}"),
            cause: None,
        })?,
    };
    Ok(Resolved { data, metadata })
}

/// The loader's error for a pipeline failure of field `f`: a decode error naming the
/// sample (with the decoder's message) when the decoder failed, a pipeline error otherwise.
fn field_error(shared: &Shared, f: &FieldRunner, e: pipeline_jit::Error) -> Error {
    let failure = f.context.take_failure();
    match (e, failure) {
        (
            pipeline_jit::Error::Kernel {
                index: 0, sample, ..
            },
            Some((_, failure)),
        ) => {
            let (message, cause) = crate::error::extension_parts(failure);
            Error::Decode {
                path: shared.path.clone(),
                field: f.output.name.clone(),
                sample,
                decoder: f.spec.decoder.name(),
                message,
                cause,
            }
        }
        (source, _) => Error::Pipeline {
            path: shared.path.clone(),
            field: f.output.name.clone(),
            source,
        },
    }
}
