//! `recompile`: decoders are declared again and code regenerated at every epoch, so a
//! decoder whose parameters change between epochs (progressive resizing) takes effect;
//! without it the loader keeps the first epoch's pipeline.

use crate::loader_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ffcv::decode::{DecoderOutput, FieldInfo, OutputKind, SampleInput};
use ffcv::format::NumpyDtype;
use ffcv::{Decoder, Loader, PipelineSpec};
use loader_support::fixture;

/// Writes the sample id's low byte `width` times; the width is read at declaration.
struct Repeat(Arc<AtomicUsize>);

impl Decoder for Repeat {
    fn name(&self) -> String {
        "Repeat".into()
    }

    fn declare(&self, _: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        let width = self.0.load(Ordering::SeqCst);
        Ok(DecoderOutput::new(
            vec![width],
            NumpyDtype::u8(),
            OutputKind::Array,
        ))
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        out.fill(input.sample as u8);
        Ok(())
    }
}

fn shapes(recompile: bool, compile: bool) -> Vec<Vec<usize>> {
    let width = Arc::new(AtomicUsize::new(4));
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(10)
        .num_workers(2)
        .recompile(recompile)
        .compile(compile)
        .pipeline("index", PipelineSpec::new(Repeat(Arc::clone(&width))))
        .build()
        .unwrap();
    let mut out = Vec::new();
    for w in [4, 6, 2] {
        width.store(w, Ordering::SeqCst);
        let mut epoch_shapes = Vec::new();
        for b in &mut loader {
            let b = b.unwrap();
            let v = b.get::<u8>("index").unwrap();
            for (row, &s) in b.sample_ids().iter().enumerate() {
                assert!(v.row(row).iter().all(|&x| x == s as u8));
            }
            epoch_shapes.push(v.shape()[1]);
        }
        epoch_shapes.dedup();
        assert_eq!(epoch_shapes.len(), 1);
        out.push(vec![epoch_shapes[0], loader.outputs()[0].shape[0]]);
    }
    out
}

#[test]
fn recompile_picks_up_changed_parameters_each_epoch() {
    for compile in [true, false] {
        assert_eq!(
            shapes(true, compile),
            vec![vec![4, 4], vec![6, 6], vec![2, 2]]
        );
    }
}

#[test]
fn without_recompile_the_first_pipeline_stays() {
    assert_eq!(shapes(false, true), vec![vec![4, 4]; 3]);
}
