//! Stage configurations are checked before any device is touched.

use gpu_stage::{
    DeviceDtype, DeviceOutputInfo, DeviceOutputKind, Error, Normalize, OutputSpec, StageConfig,
};

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
        OutputSpec::raw("label", DeviceDtype::I64, &[]),
        OutputSpec::raw("embedding", DeviceDtype::F32, &[4, 8]),
        OutputSpec::image(
            "image",
            224,
            200,
            Normalize::imagenet(DeviceDtype::F16),
            true,
        ),
    ]);
    let infos = c.validate().unwrap();
    assert_eq!(
        infos,
        [
            DeviceOutputInfo {
                name: "label".into(),
                dtype: DeviceDtype::I64,
                sample_shape: vec![],
                host_sample_bytes: 8,
            },
            DeviceOutputInfo {
                name: "embedding".into(),
                dtype: DeviceDtype::F32,
                sample_shape: vec![4, 8],
                host_sample_bytes: 128,
            },
            DeviceOutputInfo {
                name: "image".into(),
                dtype: DeviceDtype::F16,
                sample_shape: vec![3, 224, 200],
                host_sample_bytes: 224 * 200 * 3,
            },
        ]
    );
}

#[test]
fn image_spec_takes_its_channels_from_the_normalize_vectors() {
    let spec = OutputSpec::image(
        "gray",
        8,
        8,
        Normalize::convert_only(1, DeviceDtype::F32),
        false,
    );
    match spec.kind {
        DeviceOutputKind::Image { channels, .. } => assert_eq!(channels, 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_stages_are_refused_with_the_output_named() {
    let mut c = config(vec![OutputSpec::raw("x", DeviceDtype::U8, &[4])]);
    c.max_batch = 0;
    assert_eq!(invalid_output(&c).0, "(stage)");

    assert_eq!(invalid_output(&config(vec![])).0, "(stage)");

    let dup = config(vec![
        OutputSpec::raw("x", DeviceDtype::U8, &[4]),
        OutputSpec::raw("x", DeviceDtype::I32, &[1]),
    ]);
    assert_eq!(
        invalid_output(&dup),
        ("x".into(), "two outputs have this name".into())
    );

    let empty = config(vec![OutputSpec::raw("nothing", DeviceDtype::U8, &[0, 5])]);
    assert_eq!(invalid_output(&empty).0, "nothing");

    let overflow = config(vec![OutputSpec::raw(
        "huge",
        DeviceDtype::F64,
        &[usize::MAX / 4, 4],
    )]);
    assert_eq!(invalid_output(&overflow).0, "huge");

    let too_big = config(vec![OutputSpec::raw("big", DeviceDtype::U8, &[1 << 33])]);
    let (name, reason) = invalid_output(&too_big);
    assert_eq!(name, "big");
    assert!(reason.contains("buffer limit"), "{reason}");

    let mut mismatched =
        OutputSpec::image("img", 4, 4, Normalize::imagenet(DeviceDtype::F32), false);
    if let DeviceOutputKind::Image { channels, .. } = &mut mismatched.kind {
        *channels = 4;
    }
    assert_eq!(invalid_output(&config(vec![mismatched])).0, "img");

    let not_float = config(vec![OutputSpec::image(
        "img",
        4,
        4,
        Normalize::convert_only(3, DeviceDtype::I32),
        false,
    )]);
    let (name, reason) = invalid_output(&not_float);
    assert_eq!(name, "img");
    assert!(reason.contains("float64, float32"), "{reason}");
}
