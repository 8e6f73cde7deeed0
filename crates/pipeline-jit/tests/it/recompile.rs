//! `recompile` mode: re-declaring the pipeline with new parameters (or shapes) regenerates
//! code in a fresh module whose output follows the new parameters, and the old module's
//! memory is returned: 1,000 recompiles do not grow the process.

use crate::common;

use pipeline_jit::ops::{Convert, Cutout, NormalizeImage, RandomHorizontalFlip, Scale, ToChw};
use pipeline_jit::{ElemType, Executor, Pipeline, State};

fn scaled(mul: f64) -> Pipeline {
    Pipeline::new(State::cpu([2, 2, 1], ElemType::U8))
        .then(Convert(ElemType::F32))
        .then(Scale { mul, add: 1.0 })
}

#[test]
fn rebuilding_with_new_parameters_changes_the_output() {
    for compile in [true, false] {
        let mut ex = common::executor(&scaled(1.0), compile, 1);
        let input = [1, 2, 3, 4];
        assert_eq!(
            common::f32s(&common::run_with(&ex, &[0], &input, 0, 0)),
            vec![2.0, 3.0, 4.0, 5.0]
        );
        ex.rebuild(&scaled(3.0)).unwrap();
        assert_eq!(
            common::f32s(&common::run_with(&ex, &[0], &input, 0, 1)),
            vec![4.0, 7.0, 10.0, 13.0]
        );
        assert_eq!(ex.is_compiled(), compile);
    }
}

#[test]
fn rebuilding_may_change_the_output_shape() {
    // Progressive resizing in miniature: the epoch's pipeline decides the output layout.
    let hwc = Pipeline::new(State::cpu([1, 2, 3], ElemType::U8)).then(Convert(ElemType::U8));
    let chw = Pipeline::new(State::cpu([1, 2, 3], ElemType::U8)).then(ToChw);
    let mut ex = common::executor(&hwc, true, 1);
    let input = [0, 1, 2, 3, 4, 5];
    assert_eq!(common::run_with(&ex, &[0], &input, 0, 0), input.to_vec());
    ex.rebuild(&chw).unwrap();
    assert_eq!(ex.plan().output().shape, vec![3, 1, 2]);
    assert_eq!(
        common::run_with(&ex, &[0], &input, 0, 1),
        vec![0, 3, 1, 4, 2, 5]
    );
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS value");
    kb * 1024
}

#[test]
fn a_thousand_recompiles_do_not_grow_memory() {
    ffcv_testkit::own_process(
        module_path!(),
        "a_thousand_recompiles_do_not_grow_memory",
        || {
            let pipeline = |epoch: u64| {
                Pipeline::new(State::cpu([4, 4, 3], ElemType::U8))
                    .then(RandomHorizontalFlip(0.5))
                    .then(Cutout {
                        size: 1 + (epoch % 3) as usize,
                        fill: vec![0.0],
                    })
                    .then(NormalizeImage {
                        mean: vec![epoch as f64; 3],
                        std: vec![2.0; 3],
                        dtype: ElemType::F32,
                    })
                    .then(ToChw)
            };
            let mut ex = common::executor(&pipeline(0), true, 1);
            let input = common::bytes(4 * 48, 1);
            let ids = [0, 1, 2, 3];
            let step = |ex: &mut Executor, epoch: u64| {
                ex.rebuild(&pipeline(epoch)).unwrap();
                common::run_with(ex, &ids, &input, 9, epoch)
            };
            // Warm up allocators and caches before the baseline.
            for epoch in 0..100 {
                step(&mut ex, epoch);
            }
            let before = rss_bytes();
            for epoch in 100..1100 {
                step(&mut ex, epoch);
            }
            let growth = rss_bytes().saturating_sub(before);
            eprintln!("RSS growth over 1,000 recompiles: {growth} bytes");
            // A leaked module costs at least its code pages (several KiB), so 1,000 leaks would show
            // as megabytes; allow 2 MiB of allocator noise.
            assert!(
                growth < 2 << 20,
                "RSS grew by {growth} bytes over 1,000 recompiles"
            );
        },
    );
}
