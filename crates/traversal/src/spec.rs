//! Choosing an order by name: the `OrderKind` a command line or a loader builder takes,
//! and `OrderSpec`, which builds any built-in order from one set of knobs.

use std::fmt;
use std::str::FromStr;

use crate::TraversalOrder;
use crate::distributed::Distributed;
use crate::error::{Error, Result};
use crate::quasi_random::QuasiRandom;
use crate::random::Random;
use crate::sample_pages::SamplePages;
use crate::sequential::Sequential;

/// The built-in orders, named as on the command line: `sequential`, `random`,
/// `quasi-random`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderKind {
    /// [`Sequential`] (FFCV `OrderOption.SEQUENTIAL`).
    Sequential,
    /// [`Random`] (FFCV `OrderOption.RANDOM`).
    Random,
    /// [`QuasiRandom`] (FFCV `OrderOption.QUASI_RANDOM`).
    QuasiRandom,
}

impl OrderKind {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            OrderKind::Sequential => "sequential",
            OrderKind::Random => "random",
            OrderKind::QuasiRandom => "quasi-random",
        }
    }
}

impl fmt::Display for OrderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An order name that is none of the built-in ones.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown order {0:?}: expected sequential, random or quasi-random")]
pub struct UnknownOrderKind(pub String);

impl FromStr for OrderKind {
    type Err = UnknownOrderKind;

    /// Accepts the command-line names and FFCV's option names, in any case.
    fn from_str(text: &str) -> std::result::Result<OrderKind, UnknownOrderKind> {
        match text.to_ascii_lowercase().replace('_', "-").as_str() {
            "sequential" => Ok(OrderKind::Sequential),
            "random" => Ok(OrderKind::Random),
            "quasi-random" | "quasirandom" => Ok(OrderKind::QuasiRandom),
            _ => Err(UnknownOrderKind(text.to_owned())),
        }
    }
}

/// The knobs of the built-in orders, in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderSpec {
    /// Which order.
    pub kind: OrderKind,
    /// Random and QuasiRandom use `seed` and the epoch; Sequential ignores it.
    pub seed: u64,
    /// Only this rank's share, when set.
    pub distributed: Option<Distributed>,
    /// QuasiRandom's buffer in pages (FFCV: `2 * batch_size`, see
    /// [`crate::default_buffer_pages`]).
    pub buffer_pages: usize,
}

impl OrderSpec {
    /// A spec with FFCV's defaults for `batch_size`: seed 0, one process, a
    /// QuasiRandom buffer of `2 * batch_size` pages.
    pub fn new(kind: OrderKind, batch_size: usize) -> OrderSpec {
        OrderSpec {
            kind,
            seed: 0,
            distributed: None,
            buffer_pages: crate::default_buffer_pages(batch_size),
        }
    }

    /// Build the order over `indices`. QuasiRandom needs the page map and fails
    /// without it, or as [`QuasiRandom::new`] fails.
    pub fn build(
        &self,
        indices: Vec<u64>,
        pages: Option<&SamplePages>,
    ) -> Result<Box<dyn TraversalOrder>> {
        Ok(match self.kind {
            OrderKind::Sequential => {
                let order = Sequential::new(indices);
                match self.distributed {
                    Some(d) => Box::new(order.with_distributed(d)),
                    None => Box::new(order),
                }
            }
            OrderKind::Random => {
                let order = Random::new(indices, self.seed);
                match self.distributed {
                    Some(d) => Box::new(order.with_distributed(d)),
                    None => Box::new(order),
                }
            }
            OrderKind::QuasiRandom => {
                let pages = pages.ok_or(Error::MissingPageMap)?;
                let order = QuasiRandom::new(&indices, pages, self.seed, self.buffer_pages)?;
                match self.distributed {
                    Some(d) => Box::new(order.with_distributed(d)),
                    None => Box::new(order),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_command_line_and_ffcv_names() {
        assert_eq!("sequential".parse(), Ok(OrderKind::Sequential));
        assert_eq!("RANDOM".parse(), Ok(OrderKind::Random));
        assert_eq!("quasi-random".parse(), Ok(OrderKind::QuasiRandom));
        assert_eq!("QUASI_RANDOM".parse(), Ok(OrderKind::QuasiRandom));
        assert_eq!(
            "shuffled".parse::<OrderKind>(),
            Err(UnknownOrderKind("shuffled".into()))
        );
        for kind in [
            OrderKind::Sequential,
            OrderKind::Random,
            OrderKind::QuasiRandom,
        ] {
            assert_eq!(kind.to_string().parse(), Ok(kind));
        }
    }

    #[test]
    fn quasi_random_without_a_page_map_is_refused() {
        let spec = OrderSpec::new(OrderKind::QuasiRandom, 8);
        assert_eq!(
            spec.build(vec![0, 1], None).err(),
            Some(Error::MissingPageMap)
        );
    }
}
