//! The CPU reference of the device kernel: FFCV's table arithmetic, HWC → CHW, flips.

use gpu_stage::{
    DeviceDtype, Error, ImageShape, Normalize, NormalizeTable, f16_bits_to_f64, f64_to_bf16_bits,
    f64_to_f16_bits, normalize_reference,
};

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn u16s(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn table_entries_are_the_f64_quotient_rounded_once() {
    let n = Normalize::imagenet(DeviceDtype::F32);
    let table = NormalizeTable::new("image", &n).unwrap();
    assert_eq!(table.channels(), 3);
    for v in [0u8, 1, 77, 128, 254, 255] {
        for c in 0..3 {
            let exact = (f64::from(v) - n.mean[c]) / n.std[c];
            assert_eq!(table.get(v, c), u64::from((exact as f32).to_bits()));
        }
    }
    // A value checked by hand: (255 - 0.485*255) / (0.229*255) = 0.515 / 0.229.
    assert_eq!(
        f32::from_bits(table.get(255, 0) as u32),
        (0.515f64 / 0.229) as f32
    );

    let h = NormalizeTable::new("image", &Normalize::imagenet(DeviceDtype::F16)).unwrap();
    let b = NormalizeTable::new("image", &Normalize::imagenet(DeviceDtype::Bf16)).unwrap();
    for v in 0..=255u8 {
        for c in 0..3 {
            let exact = (f64::from(v) - n.mean[c]) / n.std[c];
            assert_eq!(h.get(v, c), u64::from(f64_to_f16_bits(exact)));
            assert_eq!(b.get(v, c), u64::from(f64_to_bf16_bits(exact)));
            // Within half an f16 ulp of the exact value.
            let got = f16_bits_to_f64(h.get(v, c) as u16);
            assert!((got - exact).abs() <= exact.abs() * 2f64.powi(-11) + 1e-12);
        }
    }
}

#[test]
fn device_bytes_are_little_endian_elements_of_the_output_size() {
    let t32 = NormalizeTable::new("x", &Normalize::convert_only(2, DeviceDtype::F32)).unwrap();
    let bytes = t32.to_device_bytes();
    assert_eq!(bytes.len(), 256 * 2 * 4);
    // Row 3, channel 1 is 3.0f32.
    assert_eq!(&bytes[(3 * 2 + 1) * 4..][..4], &3.0f32.to_le_bytes());
    let t16 = NormalizeTable::new("x", &Normalize::convert_only(1, DeviceDtype::F16)).unwrap();
    let bytes = t16.to_device_bytes();
    assert_eq!(bytes.len(), 256 * 2);
    assert_eq!(&bytes[2..4], &0x3c00u16.to_le_bytes()); // 1.0 in f16
    let t64 = NormalizeTable::new("x", &Normalize::imagenet(DeviceDtype::F64)).unwrap();
    let bytes = t64.to_device_bytes();
    assert_eq!(bytes.len(), 256 * 3 * 8);
    let exact = (200.0 - 0.456 * 255.0) / (0.224 * 255.0);
    assert_eq!(&bytes[(200 * 3 + 1) * 8..][..8], &f64::to_le_bytes(exact));
}

#[test]
fn reference_moves_hwc_to_chw_and_flips_flagged_samples() {
    // Two 2×3 images with 2 channels; byte value = 100*b + 10*y + x for channel 0, +1 for 1.
    let shape = ImageShape {
        batch: 2,
        height: 2,
        width: 3,
        channels: 2,
    };
    let mut src = Vec::new();
    for b in 0..2u8 {
        for y in 0..2u8 {
            for x in 0..3u8 {
                src.push(100 * b + 10 * y + x);
                src.push(100 * b + 10 * y + x + 1);
            }
        }
    }
    let table = NormalizeTable::new("img", &Normalize::convert_only(2, DeviceDtype::F32)).unwrap();
    let out = f32s(&normalize_reference(&table, shape, &src, Some(&[0, 1])).unwrap());
    #[rustfmt::skip]
    let expected: Vec<f32> = vec![
        // sample 0, not flipped: channel 0 then channel 1, rows of 3
        0., 1., 2., 10., 11., 12.,
        1., 2., 3., 11., 12., 13.,
        // sample 1, flipped: columns reversed
        102., 101., 100., 112., 111., 110.,
        103., 102., 101., 113., 112., 111.,
    ];
    assert_eq!(out, expected);
    // No flags at all: nothing flipped.
    let plain = f32s(&normalize_reference(&table, shape, &src, None).unwrap());
    assert_eq!(&plain[..12], &expected[..12]);
    assert_eq!(&plain[12..18], &[100., 101., 102., 110., 111., 112.]);
}

#[test]
fn reference_applies_per_channel_mean_and_std_in_the_output_dtype() {
    let n = Normalize {
        mean: vec![10.0, 20.0, 30.0],
        std: vec![2.0, 4.0, 8.0],
        dtype: DeviceDtype::F16,
    };
    let table = NormalizeTable::new("img", &n).unwrap();
    let shape = ImageShape {
        batch: 1,
        height: 1,
        width: 1,
        channels: 3,
    };
    let out = u16s(&normalize_reference(&table, shape, &[14, 28, 54], None).unwrap());
    // (14-10)/2 = 2, (28-20)/4 = 2, (54-30)/8 = 3
    assert_eq!(out, [0x4000, 0x4000, 0x4200]);
}

#[test]
fn bad_parameters_are_errors_naming_the_output() {
    let bad = [
        Normalize {
            mean: vec![],
            std: vec![],
            dtype: DeviceDtype::F32,
        },
        Normalize {
            mean: vec![0.0; 3],
            std: vec![1.0; 2],
            dtype: DeviceDtype::F32,
        },
        Normalize {
            mean: vec![0.0],
            std: vec![0.0],
            dtype: DeviceDtype::F32,
        },
        Normalize {
            mean: vec![f64::NAN],
            std: vec![1.0],
            dtype: DeviceDtype::F32,
        },
        Normalize {
            mean: vec![0.0],
            std: vec![f64::INFINITY],
            dtype: DeviceDtype::F32,
        },
        Normalize::convert_only(1, DeviceDtype::U8),
        Normalize::convert_only(17, DeviceDtype::F32),
    ];
    for n in bad {
        match NormalizeTable::new("pixels", &n) {
            Err(Error::InvalidOutput { output, .. }) => assert_eq!(output, "pixels"),
            other => panic!("{n:?} gave {other:?}"),
        }
    }
}

#[test]
fn mismatched_buffers_are_errors_not_panics() {
    let table = NormalizeTable::new("img", &Normalize::convert_only(3, DeviceDtype::F32)).unwrap();
    let shape = ImageShape {
        batch: 2,
        height: 4,
        width: 4,
        channels: 3,
    };
    assert!(normalize_reference(&table, shape, &[0; 95], None).is_err());
    assert!(normalize_reference(&table, shape, &[0; 96], Some(&[1])).is_err());
    let four = ImageShape {
        channels: 4,
        ..shape
    };
    assert!(normalize_reference(&table, four, &[0; 128], None).is_err());
    let huge = ImageShape {
        batch: usize::MAX,
        ..shape
    };
    assert!(normalize_reference(&table, huge, &[], None).is_err());
    assert_eq!(
        normalize_reference(&table, shape, &[0; 96], Some(&[1, 0]))
            .unwrap()
            .len(),
        96 * 4
    );
}
