//! Resumable epochs: [`LoaderState`], the loader's position inside an epoch (what
//! [`crate::EpochIter::state`] and [`crate::Loader::state`] return and
//! [`crate::LoaderBuilder::resume`] takes), the checks that refuse a state that does not
//! fit, and the plan that turns a state into the next epoch's start.
//!
//! An epoch runs in *stints* (see [`traversal::Stint`]): the span run by one set of ranks.
//! A state lists the epoch's stints with the batches each rank consumed in them; resuming
//! with the last stint's world size continues that stint (the same batches, byte for
//! byte), resuming with another world size starts a new stint over the samples no rank
//! consumed. `docs/resume.md` has the guarantees and an example.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use traversal::{
    Distributed, ElasticEpoch, OrderKind, OrderSpec, Pool, SamplePages, Stint, TraversalOrder,
};

use beton_io::Reader;

use crate::batch::OutputInfo;
use crate::decode::PipelineSpec;
use crate::error::{Error, Result};

mod index_set;
mod order_state;
mod stint;
mod strided;
pub use index_set::indices_hash;
use index_set::{IndicesIdentity, hex};
use order_state::OrderState;
use stint::batches_of;
pub(crate) use stint::{EpochStart, StintRecord};

/// The newest state format this build writes and reads.
///
/// - 1: the first format.
/// - 2: the same keys; distributed QuasiRandom and the elastic page split deal the ranks
///   shares within one sample of each other (cutting pages where needed) instead of whole
///   pages. A format-1 state whose epoch consumed batches of such a dealing is refused
///   with a message that says so; every other format-1 state resumes exactly.
/// - 3: adds `indices.hash64`, the index set's [`indices_hash`] (the set may change
///   between epochs: [`crate::Loader::set_indices`]). Older states load as before: their
///   hash is derived from `indices.sha256`, of which it is the first 16 hex digits.
pub const STATE_FORMAT_VERSION: u32 = 3;

/// The first format whose QuasiRandom dealing is this build's.
const BALANCED_QUASI_RANDOM_VERSION: u32 = 2;

/// Whether `state`'s epoch consumed batches whose order came from a QuasiRandom page
/// dealing of a format older than this build's: a distributed first stint, or a later
/// (elastic) stint, of QuasiRandom that consumed batches. Their rank orders cannot be
/// computed again, so neither can the samples left. A one-process QuasiRandom walk, the
/// other orders, and a state at the start of its epoch do not depend on the dealing.
fn dealing_changed(state: &LoaderState) -> bool {
    if state.format_version >= BALANCED_QUASI_RANDOM_VERSION
        || state.order.kind != OrderKind::QuasiRandom.name()
    {
        return false;
    }
    let consumed = |s: &StintState| s.batches_consumed.first().is_some_and(|&b| b > 0);
    match state.stints.split_first() {
        None => false,
        Some((first, later)) => {
            (state.order.distributed && consumed(first)) || later.iter().any(consumed)
        }
    }
}

/// Where a loader is in its run: the epoch, and inside it the batches every rank has
/// consumed, with what identifies the file, the order and the batching, so that a state
/// that does not fit is refused instead of silently resuming something else.
///
/// Take it with [`crate::EpochIter::state`] (inside an epoch) or
/// [`crate::Loader::state`] (between epochs), store it with [`LoaderState::to_json`], and
/// give it back to [`crate::LoaderBuilder::resume`]. Each rank of a distributed job saves
/// its own; any one of them resumes every rank, with the same or another world size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderState {
    format_version: u32,
    file: FileIdentity,
    seed: u64,
    epoch: u64,
    order: OrderState,
    batch_size: usize,
    drop_last: bool,
    indices: IndicesIdentity,
    world_size: usize,
    rank: usize,
    /// The stints of `epoch` so far, oldest first; empty at the start of the epoch.
    stints: Vec<StintState>,
    pipelines: Vec<PipelineFingerprint>,
}

/// The file: its size and a SHA-256 of its header, field descriptors and allocation table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIdentity {
    size: u64,
    tables_sha256: String,
}

/// One stint: its ranks and the batches each consumed (equal: ranks run in lockstep).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StintState {
    world_size: usize,
    batches_consumed: Vec<u64>,
}

/// A field's pipeline: decoder, transforms and output, hashed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineFingerprint {
    field: String,
    sha256: String,
}

impl LoaderState {
    /// The state as pretty-printed JSON (the format `from_json` reads).
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serializing cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a state written by [`LoaderState::to_json`]; a corrupt or truncated text, a
    /// missing or unknown key, or a newer format version is an error saying which.
    pub fn from_json(text: &str) -> Result<LoaderState> {
        let bad = |reason: String| Error::State { reason };
        // The version first, so that a newer format is named as such rather than as a
        // key this build does not know.
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            bad(format!(
                "not a loader state: the JSON is corrupt or truncated ({e})"
            ))
        })?;
        let version = value
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| bad("not a loader state: no format_version".into()))?;
        if version > u64::from(STATE_FORMAT_VERSION) {
            return Err(bad(format!(
                "format version {version} was written by a newer ffcv; this build reads \
                 versions up to {STATE_FORMAT_VERSION}"
            )));
        }
        let state: LoaderState = serde_json::from_value(value)
            .map_err(|e| bad(format!("not a loader state of format {version}: {e}")))?;
        state.check_shape()?;
        state.indices.check(state.format_version).map_err(bad)?;
        Ok(state)
    }

    /// The 64-bit hash ([`indices_hash`]) of the index set the state's loader drew from
    /// when the state was taken: the set given to the builder, or the last one given to
    /// [`crate::Loader::set_indices`]. For a state of an older format it is derived from
    /// the recorded SHA-256; 0 for a state built by hand whose SHA-256 is not hex.
    pub fn indices_hash(&self) -> u64 {
        u64::from_str_radix(self.indices.hash_text(), 16).unwrap_or(0)
    }

    /// The number of ids in the state's index set.
    pub fn indices_count(&self) -> u64 {
        self.indices.count
    }

    /// The format version.
    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    /// The epoch the state is in (the next epoch to run, when no batch of it was consumed).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The seed of the orders and augmentations.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The saved run's order: `Some` for the built-in orders, `None` for a custom one.
    pub fn order_kind(&self) -> Option<OrderKind> {
        self.order.kind.parse().ok()
    }

    /// The saved run's batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The saved run's QuasiRandom buffer in pages (0 for the other orders).
    pub fn buffer_pages(&self) -> usize {
        self.order.buffer_pages
    }

    /// The world size of the rank that saved the state (1 without distributed mode).
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The rank that saved the state.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Batches each rank consumed in the current stint of the epoch (empty at the start
    /// of an epoch).
    pub fn batches_consumed(&self) -> &[u64] {
        self.stints
            .last()
            .map_or(&[][..], |s| s.batches_consumed.as_slice())
    }

    /// The world sizes of the epoch's stints so far, oldest first (one entry unless the
    /// epoch was resumed with another world size).
    pub fn stint_world_sizes(&self) -> Vec<usize> {
        self.stints.iter().map(|s| s.world_size).collect()
    }

    /// Checks what a state must satisfy on its own: ranks in lockstep, the saver's rank
    /// inside its world.
    fn check_shape(&self) -> Result<()> {
        let bad = |reason: String| Error::State { reason };
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(bad(format!(
                "rank {} of world size {} is not a rank",
                self.rank, self.world_size
            )));
        }
        for (i, stint) in self.stints.iter().enumerate() {
            if stint.world_size == 0 || stint.batches_consumed.len() != stint.world_size {
                return Err(bad(format!(
                    "stint {i} lists {} ranks' batches for a world size of {}",
                    stint.batches_consumed.len(),
                    stint.world_size
                )));
            }
            if stint
                .batches_consumed
                .iter()
                .any(|&b| b != stint.batches_consumed[0])
            {
                return Err(bad(format!(
                    "stint {i}: the ranks consumed different numbers of batches {:?}; \
                     ranks of a distributed job consume in lockstep",
                    stint.batches_consumed
                )));
            }
        }
        if let Some(last) = self.stints.last()
            && last.world_size != self.world_size
        {
            return Err(bad(format!(
                "the saving rank's world size {} is not its stint's ({})",
                self.world_size, last.world_size
            )));
        }
        Ok(())
    }
}

/// The order, world and rank a loader was built with, and its state's fixed part once
/// computed.
pub(crate) struct ResumeContext {
    kind: &'static str,
    /// A custom order's [`traversal::TraversalOrder::identity`].
    custom: Option<String>,
    /// A custom order that deals its ranks strided ([`TraversalOrder::strided_world`]):
    /// its epochs resume under another world size (`resume/strided.rs`).
    strided: Option<Arc<dyn TraversalOrder>>,
    distributed: bool,
    world_size: usize,
    rank: usize,
    buffer_pages: usize,
    /// The fields' pipeline fingerprints, set when the loader is built (not read from
    /// the fields later: a running epoch's producer holds them).
    pipelines: Vec<PipelineFingerprint>,
    /// The fixed part of every state of this loader (epoch 0, no stints): the hashes
    /// are computed once, on first use.
    template: OnceLock<LoaderState>,
}

impl ResumeContext {
    /// For a loader with `order` and `distributed`.
    pub(crate) fn new(
        order: &crate::Order,
        distributed: Option<Distributed>,
        batch_size: usize,
    ) -> ResumeContext {
        let (custom, strided) = match order {
            crate::Order::Custom(o) => (
                o.identity(),
                o.strided_world().map(|world| (Arc::clone(o), world)),
            ),
            _ => (None, None),
        };
        // A strided custom order splits its ranks itself (the loader is not in
        // distributed mode), but its states record its world as a distributed loader's do.
        let world = strided.as_ref().map(|(_, w)| *w).or(distributed);
        let order = order.kind();
        ResumeContext {
            kind: order.map_or("custom", OrderKind::name),
            custom,
            strided: strided.map(|(o, _)| o),
            distributed: distributed.is_some(),
            world_size: world.map_or(1, |d| d.world_size()),
            rank: world.map_or(0, |d| d.rank()),
            buffer_pages: match order {
                Some(OrderKind::QuasiRandom) => traversal::default_buffer_pages(batch_size),
                _ => 0,
            },
            pipelines: Vec::new(),
            template: OnceLock::new(),
        }
    }

    /// Records the QuasiRandom buffer the loader chose (the default is FFCV's).
    pub(crate) fn set_buffer_pages(&mut self, pages: usize) {
        self.buffer_pages = pages;
    }

    /// The loader's index set is now `indices` ([`crate::Loader::set_indices`]): later
    /// states record it. Only the set's identity is computed again (O(ids)), the table
    /// hash is kept; before the first state, nothing (the fixed part takes the set then).
    pub(crate) fn set_indices(&mut self, indices: &[u64]) {
        if let Some(template) = self.template.get_mut() {
            template.indices = IndicesIdentity::of(indices);
        }
    }

    /// The order's name as states record it (`custom` for a user order).
    pub(crate) fn order_name(&self) -> &'static str {
        self.kind
    }

    /// The rank's share, when distributed.
    pub(crate) fn distributed(&self) -> Option<Distributed> {
        if self.distributed {
            Distributed::new(self.world_size, self.rank).ok()
        } else {
            None
        }
    }

    /// The QuasiRandom buffer recorded in states (0 for other orders).
    pub(crate) fn buffer_pages(&self) -> usize {
        self.buffer_pages
    }

    /// Records the fingerprints of the loader's field pipelines.
    pub(crate) fn set_pipelines<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a PipelineSpec, &'a OutputInfo)>,
    ) {
        self.pipelines = fields
            .into_iter()
            .map(|(spec, output)| {
                let transforms: Vec<String> = spec.transforms.iter().map(|t| t.name()).collect();
                let text = format!(
                    "{}|{}|{:?}|{}|{}",
                    spec.decoder.name(),
                    transforms.join(","),
                    output.shape,
                    output.dtype.descr(),
                    output.row_bytes
                );
                PipelineFingerprint {
                    field: output.name.clone(),
                    sha256: hex(&Sha256::digest(text.as_bytes())),
                }
            })
            .collect();
    }
}

/// The fixed part of a state (epoch 0, no stints) of a loader over `reader` and
/// `indices`. O(samples): it hashes the file's tables and the index list.
fn fixed_part(
    reader: &Reader,
    indices: &[u64],
    seed: u64,
    batch_size: usize,
    drop_last: bool,
    ctx: &ResumeContext,
    pipelines: Vec<PipelineFingerprint>,
) -> LoaderState {
    let mut tables = Sha256::new();
    // The header and field descriptors run up to the metadata; the allocation table
    // from its pointer to the end. The reader checked both ranges when it opened, and
    // holds them even when opened from byte ranges (a remote object).
    let layout = reader.layout();
    tables.update(reader.range(0, layout.metadata_offset).unwrap_or_default());
    tables.update(
        reader
            .range(reader.header().alloc_table_ptr, layout.file_size)
            .unwrap_or_default(),
    );
    LoaderState {
        format_version: STATE_FORMAT_VERSION,
        file: FileIdentity {
            size: reader.file_size(),
            tables_sha256: hex(&tables.finalize()),
        },
        seed,
        epoch: 0,
        order: OrderState {
            kind: ctx.kind.to_owned(),
            distributed: ctx.distributed,
            buffer_pages: ctx.buffer_pages,
            custom: ctx.custom.clone(),
        },
        batch_size,
        drop_last,
        indices: IndicesIdentity::of(indices),
        world_size: ctx.world_size,
        rank: ctx.rank,
        stints: Vec::new(),
        pipelines,
    }
}

/// What a state records of a loader, borrowed from its run state (`Shared::resume_facts`
/// in `run_state.rs`), so that this module needs nothing of the modules above it.
pub(crate) struct LoaderFacts<'a> {
    pub(crate) reader: &'a Reader,
    pub(crate) indices: &'a [u64],
    pub(crate) seed: u64,
    pub(crate) batch_size: usize,
    pub(crate) drop_last: bool,
    /// Samples per epoch of the loader's order on this rank.
    pub(crate) samples_per_epoch: usize,
    pub(crate) ctx: &'a ResumeContext,
}

/// The fixed part of the loader's states, computed on first use.
fn template<'a>(facts: &LoaderFacts<'a>) -> &'a LoaderState {
    facts.ctx.template.get_or_init(|| {
        fixed_part(
            facts.reader,
            facts.indices,
            facts.seed,
            facts.batch_size,
            facts.drop_last,
            facts.ctx,
            facts.ctx.pipelines.clone(),
        )
    })
}

/// The state of the loader in `epoch`, after `earlier` stints and `consumed`
/// batches of the current one (no stint at all when `consumed` is `None`: the start of
/// the epoch). O(world size + stints + fields): the fixed part is computed once.
pub(crate) fn state_at(
    facts: &LoaderFacts<'_>,
    epoch: u64,
    earlier: &[StintRecord],
    consumed: Option<u64>,
) -> LoaderState {
    let mut state = template(facts).clone();
    state.epoch = epoch;
    let world_size = facts.ctx.world_size;
    state.stints = earlier
        .iter()
        .map(|s| StintState {
            world_size: s.world_size,
            batches_consumed: vec![s.batches; s.world_size],
        })
        .chain(consumed.map(|batches| StintState {
            world_size,
            batches_consumed: vec![batches; world_size],
        }))
        .collect();
    state
}

/// What a state is resumed into: a loader, or just its order (`ffcv order --resume`).
struct Target<'a> {
    reader: &'a Reader,
    indices: &'a [u64],
    batch_size: usize,
    drop_last: bool,
    ctx: &'a ResumeContext,
    /// Samples per epoch of the target's own order on this rank.
    samples_per_epoch: usize,
    /// The target's own fixed part of a state.
    mine: &'a LoaderState,
    /// Whether to compare pipelines (a loader has them, an order does not).
    pipelines: bool,
}

/// Checks `state` against the loader and works out where its epoch resumes.
/// Returns the epoch and its start (`None`: the state is at the start of its epoch).
pub(crate) fn plan(
    facts: &LoaderFacts<'_>,
    state: &LoaderState,
) -> Result<(u64, Option<EpochStart>)> {
    let target = Target {
        reader: facts.reader,
        indices: facts.indices,
        batch_size: facts.batch_size,
        drop_last: facts.drop_last,
        ctx: facts.ctx,
        samples_per_epoch: facts.samples_per_epoch,
        mine: template(facts),
        pipelines: true,
    };
    plan_for(&target, state)
}

impl LoaderState {
    /// The sample ids that rank `spec.distributed` (one process when `None`) still
    /// yields in the state's epoch, as a loader over `reader` with this order, index
    /// list and `batch_size` resumed from this state would deliver them (after its
    /// consumed batches, without a dropped last batch). Refuses a state that does not fit
    /// as [`crate::LoaderBuilder::resume`] does. What `ffcv order --resume` prints.
    pub fn remaining_order(
        &self,
        reader: &Reader,
        spec: &OrderSpec,
        indices: &[u64],
        batch_size: usize,
    ) -> Result<Vec<u64>> {
        let mut ctx = ResumeContext::new(&spec.kind.into(), spec.distributed, batch_size);
        if spec.kind == OrderKind::QuasiRandom {
            ctx.buffer_pages = spec.buffer_pages;
        }
        let pages = (spec.kind == OrderKind::QuasiRandom).then(|| page_map(reader));
        let own = spec.build(indices.to_vec(), pages.as_ref())?;
        let mine = fixed_part(
            reader,
            indices,
            spec.seed,
            batch_size,
            self.drop_last,
            &ctx,
            Vec::new(),
        );
        let target = Target {
            reader,
            indices,
            batch_size,
            drop_last: self.drop_last,
            ctx: &ctx,
            samples_per_epoch: own.samples_per_epoch(),
            mine: &mine,
            pipelines: false,
        };
        let (epoch, start) = plan_for(&target, self)?;
        let start = start.unwrap_or_default();
        let order = start.order.unwrap_or_else(|| own.order(epoch));
        // What the loader delivers: whole batches (and a last partial one unless
        // drop_last), from the first batch not consumed.
        let kept = batches_of(order.len(), batch_size, self.drop_last)
            .saturating_mul(batch_size)
            .min(order.len());
        let from = start.skip.saturating_mul(batch_size).min(kept);
        Ok(order[from..kept].to_vec())
    }
}

fn page_map(reader: &Reader) -> SamplePages {
    let map = reader.page_map();
    SamplePages::from_fn(reader.num_samples(), |s| {
        map.pages_of_sample(s).first().copied()
    })
}

fn plan_for(target: &Target<'_>, state: &LoaderState) -> Result<(u64, Option<EpochStart>)> {
    let refuse = |reason: String| Error::Resume {
        path: target.reader.path().to_owned(),
        reason,
    };
    if state.format_version > STATE_FORMAT_VERSION {
        return Err(refuse(format!(
            "format version {} was written by a newer ffcv; this build reads versions up \
             to {STATE_FORMAT_VERSION}",
            state.format_version
        )));
    }
    state.check_shape()?;
    let mine = target.mine;
    if state.file != mine.file {
        return Err(refuse(format!(
            "the state is from another file ({} bytes, tables sha256 {}); this file has {} \
             bytes, tables sha256 {}",
            state.file.size, state.file.tables_sha256, mine.file.size, mine.file.tables_sha256
        )));
    }
    if let Some(reason) = state.order.refusal(&mine.order) {
        return Err(refuse(reason));
    }
    if state.seed != mine.seed {
        return Err(refuse(format!(
            "the state was saved with seed {}, this loader uses seed {} (leave the seed \
             unset to take the state's)",
            state.seed, mine.seed
        )));
    }
    if state.batch_size != mine.batch_size {
        return Err(refuse(format!(
            "the state was saved with batch size {}, this loader uses {}",
            state.batch_size, mine.batch_size
        )));
    }
    if state.drop_last != mine.drop_last {
        return Err(refuse(format!(
            "the state was saved with drop_last {}, this loader uses {}",
            state.drop_last, mine.drop_last
        )));
    }
    if let Some(reason) = state.indices.refusal(&mine.indices) {
        return Err(refuse(reason));
    }
    if dealing_changed(state) {
        return Err(refuse(format!(
            "the state was saved by an older ffcv (state format {}), whose distributed \
             QuasiRandom dealt whole pages to the ranks; this build deals shares within one \
             sample of each other, so the rest of epoch {} cannot be computed again. Finish \
             the epoch with the build that saved the state, or resume from a state taken \
             between epochs",
            state.format_version, state.epoch
        )));
    }
    if target.pipelines && state.pipelines != mine.pipelines {
        // The order and the batches do not depend on the pipelines, so the resume is
        // exact in which samples come; their values may differ from the saved run's.
        tracing::warn!(
            saved = ?state.pipelines,
            now = ?mine.pipelines,
            "resuming with other pipelines than the state was saved with: the same samples \
             come, decoded differently"
        );
    }
    let Some(last) = state.stints.last() else {
        return Ok((state.epoch, None));
    };
    let b = target.batch_size;
    let ctx = target.ctx;
    let records: Vec<StintRecord> = state
        .stints
        .iter()
        .map(|s| StintRecord {
            world_size: s.world_size,
            batches: s.batches_consumed[0],
        })
        .collect();
    let to_usize = |batches: u64| usize::try_from(batches).unwrap_or(usize::MAX);
    let consumed_samples = |s: &StintRecord| to_usize(s.batches).saturating_mul(b);

    // The same world as the only stint, in the same mode: continue the ordinary order.
    if state.stints.len() == 1
        && last.world_size == ctx.world_size
        && state.order.distributed == ctx.distributed
    {
        let total = batches_of(target.samples_per_epoch, b, target.drop_last);
        let skip = to_usize(records[0].batches);
        if skip > total {
            return Err(refuse(format!(
                "the state says each rank consumed {skip} batches of epoch {}, which has \
                 only {total}",
                state.epoch
            )));
        }
        return Ok((
            state.epoch,
            Some(EpochStart {
                order: None,
                skip,
                earlier: Vec::new(),
            }),
        ));
    }
    if let Some(order) = &ctx.strided {
        return strided::plan(
            order.as_ref(),
            state.epoch,
            &records,
            (ctx.world_size, ctx.rank),
            (b, target.drop_last),
        )
        .map(|start| (state.epoch, Some(start)))
        .map_err(refuse);
    }
    let kind: OrderKind = state.order.kind.parse().map_err(|_| {
        refuse(format!(
            "a {} order cannot be resumed with another world size or mode (saved by {} \
             ranks, resumed by {})",
            state.order.kind, last.world_size, ctx.world_size
        ))
    })?;
    let first_world = if state.order.distributed {
        Some(Distributed::new(records[0].world_size, 0)?)
    } else {
        None
    };
    let spec = OrderSpec {
        kind,
        seed: state.seed,
        distributed: first_world,
        buffer_pages: state.order.buffer_pages,
    };
    let pages = (kind == OrderKind::QuasiRandom).then(|| page_map(target.reader));
    let epoch = ElasticEpoch {
        spec: &spec,
        indices: target.indices,
        pages: pages.as_ref(),
        epoch: state.epoch,
    };
    if !state.order.distributed && records[0].world_size != 1 {
        return Err(refuse(format!(
            "stint 0 ran {} ranks without distributed mode",
            records[0].world_size
        )));
    }
    // Every stint's consumption must fit its share.
    let mut pool: Option<Pool> = None;
    for (i, s) in records.iter().enumerate() {
        let per_rank = match &pool {
            None => epoch.first_share(0)?.order.len(),
            Some(p) => p.samples_per_rank(s.world_size, pages.as_ref())?,
        };
        let total = batches_of(per_rank, b, target.drop_last);
        if to_usize(s.batches) > total {
            return Err(refuse(format!(
                "the state says each rank consumed {} batches in stint {i} of epoch {}, \
                 which had only {total}",
                s.batches, state.epoch
            )));
        }
        if i + 1 < records.len() {
            pool = Some(match pool {
                None => epoch.pool_after(&[Stint {
                    world_size: s.world_size,
                    consumed: consumed_samples(s),
                }])?,
                Some(p) => p.after(s.world_size, consumed_samples(s), pages.as_ref())?,
            });
        }
    }
    let stints: Vec<Stint> = records
        .iter()
        .map(|s| Stint {
            world_size: s.world_size,
            consumed: consumed_samples(s),
        })
        .collect();
    let (share, skip, earlier) = if last.world_size == ctx.world_size {
        // Continue the last stint: its split, after the batches it consumed. The first
        // stint's split is the ordinary order (here in the saver's mode).
        let k = records.len() - 1;
        let share = if k == 0 {
            epoch.first_share(ctx.rank)?
        } else {
            epoch
                .pool_after(&stints[..k])?
                .share(ctx.world_size, ctx.rank, pages.as_ref())?
        };
        (share, to_usize(records[k].batches), records[..k].to_vec())
    } else {
        let pool = epoch.pool_after(&stints)?;
        (
            pool.share(ctx.world_size, ctx.rank, pages.as_ref())?,
            0,
            records,
        )
    };
    tracing::debug!(
        epoch = state.epoch,
        stints = earlier.len() + 1,
        world_size = ctx.world_size,
        rank = ctx.rank,
        samples = share.order.len(),
        own = share.own,
        skip,
        "resuming an epoch elastically"
    );
    Ok((
        state.epoch,
        Some(EpochStart {
            order: Some(share.order),
            skip,
            earlier,
        }),
    ))
}
