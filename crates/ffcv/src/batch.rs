//! Batches: a guard over one slot's output buffers, with typed views per output.

use std::sync::Arc;

use beton_io::NumpyDtype;

use crate::batch_slots::{Slot, SlotPool};
use crate::decode::OutputKind;
use crate::error::{Error, Result};
use crate::memory::{Element, cast_slice, element_matches};

/// One output of the loader's batches (one enabled field).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputInfo {
    /// The output's name: the field's name.
    pub name: String,
    /// The field's index in the file.
    pub field: usize,
    /// Shape of one sample's row (the batch dimension not included).
    pub shape: Vec<usize>,
    /// Element type (numpy's description).
    pub dtype: NumpyDtype,
    /// What the rows hold.
    pub kind: OutputKind,
    /// Bytes of one row.
    pub row_bytes: usize,
}

/// A batch: owns its slot until dropped, so nothing overwrites it while it lives.
///
/// Outputs are named by field; [`Batch::get`] views one as `&[T]` with its shape, and
/// [`Batch::output`] gives the bytes, per-sample lengths and JSON helpers.
pub struct Batch {
    slot: Option<Slot>,
    pool: Arc<SlotPool>,
    outputs: Arc<[OutputInfo]>,
    epoch: u64,
    index: usize,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("epoch", &self.epoch)
            .field("index", &self.index)
            .field("len", &self.len())
            .field("slot", &self.slot_index())
            .finish()
    }
}

impl Batch {
    pub(crate) fn new(
        slot: Slot,
        pool: Arc<SlotPool>,
        outputs: Arc<[OutputInfo]>,
        epoch: u64,
        index: usize,
    ) -> Batch {
        Batch {
            slot: Some(slot),
            pool,
            outputs,
            epoch,
            index,
        }
    }

    fn slot(&self) -> &Slot {
        self.slot.as_ref().expect("a live batch owns its slot")
    }

    /// Samples in the batch (the batch size, or fewer for a final partial batch).
    pub fn len(&self) -> usize {
        self.slot().sample_ids.len()
    }

    /// Whether the batch has no samples (never for batches the loader yields).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epoch this batch belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The batch's position in its epoch (0-based).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The sample id of each row.
    pub fn sample_ids(&self) -> &[u64] {
        &self.slot().sample_ids
    }

    /// Which slot holds the batch (slots are reused once batches drop).
    pub fn slot_index(&self) -> usize {
        self.slot().index
    }

    /// What the loader's [`crate::SlotStage`] attached to this batch (for a GPU stage: the
    /// device tensors and their ready event), if it is a `T`.
    pub fn attachment<T: std::any::Any>(&self) -> Option<&T> {
        self.slot().attachment.as_ref()?.downcast_ref::<T>()
    }

    /// The outputs, in field order.
    pub fn outputs(&self) -> &[OutputInfo] {
        &self.outputs
    }

    /// The output named `name`.
    pub fn output(&self, name: &str) -> Result<BatchOutput<'_>> {
        let Some(i) = self.outputs.iter().position(|o| o.name == name) else {
            let names: Vec<&str> = self.outputs.iter().map(|o| o.name.as_str()).collect();
            return Err(Error::Output {
                name: name.into(),
                reason: format!("no such output (the batch has: {})", names.join(", ")),
            });
        };
        let slot = self.slot();
        let info = &self.outputs[i];
        let n = self.len();
        Ok(BatchOutput {
            info,
            bytes: &slot.outputs[i].memory.as_bytes()[..n * info.row_bytes],
            lengths: info
                .kind
                .has_lengths()
                .then(|| &slot.outputs[i].lengths[..n]),
            len: n,
        })
    }

    /// The output named `name` as elements of `T`, checked against its element type.
    pub fn get<T: Element>(&self, name: &str) -> Result<TypedView<'_, T>> {
        self.output(name)?.typed()
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.give_back(slot);
        }
    }
}

/// One output of a batch: its rows as bytes, with lengths for byte and JSON outputs.
#[derive(Debug, Clone, Copy)]
pub struct BatchOutput<'a> {
    info: &'a OutputInfo,
    bytes: &'a [u8],
    lengths: Option<&'a [u64]>,
    len: usize,
}

impl<'a> BatchOutput<'a> {
    /// What the output holds.
    pub fn info(&self) -> &'a OutputInfo {
        self.info
    }

    /// Shape of the whole batch: `[B, ...row shape]`.
    pub fn shape(&self) -> Vec<usize> {
        let mut s = Vec::with_capacity(self.info.shape.len() + 1);
        s.push(self.len);
        s.extend_from_slice(&self.info.shape);
        s
    }

    /// Every row's bytes, row after row.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Row `i`'s bytes (the whole padded row for byte outputs).
    pub fn row(&self, i: usize) -> &'a [u8] {
        &self.bytes[i * self.info.row_bytes..(i + 1) * self.info.row_bytes]
    }

    /// Per-sample lengths of a byte or JSON output, or the number of array rows of a
    /// [`OutputKind::Rows`] output (`None` for other outputs).
    pub fn lengths(&self) -> Option<&'a [u64]> {
        self.lengths
    }

    /// Row `i`'s defined bytes: the first `length` bytes for byte outputs, the first
    /// `length` array rows for a [`OutputKind::Rows`] output, the row otherwise.
    pub fn value(&self, i: usize) -> &'a [u8] {
        let row = self.row(i);
        match self.lengths {
            Some(l) => {
                let len = (l[i] as usize).saturating_mul(self.length_unit());
                &row[..len.min(row.len())]
            }
            None => row,
        }
    }

    /// Bytes one unit of a length stands for: an array row for [`OutputKind::Rows`], a
    /// byte otherwise.
    fn length_unit(&self) -> usize {
        match (self.info.kind, self.info.shape.first()) {
            (OutputKind::Rows, Some(&k)) if k > 0 => self.info.row_bytes / k,
            _ => 1,
        }
    }

    /// The largest length of the batch: for a [`OutputKind::Rows`] output, the batch's
    /// `K_max` (its rows past it are all padding); `None` for outputs without lengths.
    pub fn batch_max_rows(&self) -> Option<u64> {
        self.lengths.map(|l| l.iter().copied().max().unwrap_or(0))
    }

    /// The packed form of an output with lengths: every row's defined bytes one after the
    /// other, and `B + 1` offsets (in lengths' units: array rows for a
    /// [`OutputKind::Rows`] output) where row `i` is `offsets[i]..offsets[i + 1]`. A copy;
    /// `None` for outputs without lengths.
    pub fn packed(&self) -> Option<(Vec<u8>, Vec<u64>)> {
        let lengths = self.lengths?;
        let mut offsets = Vec::with_capacity(lengths.len() + 1);
        offsets.push(0u64);
        let total: usize = (0..self.len).map(|i| self.value(i).len()).sum();
        let mut values = Vec::with_capacity(total);
        let mut at = 0u64;
        for (i, &len) in lengths.iter().enumerate().take(self.len) {
            values.extend_from_slice(self.value(i));
            at += len;
            offsets.push(at);
        }
        Some((values, offsets))
    }

    /// Row `i` of a JSON output parsed (the text up to its NUL, as FFCV's `unpack`).
    pub fn json(&self, i: usize) -> Result<serde_json::Value> {
        let bad = |reason: String| Error::Json {
            name: self.info.name.clone(),
            row: i,
            reason,
        };
        if self.info.kind != OutputKind::Json {
            return Err(bad(format!("a {:?} output holds no JSON", self.info.kind)));
        }
        let text = self.value(i).split(|&b| b == 0).next().unwrap_or_default();
        serde_json::from_slice(text).map_err(|e| bad(e.to_string()))
    }

    /// The rows as elements of `T`.
    pub fn typed<T: Element>(&self) -> Result<TypedView<'a, T>> {
        let bad = |reason: String| Error::Output {
            name: self.info.name.clone(),
            reason,
        };
        if !element_matches::<T>(&self.info.dtype) {
            return Err(bad(format!(
                "holds {}, not {}",
                self.info.dtype.descr(),
                std::any::type_name::<T>()
            )));
        }
        let data = cast_slice::<T>(self.bytes).ok_or_else(|| {
            bad("buffer is not aligned for the element type (custom slot allocator?)".into())
        })?;
        Ok(TypedView {
            data,
            shape: self.shape(),
            lengths: self.lengths,
        })
    }
}

/// An output as a slice of `T` with its batch shape.
#[derive(Debug, Clone)]
pub struct TypedView<'a, T> {
    data: &'a [T],
    shape: Vec<usize>,
    lengths: Option<&'a [u64]>,
}

impl<'a, T> TypedView<'a, T> {
    /// Every element, row-major, `shape.iter().product()` of them.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// `[B, ...row shape]`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Row `i`'s elements.
    pub fn row(&self, i: usize) -> &'a [T] {
        let per: usize = self.shape[1..].iter().product();
        &self.data[i * per..(i + 1) * per]
    }

    /// Per-sample lengths (byte and JSON outputs).
    pub fn lengths(&self) -> Option<&'a [u64]> {
        self.lengths
    }
}

impl<T> std::ops::Deref for TypedView<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.data
    }
}
