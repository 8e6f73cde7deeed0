//! Decoders: how a field's stored bytes become one row of a batch output.
//!
//! A [`Decoder`] declares, for one field of one file, the per-sample output it writes
//! ([`DecoderOutput`]: shape, element type, the pipeline state transforms see) and then
//! decodes samples one at a time from a [`SampleInput`] (the sample's stored bytes and
//! its metadata) into the sample's row of the output buffer. The loader turns a decoder
//! into the first operation of the field's pipeline-jit pipeline (a native kernel), so the
//! transforms after it are fused and compiled with it. [`BatchDecoder`] runs a decoder
//! outside a loader, over samples its caller located (FFCV's protocol, where code drives
//! a decoder itself), with the loader's per-sample seeds.
//!
//! Adding a decoder (for example an image decoder) means implementing [`Decoder`] — safe
//! code only — and, to make it a field type's default or to name it on the command line,
//! adding an arm to [`default_decoder`] and [`DecoderChoice`]'s parser. A new field type's
//! default decoder goes in a module of its own (as `fixed_bytes.rs`) plus its arm in
//! [`default_decoder`]. Custom fields have no default: a user's decoder is given per field
//! with [`crate::LoaderBuilder::pipeline`] or [`crate::LoaderBuilder::decoder`], and reads
//! the bytes the field's [`beton_io::CustomHandler`] locates ([`SampleInput::data`]).

mod copy;
mod defaults;
mod fixed_bytes;
mod image;
mod image_kinds;
pub(crate) mod kernel;
mod spec;
mod standalone;
mod var_array;
pub(crate) mod views;

use std::sync::Arc;

use beton_io::{Field, NumpyDtype, Reader};
use pipeline_jit::{ElemType, Operation, State};

pub use defaults::{
    BytesDecoder, FloatDecoder, IntDecoder, JsonDecoder, NdArrayDecoder, RawBytesDecoder,
    default_decoder,
};
pub use fixed_bytes::FixedBytesDecoder;
pub use image::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
    check_stored_image,
};
pub use image_kinds::{ImageCrop, ImageDecoder};
pub use spec::{DecoderChoice, UnknownDecoder, parse_field_decoder};
pub use standalone::{BatchDecoder, SampleDecodeError, StoredSample};
pub use var_array::{OverCap, VarArrayDecoder};

/// The default cap on a decoded image's area, `2^27` = 134,217,728 pixels (384 MiB of
/// RGB): above every camera sensor sold today (the largest common ones are about 100 MP,
/// e.g. 11648 x 8736), far below the 65535 x 65535 a `.beton` header can claim. A file
/// whose metadata or JPEG header claims more is refused sample by sample before any
/// pixel memory is allocated; raise it with [`crate::LoaderBuilder::max_image_pixels`]
/// (CLI: `--max-image-pixels`) for trusted files of larger images.
pub const DEFAULT_MAX_IMAGE_PIXELS: u64 = 1 << 27;

/// What kind of values an output holds: decides which helpers a [`crate::Batch`] offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// One number per sample (`[B, 1]`).
    Scalar,
    /// A fixed-shape array per sample.
    Array,
    /// Variable-length bytes padded to a fixed width, with per-sample lengths.
    Bytes,
    /// Like [`OutputKind::Bytes`], and each row holds a JSON document.
    Json,
    /// Variable-length arrays padded with zeros to a fixed number of rows (the row shape's
    /// first axis), with each sample's number of rows as its length.
    Rows,
}

impl OutputKind {
    /// Whether rows have per-sample lengths.
    pub fn has_lengths(self) -> bool {
        matches!(
            self,
            OutputKind::Bytes | OutputKind::Json | OutputKind::Rows
        )
    }
}

/// The per-sample output a decoder writes for one field of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderOutput {
    /// Shape of one sample's row, as users see it (the batch dimension not included).
    pub shape: Vec<usize>,
    /// Element type as users see it (numpy's description, e.g. `<i2`).
    pub dtype: NumpyDtype,
    /// The pipeline state the transforms after the decoder see. It describes the same
    /// bytes as `shape` and `dtype`; for element types pipeline-jit has no name for
    /// (int16, big-endian...) it is `U8` with the item size as a last axis.
    pub state: State,
    /// What the output holds.
    pub kind: OutputKind,
    /// Per-sample scratch bytes [`Decoder::decode`] gets (0 for none).
    pub scratch_bytes: usize,
}

impl DecoderOutput {
    /// An output of `shape` elements of `dtype`, with the pipeline state derived from them.
    pub fn new(shape: Vec<usize>, dtype: NumpyDtype, kind: OutputKind) -> DecoderOutput {
        let state = match pipeline_dtype(&dtype) {
            Some(t) => State::cpu(shape.clone(), t),
            None => {
                let mut s = shape.clone();
                s.push(dtype.item_size() as usize);
                State::cpu(s, ElemType::U8)
            }
        };
        DecoderOutput {
            shape,
            dtype,
            state,
            kind,
            scratch_bytes: 0,
        }
    }

    /// Bytes of one sample's row, if that fits in `usize`.
    pub fn row_bytes(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(self.dtype.item_size() as usize, |acc, &d| {
                acc.checked_mul(d)
            })
    }
}

/// The pipeline-jit element type with the same bytes as numpy's `dtype` on this machine
/// (little-endian), if there is one.
pub fn pipeline_dtype(dtype: &NumpyDtype) -> Option<ElemType> {
    use beton_io::{ByteOrder, NumpyKind};
    let native = matches!(
        dtype.byte_order(),
        ByteOrder::Little | ByteOrder::NotApplicable
    );
    if !native || cfg!(target_endian = "big") {
        return None;
    }
    match (dtype.kind(), dtype.item_size()) {
        (NumpyKind::UInt, 1) => Some(ElemType::U8),
        (NumpyKind::UInt, 2) => Some(ElemType::U16),
        (NumpyKind::Int, 4) => Some(ElemType::I32),
        (NumpyKind::Int, 8) => Some(ElemType::I64),
        (NumpyKind::Float, 2) => Some(ElemType::F16),
        (NumpyKind::Float, 4) => Some(ElemType::F32),
        (NumpyKind::Float, 8) => Some(ElemType::F64),
        _ => None,
    }
}

/// numpy's description of a pipeline-jit element type.
pub fn numpy_dtype(dtype: ElemType) -> NumpyDtype {
    use beton_io::{ByteOrder, NumpyKind};
    let (kind, size) = match dtype {
        ElemType::U8 => (NumpyKind::UInt, 1),
        ElemType::U16 => (NumpyKind::UInt, 2),
        ElemType::I32 => (NumpyKind::Int, 4),
        ElemType::I64 => (NumpyKind::Int, 8),
        ElemType::F16 => (NumpyKind::Float, 2),
        ElemType::F32 => (NumpyKind::Float, 4),
        ElemType::F64 => (NumpyKind::Float, 8),
    };
    NumpyDtype::numeric(kind, size, ByteOrder::Little).expect("a valid numeric dtype")
}

/// The field a decoder is declared for.
#[derive(Debug, Clone, Copy)]
pub struct FieldInfo<'a> {
    /// The file (for scans over every sample's metadata, e.g. the largest size).
    pub reader: &'a Reader,
    /// The field's index in the file.
    pub index: usize,
    /// The field.
    pub field: &'a Field,
    /// The loader's cap on a decoded image's area ([`crate::LoaderBuilder::max_image_pixels`]);
    /// image decoders refuse a larger size before they allocate for it.
    pub max_image_pixels: u64,
}

/// One sample of one field, as a decoder sees it.
#[derive(Debug, Clone, Copy)]
pub struct SampleInput<'a> {
    /// The sample id.
    pub sample: u64,
    /// The field's stored bytes for this sample, exactly (Bytes/JSON: `size` bytes;
    /// NDArray: the array; raw images: `h * w * 3`; JPEG images: the allocation).
    /// Empty for fields kept in the metadata (Int, Float). For a custom field, the extent
    /// its handler gives.
    pub data: &'a [u8],
    /// The field's metadata bytes for this sample (at most 16: longer custom metadata is
    /// cut to its first 16 bytes; see `docs/format.md`).
    pub metadata: &'a [u8],
    /// The seed of this sample's generator for this operation: depends only on the
    /// loader's seed, the epoch, the sample and the operation's position.
    pub seed: u64,
    /// The loader's cap on a decoded image's area (see [`FieldInfo::max_image_pixels`]).
    pub max_image_pixels: u64,
}

impl SampleInput<'_> {
    /// The metadata as an Int field's value.
    pub fn int(&self) -> Option<i64> {
        beton_io::fields::int::IntKind::value(self.metadata)
    }

    /// The metadata as a Float field's value.
    pub fn float(&self) -> Option<f64> {
        beton_io::fields::float::FloatKind::value(self.metadata)
    }

    /// The metadata as an RGBImage field's `(mode, width, height)` (mode 0 JPEG, 1 raw).
    pub fn image_header(&self) -> Option<(u8, u16, u16)> {
        beton_io::fields::rgb_image::RgbImageKind::header(self.metadata)
    }
}

/// Turns one field's stored samples into rows of a batch output.
///
/// Implementations are shared by the loader's worker threads (`Send + Sync`) and called
/// concurrently; keep per-call state in the scratch buffer or in thread-locals.
pub trait Decoder: Send + Sync + 'static {
    /// A short name for errors and logs (`"IntDecoder"`).
    fn name(&self) -> String;

    /// The output this decoder writes for `field`, or why it cannot decode that field.
    /// Called once per loader (and per epoch with `recompile`), so it may scan every
    /// sample's metadata.
    fn declare(
        &self,
        field: &FieldInfo<'_>,
    ) -> std::result::Result<DecoderOutput, crate::ExtensionError>;

    /// Decodes one sample into `output` (exactly one row: the declared row bytes).
    /// `scratch` holds the declared scratch bytes. An error names what is wrong; the loader
    /// adds the file, field and sample, and ends the epoch with it.
    fn decode(
        &self,
        input: &SampleInput<'_>,
        output: &mut [u8],
        scratch: &mut [u8],
    ) -> std::result::Result<(), crate::ExtensionError>;

    /// Declares that [`Decoder::decode`] is a plain copy (see [`CopyRule`]), so that a
    /// pipeline of this decoder alone can be filled batch-wide without a call per sample.
    /// The loader still calls `decode` for any sample the rule does not cover (a stored
    /// length that does not fit), so errors stay `decode`'s. Default: `None`.
    fn copy_rule(&self) -> Option<CopyRule> {
        None
    }

    /// For the built-in crop decoders: whether their opt-in DCT-domain downscaling is on,
    /// so that a caller holding only the `dyn Decoder` a spec parsed into (`:dct-scale`,
    /// see [`DecoderChoice`]) can tell. Default: off.
    #[doc(hidden)]
    fn dct_downscale(&self) -> bool {
        false
    }

    /// For the built-in crop decoders: their crop rule and output `(height, width)`, so
    /// that several views of one image field can share a JPEG decode (`views.rs`).
    /// Default: `None` (the decoder's views are decoded each on their own).
    #[doc(hidden)]
    fn image_view(&self) -> Option<(rgb_image::RgbDecoderKind, (u32, u32))> {
        None
    }
}

/// How a copying decoder's row is made from a sample (see [`Decoder::copy_rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CopyRule {
    /// The row is the first row-bytes bytes of the field's metadata (little-endian
    /// `IntField`/`FloatField` values read natively on a little-endian machine).
    Metadata,
    /// The row is the stored bytes, exactly one row long.
    Exact,
    /// The row is the stored bytes followed by zeros.
    Padded,
}

/// A field's pipeline: a decoder, then pipeline-jit operations (transforms).
#[derive(Clone)]
pub struct PipelineSpec {
    pub(crate) decoder: Arc<dyn Decoder>,
    pub(crate) transforms: Vec<Arc<dyn Operation>>,
}

impl std::fmt::Debug for PipelineSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.transforms.iter().map(|t| t.name()).collect();
        f.debug_struct("PipelineSpec")
            .field("decoder", &self.decoder.name())
            .field("transforms", &names)
            .finish()
    }
}

impl PipelineSpec {
    /// A pipeline that only decodes.
    pub fn new(decoder: impl Decoder) -> PipelineSpec {
        PipelineSpec::from_arc(Arc::new(decoder))
    }

    /// A pipeline with a shared decoder.
    pub fn from_arc(decoder: Arc<dyn Decoder>) -> PipelineSpec {
        PipelineSpec {
            decoder,
            transforms: Vec::new(),
        }
    }

    /// Appends a transform.
    pub fn then(mut self, op: impl Operation + 'static) -> PipelineSpec {
        self.transforms.push(Arc::new(op));
        self
    }

    /// Appends a shared transform.
    pub fn then_arc(mut self, op: Arc<dyn Operation>) -> PipelineSpec {
        self.transforms.push(op);
        self
    }

    /// The decoder.
    pub fn decoder(&self) -> &Arc<dyn Decoder> {
        &self.decoder
    }

    /// The transforms, in order.
    pub fn transforms(&self) -> &[Arc<dyn Operation>] {
        &self.transforms
    }
}
