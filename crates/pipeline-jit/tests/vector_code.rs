//! The JIT's vector code against its scalar code and the interpreter on the training chains
//! (flip, normalize to f32/f64, CHW) and float arithmetic, at row widths around the 16-lane
//! group and the 64-element unroll limit. One test in this binary, because
//! `set_vector_code` is process-wide: toggling it here races with no other test.

mod common;

use pipeline_jit::ops::{Convert, NormalizeImage, RandomHorizontalFlip, Scale, ToChw};
use pipeline_jit::{ElemType, Executor, Options, Pipeline, State};

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

fn run(p: &Pipeline, compile: bool, vector: bool, ids: &[u64], input: &[u8]) -> Vec<u8> {
    pipeline_jit::set_vector_code(vector);
    let ex = Executor::new(
        p,
        &Options {
            num_workers: 2,
            compile,
        },
    )
    .expect("executor");
    pipeline_jit::set_vector_code(true);
    common::run_with(&ex, ids, input, 7, 1)
}

#[test]
fn vector_code_equals_scalar_code_and_interpreter_at_every_width() {
    assert!(pipeline_jit::vector_code(), "vector code is the default");
    let ids: Vec<u64> = (0..6).collect();
    for w in [15, 16, 17, 31, 32, 37, 64, 65, 100, 224] {
        for h in [1, 5] {
            for (name, p) in chains(h, w) {
                let input = common::bytes(ids.len() * h * w * 3, w as u64);
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
}
