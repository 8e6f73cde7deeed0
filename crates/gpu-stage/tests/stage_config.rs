//! Stage configurations are checked before any device is touched.

use gpu_stage::{Dtype, Error, Normalize, OutputInfo, OutputKind, OutputSpec, StageConfig};

fn config(outputs: Vec<OutputSpec>) -> StageConfig {
    StageConfig {
        max_batch: 256,
        batches_ahead: 3,
        outputs,
    }
}

fn invalid_output(c: &StageConfig) -> (String, String) {
    match c.validate() {
        Err(Error::InvalidOutput { output, reason }) => (output, reason),
        other => panic!("expected InvalidOutput, got {other:?}"),
    }
}

#[test]
fn outputs_are_described_as_the_device_holds_them() {
    let c = config(vec![
        OutputSpec::raw("label", Dtype::I64, &[]),
        OutputSpec::raw("embedding", Dtype::F32, &[4, 8]),
        OutputSpec::image("image", 224, 200, Normalize::imagenet(Dtype::F16), true),
    ]);
    let infos = c.validate().unwrap();
    assert_eq!(
        infos,
        [
            OutputInfo {
                name: "label".into(),
                dtype: Dtype::I64,
                sample_shape: vec![],
                host_sample_bytes: 8,
            },
            OutputInfo {
                name: "embedding".into(),
                dtype: Dtype::F32,
                sample_shape: vec![4, 8],
                host_sample_bytes: 128,
            },
            OutputInfo {
                name: "image".into(),
                dtype: Dtype::F16,
                sample_shape: vec![3, 224, 200],
                host_sample_bytes: 224 * 200 * 3,
            },
        ]
    );
}

#[test]
fn image_spec_takes_its_channels_from_the_normalize_vectors() {
    let spec = OutputSpec::image("gray", 8, 8, Normalize::convert_only(1, Dtype::F32), false);
    match spec.kind {
        OutputKind::Image { channels, .. } => assert_eq!(channels, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_stages_are_refused_with_the_output_named() {
    let mut c = config(vec![OutputSpec::raw("x", Dtype::U8, &[4])]);
    c.max_batch = 0;
    assert_eq!(invalid_output(&c).0, "(stage)");

    assert_eq!(invalid_output(&config(vec![])).0, "(stage)");

    let dup = config(vec![
        OutputSpec::raw("x", Dtype::U8, &[4]),
        OutputSpec::raw("x", Dtype::I32, &[1]),
    ]);
    assert_eq!(
        invalid_output(&dup),
        ("x".into(), "two outputs have this name".into())
    );

    let empty = config(vec![OutputSpec::raw("nothing", Dtype::U8, &[0, 5])]);
    assert_eq!(invalid_output(&empty).0, "nothing");

    let overflow = config(vec![OutputSpec::raw(
        "huge",
        Dtype::F64,
        &[usize::MAX / 4, 4],
    )]);
    assert_eq!(invalid_output(&overflow).0, "huge");

    let too_big = config(vec![OutputSpec::raw("big", Dtype::U8, &[1 << 33])]);
    let (name, reason) = invalid_output(&too_big);
    assert_eq!(name, "big");
    assert!(reason.contains("buffer limit"), "{reason}");

    let mut mismatched = OutputSpec::image("img", 4, 4, Normalize::imagenet(Dtype::F32), false);
    if let OutputKind::Image { channels, .. } = &mut mismatched.kind {
        *channels = 4;
    }
    assert_eq!(invalid_output(&config(vec![mismatched])).0, "img");

    let not_float = config(vec![OutputSpec::image(
        "img",
        4,
        4,
        Normalize::convert_only(3, Dtype::I32),
        false,
    )]);
    let (name, reason) = invalid_output(&not_float);
    assert_eq!(name, "img");
    assert!(reason.contains("float64, float32"), "{reason}");
}
