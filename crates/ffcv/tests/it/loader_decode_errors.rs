//! A decoder's failure ends the epoch with an error naming the file, field, decoder and
//! sample; batches before it were delivered intact. Also a decoder that panics.

use ffcv::decode::{DecoderOutput, FieldInfo, IntDecoder, SampleInput};
use ffcv::{Decoder, Error, Loader, PipelineSpec};

pub(crate) fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/ffcv-1.0.2/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Decodes like IntDecoder but fails (or panics) on one sample.
pub(crate) struct FailOn {
    pub(crate) sample: u64,
    pub(crate) panic: bool,
}

impl Decoder for FailOn {
    fn name(&self) -> String {
        "FailOn".into()
    }

    fn declare(&self, field: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        IntDecoder.declare(field)
    }

    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        s: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        if input.sample == self.sample {
            if self.panic {
                panic!("boom at {}", input.sample);
            }
            return Err(format!("value {} is corrupt", input.int().unwrap()).into());
        }
        IntDecoder.decode(input, out, s)
    }
}

fn run(panic: bool, compile: bool, os_cache: bool) {
    let mut loader = Loader::builder(fixture("scalars.beton"))
        .batch_size(10)
        .num_workers(2)
        .compile(compile)
        .os_cache(os_cache)
        .pipeline("index", PipelineSpec::new(FailOn { sample: 43, panic }))
        .build()
        .unwrap();
    let mut ok = 0;
    let mut errors = Vec::new();
    let mut after_error = 0;
    for item in loader.iter() {
        match item {
            Ok(batch) if errors.is_empty() => {
                let index = batch.get::<i64>("index").unwrap();
                assert_eq!(index[0], (ok * 10) as i64);
                ok += 1;
            }
            Ok(_) => after_error += 1,
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(ok, 4, "batches 0..4 come before sample 43's batch");
    assert_eq!(errors.len(), 1);
    assert_eq!(after_error, 0, "the epoch ends at the error");
    let err = &errors[0];
    let text = err.to_string();
    match err {
        Error::Decode {
            field,
            sample,
            decoder,
            ..
        } => {
            assert_eq!(field, "index");
            assert_eq!(*sample, 43);
            assert_eq!(decoder, "FailOn");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    assert!(text.contains("scalars.beton"), "{text}");
    assert!(text.contains("sample 43"), "{text}");
    if panic {
        assert!(text.contains("panicked: boom at 43"), "{text}");
    } else {
        assert!(text.contains("value 43 is corrupt"), "{text}");
    }
    // The next epoch runs (and fails) the same way: the loader stays usable.
    let n = loader.iter().take_while(|b| b.is_ok()).count();
    assert_eq!(n, 4);
}

#[test]
fn a_failing_decoder_names_field_and_sample() {
    for compile in [true, false] {
        for os_cache in [true, false] {
            run(false, compile, os_cache);
        }
    }
}

#[test]
fn a_panicking_decoder_is_an_error_not_a_crash() {
    run(true, true, true);
    run(true, false, false);
}
