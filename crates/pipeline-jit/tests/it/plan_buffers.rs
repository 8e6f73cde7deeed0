//! A plan knows every state and buffer size before the first batch, and groups steps into
//! native calls and fused segments.

use std::sync::Arc;

use pipeline_jit::ops::{Convert, NormalizeImage, RandomHorizontalFlip, ToChw};
use pipeline_jit::{
    BufferKind, ElemType, KernelArgs, Lowered, NativeKernel, Operation, Pipeline, Segment, State,
};

struct Fill;

unsafe extern "C" fn fill(args: *const KernelArgs) -> i32 {
    // SAFETY: called by pipeline-jit with valid arguments; the output is this call's own.
    unsafe { (*args).output() }.fill(1);
    0
}

impl Operation for Fill {
    fn name(&self) -> String {
        "Fill".into()
    }
    fn lower(&self, _: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let out = State::cpu([4, 5, 3], ElemType::U8);
        Ok(Lowered::Native(
            NativeKernel::new(out, fill, Arc::new(())).with_scratch(1000),
        ))
    }
}

#[test]
fn buffers_and_segments_are_known_before_running() {
    let p = Pipeline::new(State::cpu([0], ElemType::U8))
        .then(Fill)
        .then(RandomHorizontalFlip(0.5))
        .then(NormalizeImage {
            mean: vec![0.0; 3],
            std: vec![1.0; 3],
            dtype: ElemType::F64,
        })
        .then(Fill)
        .then(Convert(ElemType::I32))
        .then(ToChw);
    let plan = p.plan().unwrap();
    let got: Vec<(BufferKind, Option<usize>, usize)> = plan
        .buffers()
        .iter()
        .map(|b| (b.kind, b.step, b.bytes))
        .collect();
    assert_eq!(
        got,
        vec![
            (BufferKind::Input, None, 0),
            (BufferKind::Intermediate, Some(0), 60),
            (BufferKind::Scratch, Some(0), 1000),
            (BufferKind::Intermediate, Some(1), 60),
            (BufferKind::Intermediate, Some(2), 480),
            (BufferKind::Intermediate, Some(3), 60),
            (BufferKind::Scratch, Some(3), 1000),
            (BufferKind::Intermediate, Some(4), 240),
            (BufferKind::Output, Some(5), 240),
        ]
    );
    assert_eq!(plan.output(), &State::cpu([3, 4, 5], ElemType::I32));
    let segs: Vec<String> = plan
        .segments()
        .iter()
        .map(|s| match s {
            Segment::Native(i) => format!("native {i}"),
            Segment::Fused { steps, .. } => format!("fused {steps:?}"),
        })
        .collect();
    assert_eq!(segs, ["native 0", "fused 1..3", "native 3", "fused 4..6"]);
    // One random slot for the flip, one seed per native kernel.
    assert_eq!(plan.rand_slots().len(), 3);
}
