//! Invalid pipelines and buffers are rejected at build (or run) time with an error naming
//! the operation, never a panic.

use crate::common;

use pipeline_jit::ops::{Cutout, NormalizeImage, RandomHorizontalFlip, Scale, ToChw};
use pipeline_jit::{
    BatchBuffers, BinOp, Device, ElemType, Error, Expr, ExprKernel, Index, Lowered, Operation,
    Pipeline, RandSpec, State,
};

fn u8s(shape: &[usize]) -> State {
    State::cpu(shape.to_vec(), ElemType::U8)
}

fn plan_error(p: &Pipeline) -> (usize, String, String) {
    match p.plan() {
        Err(Error::InvalidOperation { index, op, reason }) => (index, op, reason.to_string()),
        other => panic!("expected InvalidOperation, got {other:?}"),
    }
}

/// A user IR operation returning a fixed kernel.
struct Fixed(ExprKernel);
impl Operation for Fixed {
    fn name(&self) -> String {
        "Fixed".into()
    }
    fn lower(&self, _: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        Ok(Lowered::Expr(self.0.clone()))
    }
}

#[test]
fn channel_count_mismatch_names_the_normalize() {
    let p = Pipeline::new(u8s(&[4, 4, 3]))
        .then(RandomHorizontalFlip(0.5))
        .then(NormalizeImage {
            mean: vec![0.0; 2],
            std: vec![1.0; 2],
            dtype: ElemType::F32,
        });
    let (index, op, reason) = plan_error(&p);
    assert_eq!((index, op.as_str()), (1, "NormalizeImage"));
    assert!(reason.contains("3 channels"), "{reason}");
}

#[test]
fn rank_mismatch_names_the_operation() {
    let (index, op, _) = plan_error(&Pipeline::new(u8s(&[16, 3])).then(ToChw));
    assert_eq!((index, op.as_str()), (0, "ToChw"));
}

#[test]
fn dtype_mismatch_is_rejected() {
    let (index, op, reason) =
        plan_error(&Pipeline::new(u8s(&[4])).then(Scale { mul: 1.0, add: 0.0 }));
    assert_eq!((index, op.as_str()), (0, "Scale"));
    assert!(reason.contains("U8"), "{reason}");
    let mixed = ExprKernel {
        output: u8s(&[4]),
        expr: Expr::input_identity(1).bin(BinOp::Add, Expr::constant(ElemType::F32, 1.0)),
        random: vec![],
    };
    let (_, _, reason) = plan_error(&Pipeline::new(u8s(&[4])).then(Fixed(mixed)));
    assert!(reason.contains("Add of U8 and F32"), "{reason}");
}

#[test]
fn malformed_ir_is_rejected() {
    let cases = [
        (Expr::Input(vec![Index::Coord(0)]), "coordinates"),
        (
            Expr::Input(vec![Index::Coord(2), Index::Coord(0)]),
            "Coord(2)",
        ),
        (
            Expr::Input(vec![Index::Rand(0), Index::Coord(0)]),
            "Rand(0)",
        ),
        (
            Expr::input_identity(2).bin(BinOp::Div, Expr::constant(ElemType::U8, 2.0)),
            "Div of integers",
        ),
        (
            Expr::Table(ElemType::U8, Vec::new().into(), Box::new(Index::Const(0))),
            "empty table",
        ),
    ];
    for (expr, needle) in cases {
        let k = ExprKernel {
            output: u8s(&[2, 2]),
            expr,
            random: vec![],
        };
        let (_, _, reason) = plan_error(&Pipeline::new(u8s(&[2, 2])).then(Fixed(k)));
        assert!(reason.contains(needle), "{reason} lacks {needle}");
    }
    let bad_p = ExprKernel {
        output: u8s(&[2]),
        expr: Expr::input_identity(1),
        random: vec![RandSpec::Bernoulli(1.5)],
    };
    let (_, _, reason) = plan_error(&Pipeline::new(u8s(&[2])).then(Fixed(bad_p)));
    assert!(reason.contains("1.5"), "{reason}");
}

#[test]
fn loads_from_an_empty_input_are_rejected() {
    let (_, op, reason) =
        plan_error(&Pipeline::new(u8s(&[0, 2, 3])).then(RandomHorizontalFlip(0.5)));
    assert_eq!(op, "RandomHorizontalFlip");
    assert!(reason.contains("empty input"), "{reason}");
}

#[test]
fn cutout_as_large_as_the_image_is_rejected_like_ffcv() {
    let (_, op, reason) = plan_error(&Pipeline::new(u8s(&[4, 8, 3])).then(Cutout {
        size: 4,
        fill: vec![0.0],
    }));
    assert_eq!(op, "Cutout");
    assert!(reason.contains("does not fit"), "{reason}");
}

#[test]
fn device_outputs_are_not_cpu_operations() {
    let k = ExprKernel {
        output: State {
            device: Device::Cuda(0),
            ..u8s(&[2])
        },
        expr: Expr::input_identity(1),
        random: vec![],
    };
    let (_, _, reason) = plan_error(&Pipeline::new(u8s(&[2])).then(Fixed(k)));
    assert!(reason.contains("Cuda(0)"), "{reason}");
}

#[test]
fn empty_pipeline_and_oversized_states_are_errors() {
    assert!(matches!(
        Pipeline::new(u8s(&[2])).plan(),
        Err(Error::EmptyPipeline)
    ));
    let huge = Pipeline::new(u8s(&[usize::MAX, 4])).then(ToChw);
    assert!(
        matches!(huge.plan(), Err(Error::TooLarge { .. })),
        "{:?}",
        huge.plan()
    );
}

#[test]
fn wrong_batch_buffers_are_errors_in_both_engines() {
    let p = Pipeline::new(u8s(&[2, 2, 3])).then(ToChw);
    for compile in [true, false] {
        let ex = common::executor(&p, compile, 2);
        let mut out = vec![0u8; 24];
        let r = ex.run(BatchBuffers {
            sample_ids: &[0, 1],
            input: &[0; 23],
            output: &mut out,
            seed: 0,
            epoch: 0,
        });
        assert!(
            matches!(
                r,
                Err(Error::Buffer {
                    buffer: "input",
                    ..
                })
            ),
            "{r:?}"
        );
        let r = ex.run(BatchBuffers {
            sample_ids: &[0, 1],
            input: &[0; 24],
            output: &mut out[..12],
            seed: 0,
            epoch: 0,
        });
        assert!(
            matches!(
                r,
                Err(Error::Buffer {
                    buffer: "output",
                    ..
                })
            ),
            "{r:?}"
        );
    }
}
