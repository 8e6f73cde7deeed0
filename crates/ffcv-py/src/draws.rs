//! `_native.colour_factors`: the random draws of the colour operations, as the loader
//! makes them, so that a test (or a user checking a resumed run) can recompute an output
//! with FFCV's own code given the same draws.

use ffcv::jit::rng::sample_seed;
use ffcv::transforms::colour::colour_draw;
use pyo3::prelude::*;

/// The factor a colour operation (`RandomBrightness`, `RandomContrast`,
/// `RandomSaturation` with `p` and `magnitude`) draws for each of `sample_ids` in
/// `epoch` under the loader's `seed`, at operation position `op_index` of its pipeline:
/// `None` where it leaves the sample alone. Positions count from 0 at the pipeline's
/// first operation: in a loader's pipeline the decoder is 0 and the first transform 1; in
/// a `BatchTransforms` run the first transform is 0. (The seed is a view's own seed for
/// an output made by `custom_field_mapper`, `ffcv::view_seed`.)
#[pyfunction]
pub fn colour_factors(
    p: f64,
    magnitude: f64,
    seed: u64,
    epoch: u64,
    sample_ids: Vec<u64>,
    op_index: usize,
) -> Vec<Option<f64>> {
    sample_ids
        .iter()
        .map(|&id| colour_draw(p, magnitude, sample_seed(seed, epoch, id, op_index)))
        .collect()
}
