//! Elastic resume of a custom order that deals its ranks strided
//! ([`TraversalOrder::strided_world`], as a weighted mixture does): the epoch's global
//! order is the order's own ([`TraversalOrder::strided_order`]), and every stint splits
//! what is left of it the strided way, as Sequential and Random do in `traversal`'s
//! elastic model ([`Pool`] without pages). The first stint's split is then the order's
//! ordinary rank split, so continuing it gives the batches the saving run would have.

use traversal::{Pool, TraversalOrder};

use super::stint::{EpochStart, StintRecord, batches_of};

/// Where `epoch` resumes for rank `rank` of `world_size` after the `records`
/// stints (at least one), with `(batch size, drop_last)`. The error is the reason a
/// state does not fit.
pub(super) fn plan(
    order: &dyn TraversalOrder,
    epoch: u64,
    records: &[StintRecord],
    (world_size, rank): (usize, usize),
    (batch_size, drop_last): (usize, bool),
) -> Result<EpochStart, String> {
    let global = order.strided_order(epoch).ok_or_else(|| {
        "the custom order names a rank split but gives no global order".to_owned()
    })?;
    let samples = |batches: u64| {
        usize::try_from(batches)
            .unwrap_or(usize::MAX)
            .saturating_mul(batch_size)
    };
    let traversal = |e: traversal::Error| e.to_string();
    let Some((last, earlier)) = records.split_last() else {
        return Err("the state has no stint to resume".to_owned());
    };
    // The pool each stint split, up to the last one's.
    let mut pool = Pool::new(global, false);
    for (i, s) in records.iter().enumerate() {
        let per_rank = pool
            .samples_per_rank(s.world_size, None)
            .map_err(traversal)?;
        let total = batches_of(per_rank, batch_size, drop_last);
        if s.batches > u64::try_from(total).unwrap_or(u64::MAX) {
            return Err(format!(
                "the state says each rank consumed {} batches in stint {i} of epoch {epoch}, \
                 which had only {total}",
                s.batches
            ));
        }
        if i + 1 < records.len() {
            pool = pool
                .after(s.world_size, samples(s.batches), None)
                .map_err(traversal)?;
        }
    }
    let (pool, skip, earlier) = if last.world_size == world_size {
        // Continue the last stint: its split, after the batches it consumed.
        (
            pool,
            usize::try_from(last.batches).unwrap_or(usize::MAX),
            earlier.to_vec(),
        )
    } else {
        // A new stint over what no rank consumed.
        let left = pool
            .after(last.world_size, samples(last.batches), None)
            .map_err(traversal)?;
        (left, 0, records.to_vec())
    };
    let share = pool.share(world_size, rank, None).map_err(traversal)?;
    tracing::debug!(
        epoch,
        stints = earlier.len() + 1,
        world_size,
        rank,
        samples = share.order.len(),
        skip,
        "resuming a strided custom order's epoch"
    );
    Ok(EpochStart {
        order: Some(share.order),
        skip,
        earlier,
    })
}
