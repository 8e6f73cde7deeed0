//! The native side of `ffcv_rs.Loader([...], weights=[...])`: a weighted mixture of
//! datasets (`ffcv::Loader::builder_mixture`, `docs/mixtures.md`) as the loader's
//! dataset and order.

use std::sync::Arc;

use ffcv::{Loader, LoaderBuilder, Mixture, MixtureSpec, Order, WhenExhausted};
use pyo3::prelude::*;

/// `mixture=(sources, weights, samples_per_epoch, when_exhausted)` of `_native.Loader`:
/// each source a list of names (a file, or a shard set), one weight per source, the
/// positions per epoch (`None`: the sum of the sources' lengths) and `"cycle"` or
/// `"stop"`.
#[derive(Debug, Clone, FromPyObject)]
pub struct MixtureArgs(
    pub Vec<Vec<String>>,
    pub Vec<f64>,
    pub Option<u64>,
    pub String,
);

impl MixtureArgs {
    /// The mixture's spec with the loader's order kind, seed (the state's when resuming
    /// without one) and distributed rank.
    pub fn spec(
        &self,
        order: &Order,
        seed: Option<u64>,
        resume: Option<&str>,
        (distributed, rank, world_size): (bool, usize, usize),
    ) -> ffcv::Result<MixtureSpec> {
        let when: WhenExhausted = self.3.parse().map_err(|reason| ffcv::Error::Config {
            path: self
                .0
                .first()
                .and_then(|s| s.first())
                .map(Into::into)
                .unwrap_or_default(),
            reason: format!("mixture: when_exhausted {reason}"),
            cause: None,
        })?;
        let sources: Vec<ffcv::MixtureSource> =
            self.0.iter().cloned().map(ffcv::MixtureSource).collect();
        let mut spec = Loader::builder_mixture(sources, &self.1)
            .order(order.clone())
            .when_exhausted(when);
        let seed = match (seed, resume) {
            (Some(s), _) => Some(s),
            (None, Some(text)) => Some(ffcv::LoaderState::from_json(text)?.seed()),
            (None, None) => None,
        };
        if let Some(s) = seed {
            spec = spec.seed(s);
        }
        if let Some(n) = self.2 {
            spec = spec.samples_per_epoch(n);
        }
        if distributed {
            spec = spec.distributed(rank, world_size);
        }
        Ok(spec)
    }
}

/// The mixture's order and seed on `b`, in one process (the mixture splits the ranks).
pub fn apply(mixture: &Mixture, b: LoaderBuilder) -> LoaderBuilder {
    let order: Arc<dyn ffcv::traversal::TraversalOrder> = mixture.order().clone();
    b.order(Order::Custom(order))
        .distributed(false)
        .rank(0)
        .world_size(1)
        .seed(mixture.seed())
}
