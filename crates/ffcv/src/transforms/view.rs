//! FFCV's `View(dtype)` inside a pipeline: the sample's bytes read as another element
//! type, NumPy's `ndarray.view`. The last axis is rescaled by the ratio of the item sizes
//! (`[H, W, 8]` `u8` viewed as `f32` is `[H, W, 2]`); the bytes are copied unchanged.
//!
//! At the end of a pipeline a view of the batch costs nothing (the Python package hands it
//! over as a NumPy or torch view); this operation is for a view that more operations
//! follow.
//!
//! ```
//! use ffcv::jit::{ElemType, Operation, State};
//! use ffcv::transforms::view::View;
//!
//! let lowered = View(ElemType::F32).lower(&State::cpu([4, 8], ElemType::U8)).unwrap();
//! assert_eq!(lowered.output().shape, [4, 2]);
//! assert!(View(ElemType::F32).lower(&State::cpu([4, 6], ElemType::U8)).is_err());
//! ```

use pipeline_jit::{ElemType, KernelCall, Lowered, NativeKernel, Operation, State};

/// FFCV's `View(dtype)` (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View(pub ElemType);

impl Operation for View {
    fn name(&self) -> String {
        "View".into()
    }

    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let Some((&last, outer)) = input.shape.split_last() else {
            return Err("cannot view a scalar as another type".into());
        };
        let (from, to) = (input.dtype.size(), self.0.size());
        let bytes = last * from;
        if bytes % to != 0 {
            return Err(format!(
                "the last axis holds {bytes} bytes ({last} x {:?}), not a whole number of {:?}",
                input.dtype, self.0
            )
            .into());
        }
        let mut shape = outer.to_vec();
        shape.push(bytes / to);
        let mut output = input.clone();
        output.shape = shape;
        output.dtype = self.0;
        Ok(Lowered::Native(NativeKernel::from_fn(
            output,
            |call: KernelCall<'_>| {
                call.output.copy_from_slice(call.input);
                Ok(())
            },
        )))
    }
}
