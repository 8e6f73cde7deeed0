//! How well an order mixes the data, and what it costs a page cache: the measures a
//! user needs to pick QuasiRandom's buffer size.

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::sample_pages::SamplePages;

/// Shuffle quality of one epoch's order, batch by batch.
#[derive(Clone, Debug, PartialEq)]
pub struct ShuffleQuality {
    /// Batches measured (the last one may be partial).
    pub batches: usize,
    /// Mean number of distinct pages per batch: the higher, the more the batch mixes
    /// data written far apart (a fully random order gets close to the batch size).
    pub mean_distinct_pages_per_batch: f64,
    /// The largest number of distinct pages in one batch.
    pub max_distinct_pages_per_batch: usize,
    /// Mean number of distinct labels per batch, when a label column was given.
    pub mean_distinct_labels_per_batch: Option<f64>,
    /// The most pages "open" at once: started (a sample read) but not finished (a
    /// sample still to come). This is the working set a page cache must hold to read
    /// every page once; QuasiRandom keeps it at most its buffer size.
    pub peak_open_pages: usize,
}

/// Measure `order` cut into batches of `batch_size`, with the pages of `pages` and,
/// optionally, a label per sample id (`labels[sample]`).
///
/// Samples without a page count towards no page. Fails on an empty batch size, a
/// sample outside `pages`, or a sample without a label.
pub fn shuffle_quality(
    order: &[u64],
    batch_size: usize,
    pages: &SamplePages,
    labels: Option<&[i64]>,
) -> Result<ShuffleQuality> {
    if batch_size == 0 {
        return Err(Error::ZeroBatchSize);
    }
    // First and last position of each page, for the open-page sweep.
    let mut span: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut page_at = Vec::with_capacity(order.len());
    for (position, &sample) in order.iter().enumerate() {
        if sample >= pages.num_samples() {
            return Err(Error::IndexOutOfRange {
                index: sample,
                position,
                num_samples: pages.num_samples(),
            });
        }
        let page = pages.page_of(sample);
        if let Some(page) = page {
            span.entry(page)
                .and_modify(|(_, last)| *last = position)
                .or_insert((position, position));
        }
        page_at.push(page);
    }

    let mut batches = 0usize;
    let mut pages_sum = 0usize;
    let mut pages_max = 0usize;
    let mut labels_sum = 0usize;
    for (batch_index, batch) in order.chunks(batch_size).enumerate() {
        let offset = batch_index * batch_size;
        let distinct: HashSet<u64> = page_at[offset..offset + batch.len()]
            .iter()
            .flatten()
            .copied()
            .collect();
        pages_sum += distinct.len();
        pages_max = pages_max.max(distinct.len());
        if let Some(labels) = labels {
            let mut seen = HashSet::new();
            for &sample in batch {
                let label = usize::try_from(sample)
                    .ok()
                    .and_then(|s| labels.get(s))
                    .ok_or(Error::MissingLabel {
                        sample,
                        labels: labels.len(),
                    })?;
                seen.insert(*label);
            }
            labels_sum += seen.len();
        }
        batches += 1;
    }

    // Sweep: +1 where a page opens, -1 after its last sample.
    let mut delta = vec![0i64; order.len() + 1];
    for &(first, last) in span.values() {
        delta[first] += 1;
        delta[last + 1] -= 1;
    }
    let mut open = 0i64;
    let mut peak_open = 0i64;
    for d in delta {
        open += d;
        peak_open = peak_open.max(open);
    }

    let mean = |sum: usize| {
        if batches == 0 {
            0.0
        } else {
            sum as f64 / batches as f64
        }
    };
    Ok(ShuffleQuality {
        batches,
        mean_distinct_pages_per_batch: mean(pages_sum),
        max_distinct_pages_per_batch: pages_max,
        mean_distinct_labels_per_batch: labels.map(|_| mean(labels_sum)),
        // Non-negative: it starts at zero and only the maximum is kept.
        peak_open_pages: peak_open as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_pages_labels_and_open_pages_of_a_known_order() {
        // Samples 0..6 on pages 10, 10, 11, 11, 12, 12; labels 0, 1, 0, 1, 0, 1.
        let pages = SamplePages::new(vec![
            Some(10),
            Some(10),
            Some(11),
            Some(11),
            Some(12),
            Some(12),
        ]);
        let labels = [0, 1, 0, 1, 0, 1];
        // Batches [0, 2] [1, 4] [3, 5]: pages {10,11} {10,12} {11,12}.
        let quality = shuffle_quality(&[0, 2, 1, 4, 3, 5], 2, &pages, Some(&labels)).unwrap();
        assert_eq!(quality.batches, 3);
        assert_eq!(quality.mean_distinct_pages_per_batch, 2.0);
        assert_eq!(quality.max_distinct_pages_per_batch, 2);
        assert_eq!(quality.mean_distinct_labels_per_batch, Some(4.0 / 3.0));
        // Page 10 spans positions 0..=2, page 11 1..=4, page 12 3..=5: two at most.
        assert_eq!(quality.peak_open_pages, 2);

        let sequential = shuffle_quality(&[0, 1, 2, 3, 4, 5], 2, &pages, None).unwrap();
        assert_eq!(sequential.mean_distinct_pages_per_batch, 1.0);
        assert_eq!(sequential.peak_open_pages, 1);
        assert_eq!(sequential.mean_distinct_labels_per_batch, None);
    }

    #[test]
    fn rejects_unknown_samples_and_missing_labels() {
        let pages = SamplePages::new(vec![Some(1), Some(1)]);
        assert_eq!(
            shuffle_quality(&[0, 2], 1, &pages, None),
            Err(Error::IndexOutOfRange {
                index: 2,
                position: 1,
                num_samples: 2
            })
        );
        assert_eq!(
            shuffle_quality(&[0, 1], 1, &pages, Some(&[5])),
            Err(Error::MissingLabel {
                sample: 1,
                labels: 1
            })
        );
        assert_eq!(
            shuffle_quality(&[0], 0, &pages, None),
            Err(Error::ZeroBatchSize)
        );
    }
}
