//! The loader's order knob, [`Order`]: FFCV's three `OrderOption`s and a user's own
//! [`TraversalOrder`]; the builder turns it into traversal's order for each epoch.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use traversal::{OrderKind, TraversalOrder};

/// The sample order of each epoch.
#[derive(Clone)]
pub enum Order {
    /// The indices in order (FFCV `OrderOption.SEQUENTIAL`).
    Sequential,
    /// NumPy's `default_rng(seed + epoch).permutation(indices)` (FFCV `RANDOM`).
    Random,
    /// Page-aware shuffle (FFCV `QUASI_RANDOM`); works with both caches and distributed.
    QuasiRandom,
    /// A user order; it decides the samples itself (`indices` and `distributed` do not
    /// apply to it).
    Custom(Arc<dyn TraversalOrder>),
}

impl std::fmt::Debug for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Order::Sequential => f.write_str("Sequential"),
            Order::Random => f.write_str("Random"),
            Order::QuasiRandom => f.write_str("QuasiRandom"),
            Order::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Order {
    /// Whether the built-in order's samples depend on the seed (Random and QuasiRandom
    /// shuffle with it; Sequential does not; a custom order was built with its own).
    pub fn depends_on_seed(&self) -> bool {
        matches!(self, Order::Random | Order::QuasiRandom)
    }

    /// The built-in order's kind; `None` for a custom order.
    pub(crate) fn kind(&self) -> Option<OrderKind> {
        match self {
            Order::Sequential => Some(OrderKind::Sequential),
            Order::Random => Some(OrderKind::Random),
            Order::QuasiRandom => Some(OrderKind::QuasiRandom),
            Order::Custom(_) => None,
        }
    }
}

impl From<OrderKind> for Order {
    fn from(kind: OrderKind) -> Order {
        match kind {
            OrderKind::Sequential => Order::Sequential,
            OrderKind::Random => Order::Random,
            OrderKind::QuasiRandom => Order::QuasiRandom,
        }
    }
}

/// A seed drawn from the standard library's per-process random keys (32 bits, so that it
/// is also a valid NumPy/PyTorch seed when reproduced there).
pub(crate) fn draw_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish() & 0xFFFF_FFFF
}
