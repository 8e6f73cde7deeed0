//! What a stage is built from ([`StageConfig`]: the outputs, [`OutputSpec`] and
//! [`DeviceOutputKind`], the batch size and how far ahead the producer runs), its checks
//! (sizes that overflow, channels without normalize vectors, duplicate names), and each
//! output's checked layout: bytes per sample on the host and the device, and an image's
//! lookup table. All of it runs without a device, so a bad configuration is refused before
//! anything is allocated.

use crate::normalize::NormalizeTable;
use crate::{DeviceDtype, Error, Normalize, Result};

/// What one output of the stage is and how it gets to the device.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceOutputKind {
    /// Bytes copied as they are. The host buffer holds `batch × sample_shape` elements of
    /// `dtype`; the device view has shape `[batch, sample_shape..]`.
    Raw {
        /// Element type (it only decides the view's type: the copy is bytewise).
        dtype: DeviceDtype,
        /// Shape of one sample (empty for a scalar per sample).
        sample_shape: Vec<usize>,
    },
    /// u8 images `[batch, height, width, channels]` on the host, turned on the device into
    /// `[batch, channels, height, width]` of `normalize.dtype` by the fused kernel.
    Image {
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Channels per pixel (the normalize vectors have this length).
        channels: usize,
        /// Per-channel mean/std and output type.
        normalize: Normalize,
        /// Whether the slot carries one flip flag per sample (non-zero = mirror left-right).
        flip: bool,
    },
}

/// One named output of the stage.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    /// The name (a field name, for the facade).
    pub name: String,
    /// What it holds.
    pub kind: DeviceOutputKind,
}

impl OutputSpec {
    /// A raw output copied bytewise.
    pub fn raw(name: impl Into<String>, dtype: DeviceDtype, sample_shape: &[usize]) -> Self {
        OutputSpec {
            name: name.into(),
            kind: DeviceOutputKind::Raw {
                dtype,
                sample_shape: sample_shape.to_vec(),
            },
        }
    }

    /// An image output normalized (and optionally flipped) on the device.
    pub fn image(
        name: impl Into<String>,
        height: usize,
        width: usize,
        normalize: Normalize,
        flip: bool,
    ) -> Self {
        OutputSpec {
            name: name.into(),
            kind: DeviceOutputKind::Image {
                height,
                width,
                channels: normalize.mean.len(),
                normalize,
                flip,
            },
        }
    }
}

/// Everything a stage is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct StageConfig {
    /// Samples a slot holds (the loader's batch size).
    pub max_batch: usize,
    /// Batches the producer may run ahead of the consumer; the stage has
    /// `batches_ahead + 2` slots, as FFCV.
    pub batches_ahead: usize,
    /// The outputs, in order.
    pub outputs: Vec<OutputSpec>,
}

/// Public description of one output, as the device sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceOutputInfo {
    /// The output's name.
    pub name: String,
    /// Element type on the device.
    pub dtype: DeviceDtype,
    /// Shape of one sample on the device (CHW for images).
    pub sample_shape: Vec<usize>,
    /// Bytes per sample in the host buffer.
    pub host_sample_bytes: usize,
}

/// A checked output: sizes per sample and, for images, the lookup table.
#[derive(Debug)]
pub(crate) struct OutputLayout {
    /// The output's name.
    pub(crate) name: String,
    /// Bytes per sample in the pinned host buffer (and the device input buffer).
    pub(crate) host_sample_bytes: usize,
    /// Shape of one sample on the device, and its element type.
    pub(crate) device_sample_shape: Vec<usize>,
    pub(crate) device_dtype: DeviceDtype,
    /// The image's geometry and table; `None` for a raw output.
    pub(crate) image: Option<ImageLayout>,
}

/// A checked image output: HWC geometry on the host, whether it carries flip flags, and
/// the lookup table the kernel normalizes with.
#[derive(Debug)]
pub(crate) struct ImageLayout {
    pub(crate) height: usize,
    pub(crate) width: usize,
    pub(crate) channels: usize,
    pub(crate) flip: bool,
    pub(crate) table: NormalizeTable,
}

impl OutputLayout {
    /// Bytes per sample on the device (the kernel's output, for images).
    pub(crate) fn device_sample_bytes(&self) -> usize {
        self.host_sample_bytes * self.elem_scale()
    }

    /// Device bytes per host byte: 1 for raw outputs, the output dtype's size for images.
    fn elem_scale(&self) -> usize {
        if self.image.is_some() {
            self.device_dtype.size()
        } else {
            1
        }
    }
}

/// Largest buffer the stage will allocate, far above any batch and far below where size
/// arithmetic or cudarc's own checks could overflow.
const MAX_BUFFER_BYTES: usize = 1 << 40;

/// Checks one output and computes its layout for slots of `max_batch` samples.
fn check_output(spec: &OutputSpec, max_batch: usize) -> Result<OutputLayout> {
    let invalid = |reason: String| Error::InvalidOutput {
        output: spec.name.clone(),
        reason,
    };
    let product = |dims: &[usize]| {
        dims.iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| invalid(format!("shape {dims:?} overflows")))
    };
    let layout = match &spec.kind {
        DeviceOutputKind::Raw {
            dtype,
            sample_shape,
        } => {
            let elems = product(sample_shape)?;
            OutputLayout {
                name: spec.name.clone(),
                host_sample_bytes: elems
                    .checked_mul(dtype.size())
                    .ok_or_else(|| invalid("sample size overflows".to_owned()))?,
                device_sample_shape: sample_shape.clone(),
                device_dtype: *dtype,
                image: None,
            }
        }
        DeviceOutputKind::Image {
            height,
            width,
            channels,
            normalize,
            flip,
        } => {
            if normalize.mean.len() != *channels {
                return Err(invalid(format!(
                    "{channels} channels but {} normalize means",
                    normalize.mean.len()
                )));
            }
            let table = NormalizeTable::new(&spec.name, normalize)?;
            OutputLayout {
                name: spec.name.clone(),
                host_sample_bytes: product(&[*height, *width, *channels])?,
                device_sample_shape: vec![*channels, *height, *width],
                device_dtype: normalize.dtype,
                image: Some(ImageLayout {
                    height: *height,
                    width: *width,
                    channels: *channels,
                    flip: *flip,
                    table,
                }),
            }
        }
    };
    if layout.host_sample_bytes == 0 {
        return Err(invalid("a sample holds no bytes".to_owned()));
    }
    let slot_bytes = layout
        .host_sample_bytes
        .checked_mul(layout.elem_scale())
        .and_then(|b| b.checked_mul(max_batch))
        .filter(|&b| b <= MAX_BUFFER_BYTES)
        .ok_or_else(|| {
            invalid(format!(
                "{max_batch} samples of {} bytes exceed the {MAX_BUFFER_BYTES}-byte buffer limit",
                layout.host_sample_bytes
            ))
        })?;
    debug_assert!(slot_bytes >= layout.host_sample_bytes);
    Ok(layout)
}

/// Checks a whole configuration: a batch of at least one sample, at least one output,
/// every output valid and named once.
pub(crate) fn check_config(config: &StageConfig) -> Result<Vec<OutputLayout>> {
    let stage_error = |reason: &str| Error::InvalidOutput {
        output: "(stage)".to_owned(),
        reason: reason.to_owned(),
    };
    if config.max_batch == 0 {
        return Err(stage_error("max_batch must be at least 1"));
    }
    if config.outputs.is_empty() {
        return Err(stage_error("a stage needs at least one output"));
    }
    let outputs = config
        .outputs
        .iter()
        .map(|o| check_output(o, config.max_batch))
        .collect::<Result<Vec<_>>>()?;
    for (i, o) in outputs.iter().enumerate() {
        if outputs[..i].iter().any(|p| p.name == o.name) {
            return Err(Error::InvalidOutput {
                output: o.name.clone(),
                reason: "two outputs have this name".to_owned(),
            });
        }
    }
    Ok(outputs)
}

impl OutputLayout {
    /// The public description of this output.
    pub(crate) fn info(&self) -> DeviceOutputInfo {
        DeviceOutputInfo {
            name: self.name.clone(),
            dtype: self.device_dtype,
            sample_shape: self.device_sample_shape.clone(),
            host_sample_bytes: self.host_sample_bytes,
        }
    }
}

impl StageConfig {
    /// Checks the configuration without a device and describes the outputs as the device
    /// will hold them (what [`Stage::new`](crate::Stage::new) checks before allocating
    /// anything).
    pub fn validate(&self) -> Result<Vec<DeviceOutputInfo>> {
        Ok(check_config(self)?.iter().map(OutputLayout::info).collect())
    }
}
