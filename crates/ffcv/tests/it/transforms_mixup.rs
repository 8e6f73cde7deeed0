//! Mixup on batches (`ffcv::transforms::mixup`): the lambdas depend only on (seed, epoch,
//! sample id); images are mixed with the previous row as FFCV 1.0.2 computes it (values
//! recorded from FFCV's compiled `ImageMixup`), in place or not, serially or in parallel;
//! label rows and one-hot rows as FFCV builds them; bad sizes and labels are errors.

use ffcv::decode::{IntDecoder, SimpleRGBImageDecoder};
use ffcv::jit::ElemType;
use ffcv::jit::half::{f16_from_f64, f16_to_f64};
use ffcv::transforms::mixup::{
    image_mixup, image_mixup_in_place, label_mixup, lambdas, mixup_to_one_hot,
};
use ffcv::{Loader, Order, PipelineSpec};

use crate::loader_support::fixture;

/// Deterministic test bytes (a 64-bit LCG's high bytes).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 56) as u8
        })
        .collect()
}

fn prev(i: usize, n: usize) -> usize {
    if i == 0 { n - 1 } else { i - 1 }
}

#[test]
fn lambdas_are_deterministic_and_inside_the_unit_interval() {
    let ids: Vec<u64> = (0..500).collect();
    let a = lambdas(7, 2, &ids, 0.5, false).unwrap();
    assert_eq!(a, lambdas(7, 2, &ids, 0.5, false).unwrap());
    assert_eq!(a.len(), 500);
    assert!(a.iter().all(|&l| l > 0.0 && l < 1.0), "{a:?}");
    // Beta(a, a) is symmetric about 1/2: the mean of 500 fixed draws is near it.
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    // Small alphas push the draws towards 0 and 1.
    let small = lambdas(7, 2, &ids, 0.1, false).unwrap();
    let extreme = small.iter().filter(|&&l| !(0.1..=0.9).contains(&l)).count();
    assert!(extreme > 300, "{extreme} of 500 draws outside [0.1, 0.9]");
}

#[test]
fn a_samples_lambda_does_not_depend_on_the_batch() {
    let ids = [40u64, 3, 17, 99, 0];
    let lam = lambdas(1, 4, &ids, 0.4, false).unwrap();
    let mut reversed = ids;
    reversed.reverse();
    let mut back = lambdas(1, 4, &reversed, 0.4, false).unwrap();
    back.reverse();
    assert_eq!(lam, back);
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(
            lambdas(1, 4, &[id], 0.4, false).unwrap()[0],
            lam[k],
            "id {id}"
        );
    }
}

#[test]
fn lambdas_change_with_the_epoch_and_the_seed() {
    let ids: Vec<u64> = (0..32).collect();
    let base = lambdas(1, 4, &ids, 0.4, false).unwrap();
    let epoch = lambdas(1, 5, &ids, 0.4, false).unwrap();
    let seed = lambdas(2, 4, &ids, 0.4, false).unwrap();
    for k in 0..32 {
        assert_ne!(base[k], epoch[k], "sample {k}, epochs 4 and 5");
        assert_ne!(base[k], seed[k], "sample {k}, seeds 1 and 2");
    }
    // Distinct samples of one epoch draw distinct values.
    let mut sorted = base.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    assert_eq!(sorted.len(), 32);
}

#[test]
fn same_lambda_gives_every_sample_the_last_ids_draw() {
    let ids = [8u64, 2, 30, 11];
    let same = lambdas(3, 1, &ids, 1.0, true).unwrap();
    let last = lambdas(3, 1, &[11], 1.0, false).unwrap()[0];
    assert_eq!(same, vec![last; 4]);
    let mut other = ids;
    other.swap(0, 3);
    assert_eq!(
        lambdas(3, 1, &other, 1.0, true).unwrap(),
        vec![lambdas(3, 1, &[8], 1.0, false).unwrap()[0]; 4]
    );
    assert!(lambdas(3, 1, &[], 1.0, true).unwrap().is_empty());
    assert!(lambdas(3, 1, &[], 1.0, false).unwrap().is_empty());
}

#[test]
fn alpha_must_be_finite_and_positive() {
    for alpha in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = lambdas(0, 0, &[1], alpha, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("Mixup: alpha {alpha} must be finite and > 0")
        );
    }
    assert!(lambdas(0, 0, &[1], 1e-3, false).is_ok());
    assert!(lambdas(0, 0, &[1], 1e6, false).is_ok());
}

/// Three `u8` rows of 8, their lambdas and FFCV 1.0.2's `ImageMixup` output for them
/// (its numba-compiled mixer, with the lambdas it drew for the batch).
#[test]
fn u8_images_match_ffcv() {
    let input: [u8; 24] = [
        29, 88, 95, 177, 25, 138, 228, 56, 112, 163, 148, 245, 215, 47, 111, 195, 178, 51, 129,
        200, 249, 73, 219, 94,
    ];
    let lam = ffcv_lambdas();
    let want: [u8; 24] = [
        120, 65, 115, 191, 162, 98, 222, 79, 96, 148, 137, 231, 178, 64, 133, 168, 124, 141, 144,
        236, 221, 51, 131, 175,
    ];
    let mut out = [0u8; 24];
    image_mixup(&input, &mut out, ElemType::U8, &lam).unwrap();
    assert_eq!(out, want);
}

/// The lambdas FFCV 1.0.2 drew for the batch of the recorded outputs.
fn ffcv_lambdas() -> [f64; 3] {
    [
        f64::from_bits(0x3fd8_b75e_728b_6454),
        f64::from_bits(0x3fe9_de71_722a_d3c4),
        f64::from_bits(0x3fc8_2a92_5d02_f044),
    ]
}

#[test]
fn f32_images_match_ffcv() {
    let input: Vec<u8> = [
        0xc2a062e4u32,
        0xc3046f97,
        0xc1c6b076,
        0x42282d98,
        0x42e33595,
        0x412f87be,
        0xc25d0f16,
        0xc29cf4c1,
        0x4295bfc9,
        0x43237a72,
        0x41da370c,
        0xc2f6aa6d,
    ]
    .iter()
    .flat_map(|&b| f32::from_bits(b).to_ne_bytes())
    .collect();
    let want: Vec<f32> = [
        0x416fd19au32,
        0x4244cb63,
        0x40e4d6f8,
        0xc26ddc9e,
        0x4298f28a,
        0xc1840b4f,
        0xc245bd2a,
        0xc25d8ba2,
        0x42d495bc,
        0x421f0e4c,
        0xc21eb949,
        0xc2ade4a7,
    ]
    .iter()
    .map(|&b| f32::from_bits(b))
    .collect();
    let mut out = vec![0u8; input.len()];
    image_mixup(&input, &mut out, ElemType::F32, &ffcv_lambdas()).unwrap();
    let got: Vec<f32> = out
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);
}

/// The per-element reference: FFCV's expression in f64, stored with `store`.
fn reference<T: Copy>(
    x: &[T],
    row: usize,
    lam: &[f64],
    load: impl Fn(T) -> f64,
    store: impl Fn(f64) -> T,
) -> Vec<T> {
    let n = lam.len();
    (0..n * row)
        .map(|k| {
            let (i, j) = (k / row, k % row);
            let l = lam[i];
            store(l * load(x[k]) + (1.0 - l) * load(x[prev(i, n) * row + j]))
        })
        .collect()
}

#[test]
fn u8_images_truncate_toward_zero() {
    let (n, row) = (9, 50);
    let input = bytes(n * row, 1);
    let lam = lambdas(5, 0, &(0..n as u64).collect::<Vec<_>>(), 0.5, false).unwrap();
    let mut out = vec![0u8; n * row];
    image_mixup(&input, &mut out, ElemType::U8, &lam).unwrap();
    let want = reference(&input, row, &lam, f64::from, |v| v.trunc() as u8);
    assert_eq!(out, want);
    // By hand: row 0 pairs with the last row, 0.25 * [10, 3] + 0.75 * [201, 0] =
    // [153.25, 0.75] -> [153, 0]; row 1 is 0.5 * [201, 0] + 0.5 * [10, 3] = [105.5, 1.5].
    let mut out = [0u8; 4];
    image_mixup(&[10, 3, 201, 0], &mut out, ElemType::U8, &[0.25, 0.5]).unwrap();
    assert_eq!(out, [153, 0, 105, 1]);
}

#[test]
fn f16_images_round_once_from_f64() {
    let (n, row) = (5, 12);
    let input: Vec<u16> = bytes(n * row * 2, 2)
        .chunks_exact(2)
        // Finite values in about [-64, 64].
        .map(|c| f16_from_f64((f64::from(c[0]) - 128.0) / 2.0 + f64::from(c[1]) / 256.0))
        .collect();
    let raw: Vec<u8> = input.iter().flat_map(|h| h.to_ne_bytes()).collect();
    let lam = lambdas(5, 1, &[3, 1, 4, 1, 5], 0.3, false).unwrap();
    let mut out = vec![0u8; raw.len()];
    image_mixup(&raw, &mut out, ElemType::F16, &lam).unwrap();
    let got: Vec<u16> = out
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, reference(&input, row, &lam, f16_to_f64, f16_from_f64));
}

#[test]
fn every_element_type_follows_the_reference() {
    let (n, row) = (4, 6);
    let lam = [0.1, 0.5, 0.9, 0.3];
    // u16, i32, i64 (negative values truncate toward zero), f64.
    let u16s: Vec<u16> = (0..n * row).map(|k| (k * 2731 % 65536) as u16).collect();
    let i32s: Vec<i32> = (0..n * row).map(|k| k as i32 * 7919 - 90_000).collect();
    let i64s: Vec<i64> = (0..n * row).map(|k| k as i64 * -1_000_003 + 5).collect();
    let f64s: Vec<f64> = (0..n * row).map(|k| k as f64 * 0.37 - 4.0).collect();
    macro_rules! check {
        ($v:expr, $t:ty, $e:expr) => {{
            let raw: Vec<u8> = $v.iter().flat_map(|x| x.to_ne_bytes()).collect();
            let mut out = vec![0u8; raw.len()];
            image_mixup(&raw, &mut out, $e, &lam).unwrap();
            let size = std::mem::size_of::<$t>();
            let got: Vec<$t> = out
                .chunks_exact(size)
                .map(|c| <$t>::from_ne_bytes(c.try_into().unwrap()))
                .collect();
            let want = reference(&$v, row, &lam, |x| x as f64, |v| v as $t);
            assert_eq!(got, want, "{:?}", $e);
            let mut inplace = raw.clone();
            image_mixup_in_place(&mut inplace, $e, &lam).unwrap();
            assert_eq!(inplace, out, "{:?} in place", $e);
        }};
    }
    check!(u16s, u16, ElemType::U16);
    check!(i32s, i32, ElemType::I32);
    check!(i64s, i64, ElemType::I64);
    check!(f64s, f64, ElemType::F64);
    // A negative result truncates toward zero, not down: 0.5 * -3 + 0.5 * 0 = -1.5 -> -1.
    let raw: Vec<u8> = [-3i32, 0].iter().flat_map(|x| x.to_ne_bytes()).collect();
    let mut out = vec![0u8; 8];
    image_mixup(&raw, &mut out, ElemType::I32, &[0.5, 0.5]).unwrap();
    assert_eq!(i32::from_ne_bytes(out[..4].try_into().unwrap()), -1);
}

#[test]
fn in_place_equals_out_of_place_serial_and_parallel() {
    // 2 KiB rows: 20 rows stay serial, 400 rows (800 KiB) run in parallel.
    for (n, threads) in [
        (1usize, 1usize),
        (2, 1),
        (20, 1),
        (400, 3),
        (401, 4),
        (3, 8),
    ] {
        let row = 2048;
        let input = bytes(n * row, n as u64);
        let lam = lambdas(9, 0, &(0..n as u64).collect::<Vec<_>>(), 0.7, false).unwrap();
        let want = reference(&input, row, &lam, f64::from, |v| v as u8);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut out = vec![0u8; input.len()];
        pool.install(|| image_mixup(&input, &mut out, ElemType::U8, &lam))
            .unwrap();
        assert_eq!(out, want, "{n} rows out of place");
        let mut batch = input.clone();
        pool.install(|| image_mixup_in_place(&mut batch, ElemType::U8, &lam))
            .unwrap();
        assert_eq!(batch, want, "{n} rows in place on {threads} threads");
    }
}

#[test]
fn a_batch_of_one_is_mixed_with_itself() {
    // lam * x + (1 - lam) * x in f64 can fall just below x, and the u8 store truncates:
    // FFCV's expression, evaluated as NumPy does, gives x - 1 there.
    let x: Vec<u8> = (0..=255).collect();
    // A lambda FFCV 1.0.2 drew (numba's generator seeded with 7), as its f64 bits.
    let lam = f64::from_bits(0x3f9e_1c5c_3556_d79d);
    let mut out = vec![0u8; 256];
    image_mixup(&x, &mut out, ElemType::U8, &[lam]).unwrap();
    let want = reference(&x, 256, &[lam], f64::from, |v| v as u8);
    assert_eq!(out, want);
    assert_eq!(
        out[53], 52,
        "53 * lam + 53 * (1 - lam) is 52.99999999999999"
    );
    assert_eq!(out[0], 0);
    let mut inplace = x.clone();
    image_mixup_in_place(&mut inplace, ElemType::U8, &[lam]).unwrap();
    assert_eq!(inplace, out);
    // lam = 1 and lam = 0 give the row itself exactly.
    for lam in [0.0, 1.0] {
        image_mixup(&x, &mut out, ElemType::U8, &[lam]).unwrap();
        assert_eq!(out, x);
    }
}

#[test]
fn label_rows_pair_each_label_with_the_previous_one() {
    let labels: Vec<u8> = [3i64, 9, 0, 5]
        .iter()
        .flat_map(|l| l.to_ne_bytes())
        .collect();
    let lam = [0.125, 0.5, 0.75, 0.1];
    let mut out = [0f32; 12];
    label_mixup(&labels, ElemType::I64, &lam, &mut out).unwrap();
    assert_eq!(
        out,
        [
            3.0,
            5.0,
            0.125,
            9.0,
            3.0,
            0.5,
            0.0,
            9.0,
            0.75,
            5.0,
            0.0,
            0.1f64 as f32
        ]
    );
    // Rows of two i32 columns: only column 0 is a label.
    let two: Vec<u8> = [7i32, -1, 2, -1]
        .iter()
        .flat_map(|l| l.to_ne_bytes())
        .collect();
    let mut out = [0f32; 6];
    label_mixup(&two, ElemType::I32, &[0.25, 0.5], &mut out).unwrap();
    assert_eq!(out, [7.0, 2.0, 0.25, 2.0, 7.0, 0.5]);
    // One label mixes with itself.
    let mut out = [0f32; 3];
    label_mixup(&[4], ElemType::U8, &[0.5], &mut out).unwrap();
    assert_eq!(out, [4.0, 4.0, 0.5]);
}

#[test]
fn one_hot_rows_put_lam_and_its_complement_at_the_two_labels() {
    let mixed = [1.0, 3.0, 0.25, 2.0, 2.0, 0.75, 0.0, 1.0, 0.1];
    let mut out = [5f32; 12];
    mixup_to_one_hot(&mixed, 4, &mut out).unwrap();
    assert_eq!(
        out,
        [
            0.0,
            0.25,
            0.0,
            0.75,
            // The same class twice: the second write, 1 - lam, is what stays.
            0.0,
            0.0,
            0.25,
            0.0,
            0.1,
            1.0 - 0.1f32,
            0.0,
            0.0,
        ]
    );
    // The input is not modified.
    assert_eq!(mixed[2], 0.25);
}

#[test]
fn bad_labels_are_errors_naming_the_row() {
    let mut out = [7f32; 6];
    for (label, shown) in [
        (-1.0, "-1"),
        (3.0, "3"),
        (1.5, "1.5"),
        (f32::NAN, "NaN"),
        (f32::INFINITY, "inf"),
    ] {
        let mixed = [0.0, 1.0, 0.5, 2.0, label, 0.5];
        let err = mixup_to_one_hot(&mixed, 3, &mut out).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("MixupToOneHot: row 1: label {shown} is not a class in 0..3")
        );
        assert_eq!(out, [7.0; 6], "nothing written on error");
    }
}

#[test]
fn sizes_that_do_not_fit_are_errors() {
    let mut out = [0u8; 10];
    // 10 bytes are not 3 equal rows.
    let err = image_mixup(&[0; 10], &mut out, ElemType::U8, &[0.5; 3]).unwrap_err();
    assert!(err.to_string().contains("not 3 equal"), "{err}");
    // Output length differs.
    assert!(image_mixup(&[0; 10], &mut out[..8], ElemType::U8, &[0.5; 2]).is_err());
    // Rows of 5 bytes are not whole f32 elements.
    assert!(image_mixup(&[0; 10], &mut out, ElemType::F32, &[0.5; 2]).is_err());
    assert!(image_mixup_in_place(&mut out, ElemType::F32, &[0.5; 2]).is_err());
    // Bytes with no lambdas, lambdas outside [0, 1].
    assert!(image_mixup(&[0; 10], &mut out, ElemType::U8, &[]).is_err());
    let err = image_mixup(&[0; 10], &mut out, ElemType::U8, &[0.5, 1.5]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ImageMixup: sample 1: lam 1.5 is not in [0, 1]"
    );
    assert!(image_mixup_in_place(&mut out, ElemType::U8, &[f64::NAN, 0.5]).is_err());
    assert_eq!(out, [0; 10], "nothing written on error");
    // An empty batch is fine.
    image_mixup(&[], &mut [], ElemType::U8, &[]).unwrap();

    let labels = [0u8; 16];
    let mut rows = [0f32; 6];
    assert!(label_mixup(&labels, ElemType::I64, &[0.5; 2], &mut rows[..5]).is_err());
    assert!(label_mixup(&labels[..12], ElemType::I64, &[0.5; 2], &mut rows).is_err());
    assert!(label_mixup(&labels, ElemType::I64, &[0.5; 2], &mut rows).is_ok());

    let mut one_hot = [0f32; 8];
    assert!(mixup_to_one_hot(&[0.0; 5], 4, &mut one_hot).is_err());
    assert!(mixup_to_one_hot(&[0.0; 6], 3, &mut one_hot).is_err());
    assert!(mixup_to_one_hot(&[0.0; 6], usize::MAX, &mut one_hot).is_err());
    assert!(mixup_to_one_hot(&[0.0; 6], 4, &mut one_hot).is_ok());
    assert!(mixup_to_one_hot(&[], 0, &mut []).is_ok());
}

#[test]
fn loader_batches_mix_each_sample_with_the_previous_row() {
    let seed = 11;
    let mut loader = Loader::builder(fixture("images_raw.beton"))
        .batch_size(8)
        .drop_last(false)
        .order(Order::Random)
        .seed(seed)
        .num_workers(2)
        .pipeline("image", PipelineSpec::new(SimpleRGBImageDecoder))
        .pipeline("label", PipelineSpec::new(IntDecoder))
        .build()
        .unwrap();
    let mut seen = 0;
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let ids = batch.sample_ids().to_vec();
        let n = ids.len();
        let lam = lambdas(seed, batch.epoch(), &ids, 0.5, false).unwrap();
        let images = batch.output("image").unwrap();
        let raw = images.bytes();
        let row = 32 * 32 * 3;
        assert_eq!(raw.len(), n * row);
        let mut mixed = vec![0u8; raw.len()];
        image_mixup(raw, &mut mixed, ElemType::U8, &lam).unwrap();
        let labels = batch.output("label").unwrap();
        let mut rows = vec![0f32; n * 3];
        label_mixup(labels.bytes(), ElemType::I64, &lam, &mut rows).unwrap();
        let index = batch.get::<i64>("index").unwrap();
        for i in 0..n {
            let p = prev(i, n);
            let (a, b) = (images.row(i), images.row(p));
            for j in 0..row {
                let want = (lam[i] * f64::from(a[j]) + (1.0 - lam[i]) * f64::from(b[j])) as u8;
                assert_eq!(mixed[i * row + j], want, "sample {} element {j}", ids[i]);
            }
            // The fixture's labels are id % 10.
            assert_eq!(index[i], ids[i] as i64);
            assert_eq!(rows[3 * i], (ids[i] % 10) as f32, "sample {}", ids[i]);
            assert_eq!(rows[3 * i + 1], (ids[p] % 10) as f32, "sample {}", ids[i]);
            assert_eq!(rows[3 * i + 2], lam[i] as f32);
        }
        let mut one_hot = vec![0f32; n * 10];
        mixup_to_one_hot(&rows, 10, &mut one_hot).unwrap();
        for (i, r) in one_hot.chunks(10).enumerate() {
            let (a, b) = ((ids[i] % 10) as usize, (ids[prev(i, n)] % 10) as usize);
            if a != b {
                assert_eq!(r[a], lam[i] as f32);
            }
            assert_eq!(r[b], 1.0 - lam[i] as f32);
        }
        seen += n;
    }
    assert_eq!(seen, 50);
}
