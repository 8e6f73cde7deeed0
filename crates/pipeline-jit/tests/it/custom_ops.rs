//! Custom operations: a user's native kernel (a decoder reading through its context) and a
//! user's IR operation work, identically, compiled and interpreted; kernel failures name
//! the operation and the sample.

use crate::common;

use std::sync::Arc;

use pipeline_jit::{
    BatchBuffers, BinOp, ElemType, Error, Expr, ExprKernel, KernelArgs, Lowered, NativeKernel,
    Operation, Pipeline, State,
};

/// A "decoder": sample `i` is `store[i]` (4 bytes), fetched through the context.
struct Decode {
    store: Arc<Vec<[u8; 4]>>,
}

unsafe extern "C" fn decode(args: *const KernelArgs) -> i32 {
    // SAFETY: pipeline-jit calls kernels with valid arguments for the call's duration.
    let a = unsafe { &*args };
    // SAFETY: the context was registered as `Vec<[u8; 4]>` in `Decode::lower`.
    let store: &Vec<[u8; 4]> = unsafe { a.context() };
    let Some(bytes) = store.get(a.sample as usize) else {
        return 7;
    };
    // A kernel may use its scratch space; check it is there and writable.
    // SAFETY: scratch and output are distinct buffers owned by this call.
    let (scratch, out) = unsafe { (a.scratch(), a.output()) };
    if scratch.len() != 16 || !(scratch.as_ptr() as usize).is_multiple_of(16) {
        return 8;
    }
    scratch[..4].copy_from_slice(bytes);
    out.copy_from_slice(&scratch[..4]);
    0
}

impl Operation for Decode {
    fn name(&self) -> String {
        "Decode".into()
    }
    fn lower(&self, _input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        let out = State::cpu([2, 2], ElemType::U8);
        Ok(Lowered::Native(
            NativeKernel::new(out, decode, self.store.clone()).with_scratch(16),
        ))
    }
}

/// A user IR op: `255 - x` as u8, then transposed (`out[i][j] = 255 - in[j][i]`).
struct InvertTranspose;

impl Operation for InvertTranspose {
    fn name(&self) -> String {
        "InvertTranspose".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        use pipeline_jit::Index;
        let x = Expr::Input(vec![Index::Coord(1), Index::Coord(0)]);
        Ok(Lowered::Expr(ExprKernel {
            output: input.clone(),
            expr: Expr::constant(ElemType::U8, 255.0).bin(BinOp::Sub, x),
            random: vec![],
        }))
    }
}

fn pipeline(store: Vec<[u8; 4]>) -> Pipeline {
    Pipeline::new(State::cpu([0], ElemType::U8))
        .then(Decode {
            store: Arc::new(store),
        })
        .then(InvertTranspose)
}

#[test]
fn user_kernel_and_user_ir_op_work_in_both_modes() {
    let store = vec![[1, 2, 3, 4], [10, 20, 30, 40], [0, 255, 128, 7]];
    let p = pipeline(store);
    for compile in [true, false] {
        let out = common::run(&p, compile, 2, &[2, 0, 1], &[], 0, 0);
        assert_eq!(
            out,
            vec![255, 127, 0, 248, 254, 252, 253, 251, 245, 225, 235, 215],
            "compile={compile}"
        );
    }
}

#[test]
fn kernel_failure_names_operation_and_sample() {
    let p = pipeline(vec![[0; 4]; 5]);
    for compile in [true, false] {
        let ex = common::executor(&p, compile, 2);
        let mut out = vec![0u8; 4 * 4];
        let r = ex.run(BatchBuffers {
            sample_ids: &[1, 2, 13, 3],
            input: &[],
            output: &mut out,
            seed: 0,
            epoch: 0,
        });
        match r {
            Err(Error::Kernel {
                index,
                op,
                sample,
                code,
            }) => {
                assert_eq!(
                    (index, op.as_str(), sample, code),
                    (0, "Decode", 13, 7),
                    "compile={compile}"
                );
            }
            other => panic!("compile={compile}: expected a kernel error, got {other:?}"),
        }
    }
}
