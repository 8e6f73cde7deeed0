//! `Sequential`: the indices as given (FFCV's `OrderOption.SEQUENTIAL`).

use crate::TraversalOrder;
use crate::distributed::Distributed;

/// The indices in the order given, every epoch.
///
/// Distributed, it is FFCV's distributed Sequential: `DistributedSampler(shuffle=False)`
/// positions mapped through the indices, so rank `r` of `W` gets
/// `indices[r], indices[r + W], …`, with the list padded from its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequential {
    indices: Vec<u64>,
    distributed: Option<Distributed>,
}

impl Sequential {
    /// Over the given sample indices.
    pub fn new(indices: Vec<u64>) -> Sequential {
        Sequential {
            indices,
            distributed: None,
        }
    }

    /// Over all samples `0..num_samples`.
    pub fn all(num_samples: u64) -> Sequential {
        Sequential::new((0..num_samples).collect())
    }

    /// This rank's share only, as FFCV's distributed mode.
    pub fn with_distributed(mut self, distributed: Distributed) -> Sequential {
        self.distributed = Some(distributed);
        self
    }

    /// The indices traversed.
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }
}

impl TraversalOrder for Sequential {
    fn order(&self, _epoch: u64) -> Vec<u64> {
        match &self.distributed {
            None => self.indices.clone(),
            Some(distributed) => distributed.select(&self.indices),
        }
    }

    fn samples_per_epoch(&self) -> usize {
        match &self.distributed {
            None => self.indices.len(),
            Some(distributed) => distributed.samples_per_rank(self.indices.len()),
        }
    }
}
