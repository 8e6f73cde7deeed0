//! Which pages hold which samples' data, and the reverse, from the allocation table.

/// The page ↔ sample relation of a file, built like FFCV's memory manager builds it: every
/// allocation-table row (zero-sized ones included) puts its sample on page `ptr / page_size`.
///
/// Memory is proportional to the number of allocation-table rows.
#[derive(Debug, Clone, Default)]
pub struct PageMap {
    page_size: u64,
    num_pages: u64,
    /// Samples that have at least one allocation, sorted.
    samples: Vec<u64>,
    /// `sample_pages[sample_starts[i]..sample_starts[i + 1]]` are the pages of `samples[i]`.
    sample_starts: Vec<usize>,
    sample_pages: Vec<u64>,
    /// Pages that hold at least one allocation, sorted.
    pages: Vec<u64>,
    /// `page_samples[page_starts[i]..page_starts[i + 1]]` are the samples of `pages[i]`.
    page_starts: Vec<usize>,
    page_samples: Vec<u64>,
}

impl PageMap {
    /// Builds the map from `(sample_id, page)` pairs.
    pub(crate) fn build(page_size: u64, num_pages: u64, mut pairs: Vec<(u64, u64)>) -> PageMap {
        pairs.sort_unstable();
        pairs.dedup();
        let (samples, sample_starts, sample_pages) = group(&pairs);
        let mut flipped: Vec<(u64, u64)> = pairs.iter().map(|&(s, p)| (p, s)).collect();
        flipped.sort_unstable();
        let (pages, page_starts, page_samples) = group(&flipped);
        PageMap {
            page_size,
            num_pages,
            samples,
            sample_starts,
            sample_pages,
            pages,
            page_starts,
            page_samples,
        }
    }

    /// The page size in bytes.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Pages of the file, `ceil(file_size / page_size)`; page `i` covers bytes
    /// `i * page_size .. (i + 1) * page_size`. Page 0 holds the header and the metadata.
    pub fn num_pages(&self) -> u64 {
        self.num_pages
    }

    /// Sorted, distinct pages holding the sample's allocations (empty for a sample without any,
    /// or past the end).
    pub fn pages_of_sample(&self, sample: u64) -> &[u64] {
        match self.samples.binary_search(&sample) {
            Ok(i) => &self.sample_pages[self.sample_starts[i]..self.sample_starts[i + 1]],
            Err(_) => &[],
        }
    }

    /// Sorted, distinct samples with an allocation on the page (empty for none).
    pub fn samples_of_page(&self, page: u64) -> &[u64] {
        match self.pages.binary_search(&page) {
            Ok(i) => &self.page_samples[self.page_starts[i]..self.page_starts[i + 1]],
            Err(_) => &[],
        }
    }

    /// Sorted pages that hold at least one allocation.
    pub fn data_pages(&self) -> &[u64] {
        &self.pages
    }

    /// Sorted samples that have at least one allocation.
    pub fn samples_with_data(&self) -> &[u64] {
        &self.samples
    }
}

/// Groups sorted `(key, value)` pairs into keys, CSR starts and values.
fn group(pairs: &[(u64, u64)]) -> (Vec<u64>, Vec<usize>, Vec<u64>) {
    let mut keys = Vec::new();
    let mut starts = Vec::new();
    let mut values = Vec::with_capacity(pairs.len());
    for (i, &(k, v)) in pairs.iter().enumerate() {
        if keys.last() != Some(&k) {
            keys.push(k);
            starts.push(i);
        }
        values.push(v);
    }
    starts.push(pairs.len());
    (keys, starts, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_are_sorted_and_distinct() {
        let m = PageMap::build(4, 5, vec![(3, 2), (1, 1), (3, 1), (1, 1), (0, 4)]);
        assert_eq!(m.pages_of_sample(1), &[1]);
        assert_eq!(m.pages_of_sample(3), &[1, 2]);
        assert_eq!(m.pages_of_sample(2), &[] as &[u64]);
        assert_eq!(m.samples_of_page(1), &[1, 3]);
        assert_eq!(m.samples_of_page(0), &[] as &[u64]);
        assert_eq!(m.data_pages(), &[1, 2, 4]);
        assert_eq!(m.samples_with_data(), &[0, 1, 3]);
        assert_eq!(m.num_pages(), 5);
    }
}
