//! Closure kernels (`NativeKernel::from_fn`): safe code per sample, identical compiled and
//! interpreted; an `Err` or a panic in the closure ends the run with
//! `Error::KernelFailed` carrying the message and naming the sample, and the process (and
//! the executor) keep working.

use crate::common;

use pipeline_jit::{
    BatchBuffers, ElemType, Error, Executor, KernelCall, Lowered, NativeKernel, Operation,
    Pipeline, State,
};

/// `out[k] = 2 * in[k]` over 4 bytes; sample 13 panics, sample 14 returns an error.
struct Double;

fn double(call: KernelCall<'_>) -> Result<(), String> {
    match call.sample {
        13 => panic!("sample {} is cursed", call.sample),
        14 => return Err("sample 14 is refused".into()),
        _ => {}
    }
    for (o, &i) in call.output.iter_mut().zip(call.input) {
        *o = i.wrapping_mul(2);
    }
    Ok(())
}

impl Operation for Double {
    fn name(&self) -> String {
        "Double".into()
    }
    fn lower(&self, input: &State) -> Result<Lowered, pipeline_jit::ExtensionError> {
        Ok(Lowered::Native(NativeKernel::from_fn(
            input.clone(),
            double,
        )))
    }
}

fn executor(compile: bool) -> Executor {
    let p = Pipeline::new(State::cpu([4], ElemType::U8)).then(Double);
    common::executor(&p, compile, 2)
}

fn run(ex: &Executor, ids: &[u64]) -> Result<Vec<u8>, Error> {
    let input: Vec<u8> = (0..ids.len() * 4).map(|k| k as u8).collect();
    let mut out = vec![0u8; ids.len() * 4];
    ex.run(BatchBuffers {
        sample_ids: ids,
        input: &input,
        output: &mut out,
        seed: 0,
        epoch: 0,
    })?;
    Ok(out)
}

#[test]
fn closure_kernels_run_compiled_and_interpreted() {
    for compile in [true, false] {
        let out = run(&executor(compile), &[0, 1, 2]).unwrap();
        let want: Vec<u8> = (0..12u8).map(|k| k * 2).collect();
        assert_eq!(out, want, "compile={compile}");
    }
}

#[test]
fn a_panic_or_an_error_in_a_closure_kernel_is_an_error_with_its_message() {
    for compile in [true, false] {
        let ex = executor(compile);
        for (ids, bad, needle) in [
            (&[1u64, 2, 13, 3][..], 13, "panicked: sample 13 is cursed"),
            (&[14, 1][..], 14, "sample 14 is refused"),
        ] {
            match run(&ex, ids) {
                Err(Error::KernelFailed {
                    index,
                    op,
                    sample,
                    message,
                }) => {
                    assert_eq!((index, op.as_str(), sample), (0, "Double", bad));
                    assert_eq!(message, needle, "compile={compile}");
                }
                other => panic!("compile={compile}: {other:?}"),
            }
        }
        // The executor is still usable after the panic.
        assert_eq!(run(&ex, &[5]).unwrap(), vec![0, 2, 4, 6]);
    }
}
