//! Each built-in expressible operation against a hand-computed expectation, compiled and
//! interpreted (both must give the expected bytes).

use crate::common;

use pipeline_jit::half::{f16_from_f64, f16_to_f64};
use pipeline_jit::ops::{
    Clamp, Convert, Cutout, NormalizeImage, RandomHorizontalFlip, RandomTranslate, Scale, Squeeze,
    ToChw,
};
use pipeline_jit::{ElemType, Pipeline, State};

/// Run both engines (1 and 2 threads), check they agree, return the bytes.
fn both(p: &Pipeline, ids: &[u64], input: &[u8]) -> Vec<u8> {
    let jit = common::run(p, true, 2, ids, input, 5, 0);
    let interp = common::run(p, false, 1, ids, input, 5, 0);
    assert_eq!(jit, interp, "JIT and interpreter disagree on {p:?}");
    jit
}

fn u8s(shape: &[usize]) -> State {
    State::cpu(shape.to_vec(), ElemType::U8)
}

#[test]
fn to_chw_moves_channels_first() {
    let p = Pipeline::new(u8s(&[2, 2, 3])).then(ToChw);
    let input: Vec<u8> = (0..12).collect();
    assert_eq!(
        both(&p, &[0], &input),
        vec![0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]
    );
    assert_eq!(p.plan().unwrap().output().shape, vec![3, 2, 2]);
}

#[test]
fn convert_then_scale_then_convert_back_saturates() {
    let p = Pipeline::new(u8s(&[3]))
        .then(Convert(ElemType::F32))
        .then(Scale {
            mul: 2.0,
            add: -10.5,
        })
        .then(Convert(ElemType::U8));
    // 0*2-10.5 = -10.5 -> 0; 100*2-10.5 = 189.5 -> 189; 200*2-10.5 = 389.5 -> 255.
    assert_eq!(both(&p, &[0], &[0, 100, 200]), vec![0, 189, 255]);
}

#[test]
fn scale_is_multiply_then_add_in_f32() {
    let p = Pipeline::new(u8s(&[2]))
        .then(Convert(ElemType::F32))
        .then(Scale { mul: 0.1, add: 1.0 });
    let out = common::f32s(&both(&p, &[0], &[3, 7]));
    assert_eq!(
        out,
        vec![3.0f32 * 0.1f32 + 1.0f32, 7.0f32 * 0.1f32 + 1.0f32]
    );
}

#[test]
fn normalize_u8_to_f32_per_channel() {
    let norm = NormalizeImage {
        mean: vec![10.0, 10.0, 10.0],
        std: vec![2.0, 4.0, 5.0],
        dtype: ElemType::F32,
    };
    let p = Pipeline::new(u8s(&[1, 2, 3])).then(norm.clone());
    let out = common::f32s(&both(&p, &[0], &[10, 20, 30, 0, 255, 12]));
    assert_eq!(out, vec![0.0, 2.5, 4.0, -5.0, 61.25, 0.4]);
    // A float input takes the arithmetic form, not the table; same values.
    let pf = Pipeline::new(u8s(&[1, 2, 3]))
        .then(Convert(ElemType::F32))
        .then(norm);
    assert_eq!(
        common::f32s(&both(&pf, &[0], &[10, 20, 30, 0, 255, 12])),
        out
    );
}

/// Binary16 bits of each element.
fn f16s(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .collect()
}

#[test]
fn normalize_u8_to_f16_rounds_once_from_f64() {
    let norm = NormalizeImage {
        mean: vec![123.675, 116.28, 103.53],
        std: vec![58.395, 57.12, 57.375],
        dtype: ElemType::F16,
    };
    let p = Pipeline::new(u8s(&[1, 2, 3])).then(norm.clone());
    let input = [0, 128, 255, 7, 116, 200];
    let out = f16s(&both(&p, &[0], &input));
    // (0 - 123.675) / 58.395 = -2.1179...: binary16 -2.1171875 (0xc03c) is nearer than
    // -2.119140625 (0xc03d); 1.0 and 0 are exact; the rest are pinned from the f64 values.
    assert_eq!(out[0], 0xc03c);
    let means = [123.675, 116.28, 103.53];
    let stds = [58.395, 57.12, 57.375];
    let expected: Vec<u16> = input
        .iter()
        .enumerate()
        .map(|(k, &v)| f16_from_f64((f64::from(v) - means[k % 3]) / stds[k % 3]))
        .collect();
    assert_eq!(out, expected);
    // The arithmetic form (float input) rounds the same f64 once: identical bits.
    let pf = Pipeline::new(u8s(&[1, 2, 3]))
        .then(Convert(ElemType::F32))
        .then(norm);
    assert_eq!(f16s(&both(&pf, &[0], &input)), out);
}

/// FFCV's `NormalizeImage(mean, std, np.float16)` table with ImageNet's statistics, as
/// NumPy 1.26 fills it (`np.zeros((256, 3), np.float16)[:] = (arange(256)[:, None] - mean)
/// / std`, float64 rounded once): rows 0, 1, 77, 128, 200 and 255, printed by the reference
/// environment. Both engines give these bits.
#[test]
fn normalize_to_f16_equals_ffcvs_numpy_table() {
    let p = Pipeline::new(u8s(&[1, 6, 3])).then(NormalizeImage {
        mean: vec![0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
        std: vec![0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
        dtype: ElemType::F16,
    });
    let rows: [u8; 6] = [0, 1, 77, 128, 200, 255];
    let input: Vec<u8> = rows.iter().flat_map(|&v| [v; 3]).collect();
    let numpy: [u16; 18] = [
        0xc03c, 0xc012, 0xbf38, 0xc034, 0xc009, 0xbf26, 0xba65, 0xb980, 0xb766, 0x2cbd, 0x3291,
        0x36d3, 0x3d3a, 0x3ddd, 0x3eba, 0x407f, 0x40db, 0x4148,
    ];
    assert_eq!(f16s(&both(&p, &[0], &input)), numpy);
}

#[test]
fn f16_arithmetic_rounds_once_and_saturates_to_infinity() {
    // 1 + 2^-11 is the tie between 1 and the next binary16: to even (1.0); 65520 (the tie
    // above the largest finite, 65504) converts to infinity, which stays infinite.
    let p = Pipeline::new(State::cpu([4], ElemType::F64))
        .then(Convert(ElemType::F16))
        .then(Scale {
            mul: 1.0,
            add: 1.0 / 2048.0,
        });
    let input: Vec<u8> = [1.0f64, 65504.0, -3.0, 65520.0]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let out = f16s(&both(&p, &[0], &input));
    assert_eq!(out[0], 0x3c00, "1 + 2^-11 ties to even 1.0");
    assert_eq!(out[1], 0x7bff, "65504 + 2^-11 stays 65504");
    assert_eq!(f16_to_f64(out[2]), -3.0, "a quarter of an ulp rounds back");
    assert_eq!(out[3], 0x7c00, "65520 is infinity");
}

#[test]
fn normalize_rounds_like_ffcv_f64_then_cast() {
    let p = Pipeline::new(u8s(&[1, 1, 1])).then(NormalizeImage {
        mean: vec![0.1],
        std: vec![0.3],
        dtype: ElemType::F64,
    });
    let out = both(&p, &[0], &[7]);
    assert_eq!(
        f64::from_ne_bytes(out[..8].try_into().unwrap()),
        (7.0 - 0.1) / 0.3
    );
}

#[test]
fn flip_with_probability_one_and_zero() {
    let input = [1, 2, 3, 4, 5, 6]; // [1, 3, 2]: pixels (1,2) (3,4) (5,6)
    let always = Pipeline::new(u8s(&[1, 3, 2])).then(RandomHorizontalFlip(1.0));
    assert_eq!(both(&always, &[0], &input), vec![5, 6, 3, 4, 1, 2]);
    let never = Pipeline::new(u8s(&[1, 3, 2])).then(RandomHorizontalFlip(0.0));
    assert_eq!(both(&never, &[0], &input), input.to_vec());
}

#[test]
fn flip_half_flips_some_samples_and_keeps_others() {
    let p = Pipeline::new(u8s(&[2, 3, 1])).then(RandomHorizontalFlip(0.5));
    let ids: Vec<u64> = (0..64).collect();
    let sample = [1, 2, 3, 4, 5, 6];
    let input: Vec<u8> = sample.iter().copied().cycle().take(6 * 64).collect();
    let out = both(&p, &ids, &input);
    let flipped = [3, 2, 1, 6, 5, 4];
    let n_flipped = out.chunks(6).filter(|s| *s == flipped).count();
    let n_kept = out.chunks(6).filter(|s| *s == sample).count();
    assert_eq!(n_flipped + n_kept, 64);
    assert!(n_flipped > 10 && n_kept > 10, "flipped {n_flipped} of 64");
}

#[test]
fn cutout_fills_one_square_short_of_the_last_row_and_column() {
    let p = Pipeline::new(u8s(&[4, 5, 2])).then(Cutout {
        size: 2,
        fill: vec![200.0, 201.0],
    });
    let ids: Vec<u64> = (0..16).collect();
    let input = vec![1u8; 40 * 16];
    let out = both(&p, &ids, &input);
    for s in out.chunks(40) {
        let filled: Vec<(usize, usize)> = (0..4)
            .flat_map(|y| (0..5).map(move |x| (y, x)))
            .filter(|&(y, x)| s[(y * 5 + x) * 2] == 200)
            .collect();
        assert_eq!(filled.len(), 4, "{s:?}");
        let (y0, x0) = filled[0];
        // FFCV draws the corner with randint(H - size): rows 0..=1, columns 0..=2 here.
        assert!(y0 <= 1 && x0 <= 2, "corner ({y0}, {x0})");
        assert_eq!(
            filled,
            vec![(y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)]
        );
        for &(y, x) in &filled {
            assert_eq!(s[(y * 5 + x) * 2 + 1], 201);
        }
        assert_eq!(s.iter().filter(|&&v| v == 1).count(), 40 - 8);
    }
}

#[test]
fn translate_shifts_by_at_most_padding_and_fills() {
    let p = Pipeline::new(u8s(&[3, 3, 1])).then(RandomTranslate {
        padding: 1,
        fill: vec![0.0],
    });
    let ids: Vec<u64> = (0..32).collect();
    let img: Vec<u8> = (1..=9).collect();
    let input: Vec<u8> = img.iter().copied().cycle().take(9 * 32).collect();
    let out = both(&p, &ids, &input);
    let shifted = |dy: i64, dx: i64| -> Vec<u8> {
        (0..3i64)
            .flat_map(|y| (0..3i64).map(move |x| (y + dy, x + dx)))
            .map(|(sy, sx)| {
                if (0..3).contains(&sy) && (0..3).contains(&sx) {
                    img[(sy * 3 + sx) as usize]
                } else {
                    0
                }
            })
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    for s in out.chunks(9) {
        let shift = (-1..=1i64)
            .flat_map(|dy| (-1..=1i64).map(move |dx| (dy, dx)))
            .find(|&(dy, dx)| shifted(dy, dx) == s);
        seen.insert(shift.unwrap_or_else(|| panic!("not a translation: {s:?}")));
    }
    assert!(seen.len() > 3, "only shifts {seen:?} in 32 samples");
}

#[test]
fn clamp_bounds_every_element() {
    let p = Pipeline::new(u8s(&[8])).then(Clamp { lo: 2.0, hi: 5.0 });
    assert_eq!(
        both(&p, &[0], &[0, 1, 2, 3, 4, 5, 6, 7]),
        vec![2, 2, 2, 3, 4, 5, 5, 5]
    );
}

#[test]
fn squeeze_drops_unit_axes() {
    let p = Pipeline::new(u8s(&[1, 3, 1])).then(Squeeze);
    assert_eq!(p.plan().unwrap().output().shape, vec![3]);
    assert_eq!(
        both(&p, &[0, 1], &[1, 2, 3, 4, 5, 6]),
        vec![1, 2, 3, 4, 5, 6]
    );
}

#[test]
fn flip_normalize_to_chw_fuses_into_one_segment() {
    let p = Pipeline::new(u8s(&[2, 2, 3]))
        .then(RandomHorizontalFlip(1.0))
        .then(NormalizeImage {
            mean: vec![0.0; 3],
            std: vec![1.0; 3],
            dtype: ElemType::F32,
        })
        .then(ToChw);
    let plan = p.plan().unwrap();
    assert_eq!(plan.segments().len(), 1);
    let input: Vec<u8> = (0..12).collect();
    // Flipped HWC: row0 = px1 px0 = (3,4,5)(0,1,2); row1 = (9,10,11)(6,7,8); then CHW.
    let expected = [3.0, 0.0, 9.0, 6.0, 4.0, 1.0, 10.0, 7.0, 5.0, 2.0, 11.0, 8.0];
    assert_eq!(common::f32s(&both(&p, &[0], &input)), expected);
}

/// `v as T` for each element type, as native-endian bytes.
fn as_bytes(t: ElemType, v: f64) -> Vec<u8> {
    match t {
        ElemType::U8 => vec![v as u8],
        ElemType::U16 => (v as u16).to_ne_bytes().to_vec(),
        ElemType::I32 => (v as i32).to_ne_bytes().to_vec(),
        ElemType::I64 => (v as i64).to_ne_bytes().to_vec(),
        ElemType::F16 => f16_from_f64(v).to_ne_bytes().to_vec(),
        ElemType::F32 => (v as f32).to_ne_bytes().to_vec(),
        ElemType::F64 => v.to_ne_bytes().to_vec(),
    }
}

/// One element of type `from` (native-endian bytes) converted to `to` with Rust's `as`
/// (through `f64` with one rounding for `F16`).
fn cast_bytes(from: ElemType, to: ElemType, b: &[u8]) -> Vec<u8> {
    macro_rules! to {
        ($x:expr) => {
            match to {
                ElemType::U8 => vec![$x as u8],
                ElemType::U16 => ($x as u16).to_ne_bytes().to_vec(),
                ElemType::I32 => ($x as i32).to_ne_bytes().to_vec(),
                ElemType::I64 => ($x as i64).to_ne_bytes().to_vec(),
                ElemType::F16 => f16_from_f64($x as f64).to_ne_bytes().to_vec(),
                ElemType::F32 => ($x as f32).to_ne_bytes().to_vec(),
                ElemType::F64 => ($x as f64).to_ne_bytes().to_vec(),
            }
        };
    }
    match from {
        ElemType::U8 => to!(b[0]),
        ElemType::U16 => to!(u16::from_ne_bytes(b.try_into().unwrap())),
        ElemType::I32 => to!(i32::from_ne_bytes(b.try_into().unwrap())),
        ElemType::I64 => to!(i64::from_ne_bytes(b.try_into().unwrap())),
        ElemType::F16 => to!(f16_to_f64(u16::from_ne_bytes(b.try_into().unwrap()))),
        ElemType::F32 => to!(f32::from_ne_bytes(b.try_into().unwrap())),
        ElemType::F64 => to!(f64::from_ne_bytes(b.try_into().unwrap())),
    }
}

#[test]
fn convert_is_rust_as_for_every_type_pair() {
    let values = [
        0.0,
        -0.0,
        1.0,
        255.5,
        256.0,
        -0.5,
        -1.0,
        1e10,
        -1e10,
        f64::INFINITY,
        f64::NEG_INFINITY,
        3.75e-3,
    ];
    for from in ElemType::ALL {
        for to in ElemType::ALL {
            let input: Vec<u8> = values.iter().flat_map(|&v| as_bytes(from, v)).collect();
            let p = Pipeline::new(State::cpu([values.len()], from)).then(Convert(to));
            let out = both(&p, &[0], &input);
            let expected: Vec<u8> = input
                .chunks(from.size())
                .flat_map(|b| cast_bytes(from, to, b))
                .collect();
            assert_eq!(out, expected, "{from:?} -> {to:?}");
        }
    }
}
