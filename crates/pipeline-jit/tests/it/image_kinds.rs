//! The image transforms on the ImageField kinds (1, 3 or 4 channels; `u8` and `u16`
//! samples): flip, per-channel normalize to f16/f32/f64, CHW and conversions, compiled
//! and interpreted bit-identically, and the `u16` values exact.

use crate::common;

use pipeline_jit::ops::{Convert, NormalizeImage, RandomHorizontalFlip, ToChw};
use pipeline_jit::{ElemType, Pipeline, State};
use proptest::prelude::*;

fn chain(input: ElemType, shape: [usize; 3], pick: u64, dtype: ElemType) -> Pipeline {
    let c = shape[2];
    let mut p = Pipeline::new(State::cpu(shape.to_vec(), input));
    if pick & 1 != 0 {
        p = p.then(RandomHorizontalFlip(0.5));
    }
    if pick & 2 != 0 {
        let mean = (0..c).map(|k| 1000.0 * k as f64 + 12.5).collect();
        let std = (0..c).map(|k| 300.0 + 77.0 * k as f64).collect();
        p = p.then(NormalizeImage { mean, std, dtype });
    } else if pick & 8 != 0 {
        p = p.then(Convert(dtype));
    }
    if pick & 4 != 0 {
        p = p.then(ToChw);
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn image_kind_chains_compile_to_the_interpreters_output(
        h in 1usize..5, w in prop::sample::select(vec![1usize, 5, 16, 37]),
        c in prop::sample::select(vec![1usize, 3, 4]),
        wide in any::<bool>(),
        pick in 1u64..16,
        dtype in prop::sample::select(vec![ElemType::F16, ElemType::F32, ElemType::F64]),
        batch in 1usize..4,
        seed in any::<u64>(),
    ) {
        let input_type = if wide { ElemType::U16 } else { ElemType::U8 };
        let p = chain(input_type, [h, w, c], pick, dtype);
        let ids: Vec<u64> = (0..batch as u64).map(|i| i * 3 + 1).collect();
        let input = common::bytes(batch * h * w * c * input_type.size(), seed);
        let reference = common::run(&p, false, 1, &ids, &input, seed, 1);
        prop_assert_eq!(&common::run(&p, true, 1, &ids, &input, seed, 1), &reference, "{:?}", p);
        prop_assert_eq!(&common::run(&p, true, 2, &ids, &input, seed, 1), &reference, "{:?}", p);
    }
}

#[test]
fn u16_samples_normalize_and_convert_exactly() {
    let values: [u16; 4] = [0, 1, 40000, 65535];
    let input: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let p = Pipeline::new(State::cpu([1, 4, 1], ElemType::U16)).then(NormalizeImage {
        mean: vec![32768.0],
        std: vec![16384.0],
        dtype: ElemType::F32,
    });
    for compiled in [false, true] {
        let out = common::f32s(&common::run(&p, compiled, 1, &[0], &input, 0, 0));
        assert_eq!(
            out,
            vec![-2.0, -32767.0 / 16384.0, 0.44140625, 32767.0 / 16384.0]
        );
    }
    // f32 to u16 saturates, as Rust's `as` does; u16 to u8 keeps the low byte.
    let floats: Vec<u8> = [-3.0f32, 1.6, 70000.0, f32::NAN]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let p = Pipeline::new(State::cpu([4], ElemType::F32)).then(Convert(ElemType::U16));
    let q = Pipeline::new(State::cpu([4], ElemType::U16)).then(Convert(ElemType::U8));
    for compiled in [false, true] {
        let out = common::run(&p, compiled, 1, &[0], &floats, 0, 0);
        let got: Vec<u16> = out
            .chunks(2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, vec![0, 1, 65535, 0]);
        assert_eq!(
            common::run(&q, compiled, 1, &[0], &input, 0, 0),
            vec![0, 1, 64, 255]
        );
    }
}
