//! Pipelines and their validated plans: states, buffer sizes, fused segments, random slots.

use std::sync::Arc;

use crate::error::{Error, ExtensionError, Result};
use crate::ir::{self, Expr, RandSpec};
use crate::op::FastPath;
use crate::op::{Lowered, Operation};
use crate::state::{Device, State};

/// A fused expression larger than this (in IR nodes) starts a new segment instead, so that
/// an operation loading its input several times cannot blow up code size.
const MAX_FUSED_NODES: usize = 4096;

/// A chain of operations applied to every sample of a field: the input state, then
/// operations (a decoder, then transforms).
#[derive(Clone)]
pub struct Pipeline {
    input: State,
    ops: Vec<Arc<dyn Operation>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.ops.iter().map(|o| o.name()).collect();
        f.debug_struct("Pipeline")
            .field("input", &self.input)
            .field("ops", &names)
            .finish()
    }
}

impl Pipeline {
    /// A pipeline reading samples of `input` (a zero-element state, e.g. `[0]` of `U8`, for a
    /// decoder that fetches its own bytes through its context).
    pub fn new(input: State) -> Self {
        Pipeline {
            input,
            ops: Vec::new(),
        }
    }

    /// Append an operation.
    pub fn then(mut self, op: impl Operation + 'static) -> Self {
        self.ops.push(Arc::new(op));
        self
    }

    /// Append a shared operation.
    pub fn push(&mut self, op: Arc<dyn Operation>) {
        self.ops.push(op);
    }

    /// The input state.
    pub fn input(&self) -> &State {
        &self.input
    }

    /// Lower and validate every operation, compute every state and buffer size.
    pub fn plan(&self) -> Result<Plan> {
        Plan::new(self)
    }
}

/// One operation, lowered for its input state.
#[derive(Debug, Clone)]
pub struct Step {
    /// Position in the pipeline.
    pub index: usize,
    /// The operation's name.
    pub name: String,
    /// Incoming state.
    pub input: State,
    /// What the operation lowered to.
    pub lowered: Lowered,
    /// First slot of this step's random parameters in the per-sample random table
    /// (native kernels have one slot: their seed).
    pub rand_offset: usize,
    pub(crate) fast: Option<FastPath>,
}

impl Step {
    /// Number of per-sample random slots of this step.
    pub fn rand_count(&self) -> usize {
        match &self.lowered {
            Lowered::Expr(k) => k.random.len(),
            Lowered::Native(_) => 1,
        }
    }
}

/// What the JIT emits for a group of steps.
#[derive(Debug, Clone)]
pub enum Segment {
    /// A native kernel call (step index).
    Native(usize),
    /// Consecutive expressible steps fused into one loop nest.
    Fused {
        /// The steps (indices into [`Plan::steps`]).
        steps: std::ops::Range<usize>,
        /// The fused expression, over the last step's output coordinates, reading the first
        /// step's input; `Rand(k)` is slot `k` of the per-sample random table.
        expr: Expr,
    },
}

/// Where a buffer of the plan lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    /// The pipeline's input batch (caller-provided).
    Input,
    /// The pipeline's output batch (caller-provided).
    Output,
    /// An intermediate result (allocated by the executor).
    Intermediate,
    /// Scratch space a native kernel asked for (allocated by the executor).
    Scratch,
}

/// One buffer of the plan (per sample).
#[derive(Debug, Clone)]
pub struct BufferInfo {
    /// Role.
    pub kind: BufferKind,
    /// The step producing it (for intermediates and scratch); `None` for the input.
    pub step: Option<usize>,
    /// Bytes per sample.
    pub bytes: usize,
}

/// A validated pipeline: every state, buffer size and fused segment, known before the first
/// batch.
#[derive(Debug, Clone)]
pub struct Plan {
    input: State,
    steps: Vec<Step>,
    segments: Vec<Segment>,
    rand_slots: Vec<RandSpec>,
}

impl Plan {
    fn new(p: &Pipeline) -> Result<Self> {
        if p.ops.is_empty() {
            return Err(Error::EmptyPipeline);
        }
        let bad =
            |index: usize, op: &dyn Operation, reason: ExtensionError| Error::InvalidOperation {
                index,
                op: op.name(),
                reason,
            };
        if p.input.device != Device::Cpu {
            return Err(bad(
                0,
                &*p.ops[0],
                format!("input on {:?}: only CPU pipelines run here", p.input.device).into(),
            ));
        }
        p.input.bytes()?;
        let mut state = p.input.clone();
        let mut steps = Vec::with_capacity(p.ops.len());
        let mut rand_offset = 0;
        let mut rand_slots = Vec::new();
        for (index, op) in p.ops.iter().enumerate() {
            let lowered = op.lower(&state).map_err(|r| bad(index, &**op, r))?;
            let out = lowered.output().clone();
            if out.device != Device::Cpu {
                return Err(bad(
                    index,
                    &**op,
                    format!(
                        "output on {:?}: device stages run after the CPU pipeline",
                        out.device
                    )
                    .into(),
                ));
            }
            out.bytes()
                .map_err(|e| bad(index, &**op, e.to_string().into()))?;
            match &lowered {
                Lowered::Expr(k) => {
                    ir::validate(k, &state).map_err(|r| bad(index, &**op, r.into()))?;
                    rand_slots.extend(k.random.iter().copied());
                }
                Lowered::Native(_) => rand_slots.push(RandSpec::Int {
                    lo: i64::MIN,
                    hi: i64::MAX,
                }),
            }
            let fast = op.fast_path();
            let step = Step {
                index,
                name: op.name(),
                input: state,
                lowered,
                rand_offset,
                fast,
            };
            rand_offset += step.rand_count();
            state = out;
            steps.push(step);
        }
        let segments = segment(&steps);
        tracing::debug!(
            steps = steps.len(),
            segments = segments.len(),
            "planned pipeline"
        );
        Ok(Plan {
            input: p.input.clone(),
            steps,
            segments,
            rand_slots,
        })
    }

    /// The input state.
    pub fn input(&self) -> &State {
        &self.input
    }

    /// The output state.
    pub fn output(&self) -> &State {
        self.steps
            .last()
            .map(|s| s.lowered.output())
            .unwrap_or(&self.input)
    }

    /// The lowered steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The segments the JIT emits (runs of expressible steps fused, native calls between).
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Per-sample random slots: the random parameters of every expressible step, and one
    /// seed per native step, in step order.
    pub fn rand_slots(&self) -> &[RandSpec] {
        &self.rand_slots
    }

    /// Bytes of one input sample.
    pub fn input_bytes(&self) -> usize {
        // Checked in `Plan::new`.
        self.input.bytes().unwrap_or(0)
    }

    /// Bytes of one output sample.
    pub fn output_bytes(&self) -> usize {
        self.output().bytes().unwrap_or(0)
    }

    /// Every buffer of the plan with its per-sample size: the caller provides `Input` and
    /// `Output` batches (`batch_size * bytes`); the executor allocates the rest.
    pub fn buffers(&self) -> Vec<BufferInfo> {
        let mut v = vec![BufferInfo {
            kind: BufferKind::Input,
            step: None,
            bytes: self.input_bytes(),
        }];
        for (i, s) in self.steps.iter().enumerate() {
            let kind = if i + 1 == self.steps.len() {
                BufferKind::Output
            } else {
                BufferKind::Intermediate
            };
            v.push(BufferInfo {
                kind,
                step: Some(i),
                bytes: s.lowered.output().bytes().unwrap_or(0),
            });
            if let Lowered::Native(k) = &s.lowered
                && k.scratch_bytes > 0
            {
                v.push(BufferInfo {
                    kind: BufferKind::Scratch,
                    step: Some(i),
                    bytes: k.scratch_bytes,
                });
            }
        }
        v
    }
}

fn segment(steps: &[Step]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let Lowered::Expr(first) = &steps[i].lowered else {
            out.push(Segment::Native(i));
            i += 1;
            continue;
        };
        let start = i;
        let mut expr = ir::shift_rand(&first.expr, steps[i].rand_offset);
        i += 1;
        while i < steps.len() {
            let Lowered::Expr(k) = &steps[i].lowered else {
                break;
            };
            let inner_shape = &steps[i].input.shape;
            let fused = ir::fuse(&k.expr, &expr, inner_shape, steps[i].rand_offset);
            if fused.size() > MAX_FUSED_NODES {
                break;
            }
            expr = fused;
            i += 1;
        }
        out.push(Segment::Fused {
            steps: start..i,
            expr,
        });
    }
    out
}
