//! The decode of a group of views of one RGB image field (`views.rs`): per sample, the
//! batch fill calls [`decode_group`], which checks the stored image once and decodes every
//! view's row with rgb-image's [`ViewsKernel`] (the JPEG decoded once over the union of
//! the crops, or once per view, whichever its rule expects to be cheaper; the same bytes
//! either way). Each view's pipeline then starts with [`GroupedRows`], which takes the
//! row already decoded for it, so the transforms after it run as usual. Also here, below
//! the loader's modules that use them: [`view_seed`] and a runner's `ViewOf`.

use std::cell::RefCell;
use std::sync::Arc;

use pipeline_jit::rng::{sample_rng, sample_seed};
use rand_core::RngCore;

use super::{Decoder, DecoderOutput, FieldInfo, SampleInput, check_stored_image};
use crate::image::{ImageOut, ImageView, RgbDecoderKind, StoredImage, ViewsKernel, ViewsPolicy};

thread_local! {
    /// One reusable multi-view kernel per loader worker thread.
    static VIEWS: RefCell<ViewsKernel> = RefCell::new(ViewsKernel::new());
}

/// The seed view `view` of a field draws from: the loader's seed for view 0, a mix of it
/// and `view` otherwise (pipeline-jit then draws per `(epoch, sample, operation)` from it).
pub fn view_seed(seed: u64, view: usize) -> u64 {
    if view == 0 {
        seed
    } else {
        // A sample seed at an epoch and operation no loader reaches (u64::MAX), so the
        // mix cannot collide with a draw of view 0.
        sample_seed(seed, u64::MAX, view as u64, usize::MAX)
    }
}

/// Which view of its field a runner is (`views.rs`).
#[derive(Clone, Debug)]
pub(crate) struct ViewOf {
    /// The output's name (the view's, or the field's for view 0).
    pub(crate) name: String,
    /// 0 for the field under its own name, k for the k-th view added for it.
    pub(crate) index: usize,
    /// The group whose JPEG is decoded once per sample, when the runner is in one.
    pub(crate) group: Option<Arc<ViewGroup>>,
}

/// The views of one image field decoded together: the runners (by index, in output
/// order), each one's crop rule and output size, its view index, and the policy.
#[derive(Debug)]
pub(crate) struct ViewGroup {
    pub(crate) members: Vec<usize>,
    pub(crate) kinds: Vec<(RgbDecoderKind, (u32, u32))>,
    pub(crate) views: Vec<usize>,
    pub(crate) policy: ViewsPolicy,
}

impl ViewGroup {
    /// The decoded row bytes of runner `runner` (a member): its decoder's `h x w x 3`.
    pub(crate) fn row_bytes(&self, runner: usize) -> usize {
        self.members
            .iter()
            .position(|&m| m == runner)
            .map_or(0, |m| {
                let (h, w) = self.kinds[m].1;
                h as usize * w as usize * 3
            })
    }
}

/// The first operation of a grouped view's pipeline: the view's decoder as declared, whose
/// sample bytes are the row the group decode already wrote for it.
pub(crate) struct GroupedRows {
    inner: Arc<dyn Decoder>,
}

impl GroupedRows {
    pub(crate) fn new(inner: Arc<dyn Decoder>) -> GroupedRows {
        GroupedRows { inner }
    }
}

impl Decoder for GroupedRows {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn declare(&self, field: &FieldInfo<'_>) -> Result<DecoderOutput, crate::ExtensionError> {
        self.inner.declare(field)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), crate::ExtensionError> {
        if input.data.len() != out.len() {
            return Err(format!(
                "the group decode gave {} bytes for a row of {}",
                input.data.len(),
                out.len()
            )
            .into());
        }
        out.copy_from_slice(input.data);
        Ok(())
    }
}

/// One sample of a group: its stored bytes and metadata, the loader seed and epoch, the
/// image cap.
pub(crate) struct GroupSample<'a> {
    pub(crate) sample: u64,
    pub(crate) data: &'a [u8],
    pub(crate) metadata: &'a [u8],
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
    pub(crate) max_image_pixels: u64,
}

/// Decodes every view of `group` for one sample into `rows` (one per member, in member
/// order), each view drawing from its decoder's generator: the seed of operation 0 of its
/// pipeline under its view seed, as its decoder alone would. `Err` says what is wrong.
pub(crate) fn decode_group(
    group: &ViewGroup,
    s: &GroupSample<'_>,
    rows: &mut [&mut [u8]],
) -> Result<(), String> {
    let (mode, width, height) = beton_io::fields::rgb_image::RgbImageKind::header(s.metadata)
        .ok_or("metadata too short for an RGBImageField")?;
    check_stored_image(s.data, mode, height, width, s.max_image_pixels)?;
    let mut rngs: Vec<_> = group
        .views
        .iter()
        .map(|&v| {
            let seed = view_seed(s.seed, v);
            sample_rng(sample_seed(seed, s.epoch, s.sample, 0))
        })
        .collect();
    let mut views: Vec<ImageView<'_>> = group
        .kinds
        .iter()
        .zip(rows.iter_mut())
        .zip(rngs.iter_mut())
        .map(|((&(kind, (h, w)), row), rng)| ImageView {
            kind,
            rng: rng as &mut dyn RngCore,
            out: ImageOut {
                pixels: row,
                height: h,
                width: w,
            },
        })
        .collect();
    let image = StoredImage {
        mode,
        height,
        width,
        data: s.data,
    };
    VIEWS.with(|kernel| {
        let mut kernel = kernel
            .try_borrow_mut()
            .map_err(|_| "image kernel re-entered on one thread".to_owned())?;
        kernel.set_policy(group.policy);
        kernel
            .decode_views(image, &mut views)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}
