//! The JIT's vector code against its scalar code and the interpreter on the training chains
//! (flip, normalize to f32/f16/f64, CHW) and float arithmetic, at row widths around the
//! 16-lane group and the 64-element unroll limit: the normalize tables computed as verified
//! arithmetic (f32 and f16, bytes read straight from the input or computed first, rows
//! constant or chosen at run time), tables that fail the verification (read as tables),
//! and binary16 lanes loaded, shuffled and gathered. The test runs in its own process,
//! because `set_vector_code` is process-wide: toggling it there races with no other test.

use crate::common;

use pipeline_jit::ops::{
    Clamp, Convert, Cutout, NormalizeImage, RandomHorizontalFlip, Scale, ToChw,
};
use pipeline_jit::{ElemType, Pipeline, State};

fn chains(side_h: usize, w: usize) -> Vec<(String, Pipeline)> {
    let hwc = || State::cpu([side_h, w, 3], ElemType::U8);
    let norm = |mean: [f64; 3], std: [f64; 3], dtype| NormalizeImage {
        mean: mean.to_vec(),
        std: std.to_vec(),
        dtype,
    };
    let imagenet = ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]);
    vec![
        (
            "flip, normalize f32, chw".into(),
            Pipeline::new(hwc())
                .then(RandomHorizontalFlip(0.5))
                .then(norm(imagenet.0, imagenet.1, ElemType::F32))
                .then(ToChw),
        ),
        (
            // Means on integers: a table with a +0 entry.
            "always flip, integer means, chw".into(),
            Pipeline::new(hwc())
                .then(RandomHorizontalFlip(1.0))
                .then(norm([125.0, 0.0, 255.0], [63.0, 1.0, 0.5], ElemType::F32))
                .then(ToChw),
        ),
        (
            "normalize f64 (table gathered), chw".into(),
            Pipeline::new(hwc())
                .then(norm(imagenet.0, imagenet.1, ElemType::F64))
                .then(ToChw),
        ),
        (
            "chw, convert f32, scale (vector float arithmetic)".into(),
            Pipeline::new(hwc())
                .then(ToChw)
                .then(Convert(ElemType::F32))
                .then(Scale {
                    mul: 0.3,
                    add: -17.25,
                }),
        ),
        (
            "chw, flip (u8 shuffles only)".into(),
            Pipeline::new(hwc())
                .then(ToChw)
                .then(RandomHorizontalFlip(0.5)),
        ),
    ]
}

/// The chains of the verified table arithmetic and of binary16 lanes (checked at fewer
/// shapes: each executor costs a compilation).
fn extra_chains(side_h: usize, w: usize) -> Vec<(String, Pipeline)> {
    let hwc = || State::cpu([side_h, w, 3], ElemType::U8);
    let norm = |mean: [f64; 3], std: [f64; 3], dtype| NormalizeImage {
        mean: mean.to_vec(),
        std: std.to_vec(),
        dtype,
    };
    let imagenet = ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]);
    vec![
        (
            "flip, normalize f16, chw".into(),
            Pipeline::new(hwc())
                .then(RandomHorizontalFlip(0.5))
                .then(norm(imagenet.0, imagenet.1, ElemType::F16))
                .then(ToChw),
        ),
        (
            // A +0 entry per channel in the float16 tables.
            "always flip, integer means, f16, chw".into(),
            Pipeline::new(hwc())
                .then(RandomHorizontalFlip(1.0))
                .then(norm([125.0, 0.0, 255.0], [63.0, 1.0, 0.5], ElemType::F16))
                .then(ToChw),
        ),
        (
            // Bytes computed before the table (a clamp), not read straight from the input.
            "clamp, normalize f16, chw".into(),
            Pipeline::new(hwc())
                .then(Clamp {
                    lo: 10.0,
                    hi: 240.0,
                })
                .then(norm(imagenet.0, imagenet.1, ElemType::F16))
                .then(ToChw),
        ),
        (
            "cutout, normalize f32, chw".into(),
            Pipeline::new(hwc())
                .then(Cutout {
                    size: 1.min(side_h - 1),
                    fill: vec![7.0],
                })
                .then(norm(imagenet.0, imagenet.1, ElemType::F32))
                .then(ToChw),
        ),
        (
            // Entries beyond the type's range (infinities): no exact arithmetic form, the
            // table is read lane by lane.
            "normalize f32 to infinities (table gathered), chw".into(),
            Pipeline::new(hwc())
                .then(norm([100.5, 0.0, 3.0], [1e-37, 1e-3, 1.0], ElemType::F32))
                .then(ToChw),
        ),
        (
            "normalize f16 to infinities and subnormals (table gathered), chw".into(),
            Pipeline::new(hwc())
                .then(norm(
                    [100.00001, 0.0, 3.0],
                    [50.0, 1e-3, 1.0],
                    ElemType::F16,
                ))
                .then(ToChw),
        ),
        (
            // Five channels: the channel axis is a loop, so the table row (and its
            // coefficients) is chosen at run time.
            "five channels, normalize f16, chw".into(),
            Pipeline::new(State::cpu([side_h, w, 5], ElemType::U8))
                .then(NormalizeImage {
                    mean: vec![10.5, 20.25, 128.0, 200.7, 99.9],
                    std: vec![3.0, 60.0, 64.0, 10.1, 0.7],
                    dtype: ElemType::F16,
                })
                .then(ToChw),
        ),
        (
            "five channels, normalize f32, chw".into(),
            Pipeline::new(State::cpu([side_h, w, 5], ElemType::U8))
                .then(NormalizeImage {
                    mean: vec![10.5, 20.25, 128.0, 200.7, 99.9],
                    std: vec![3.0, 60.0, 64.0, 10.1, 0.7],
                    dtype: ElemType::F32,
                })
                .then(ToChw),
        ),
        (
            // Binary16 lanes: loaded and shuffled (CHW, flip), arithmetic gathered.
            "f16 input, chw, flip, scale".into(),
            Pipeline::new(State::cpu([side_h, w, 3], ElemType::F16))
                .then(ToChw)
                .then(RandomHorizontalFlip(0.5))
                .then(Scale { mul: 0.5, add: 1.0 }),
        ),
    ]
}

fn run(p: &Pipeline, compile: bool, vector: bool, ids: &[u64], input: &[u8]) -> Vec<u8> {
    pipeline_jit::set_vector_code(vector);
    let ex = common::executor(p, compile, 2);
    pipeline_jit::set_vector_code(true);
    common::run_with(&ex, ids, input, 7, 1)
}

#[test]
fn vector_code_equals_scalar_code_and_interpreter_at_every_width() {
    ffcv_testkit::own_process(
        module_path!(),
        "vector_code_equals_scalar_code_and_interpreter_at_every_width",
        || {
            assert!(pipeline_jit::vector_code(), "vector code is the default");
            let ids: Vec<u64> = (0..6).collect();
            for w in [15, 16, 17, 31, 32, 37, 64, 65, 100, 224] {
                for h in [1, 5] {
                    let mut all = chains(h, w);
                    if h == 5 && [17, 32, 37, 224].contains(&w) {
                        all.extend(extra_chains(h, w));
                    }
                    for (name, p) in all {
                        let input = common::bytes(ids.len() * p.input().bytes().unwrap(), w as u64);
                        let reference = run(&p, false, true, &ids, &input);
                        assert_eq!(
                            run(&p, true, true, &ids, &input),
                            reference,
                            "vector JIT, {name}, {h}x{w}"
                        );
                        assert_eq!(
                            run(&p, true, false, &ids, &input),
                            reference,
                            "scalar JIT, {name}, {h}x{w}"
                        );
                    }
                }
            }
        },
    );
}
