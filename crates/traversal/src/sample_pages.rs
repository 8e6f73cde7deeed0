//! The page map as plain data: for each sample of the dataset, the page its data
//! starts in (or none, for a sample without allocations).

/// Which page holds each sample, indexed by sample id.
///
/// A loader builds it from its file's page map, taking for each sample the first page
/// holding one of its allocations (beton-io's `PageMap::pages_of_sample(s).first()`).
/// FFCV's writer puts all of a sample's allocations in one page, so "first" loses
/// nothing for FFCV files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SamplePages {
    page_of_sample: Vec<Option<u64>>,
}

impl SamplePages {
    /// From one entry per sample id.
    pub fn new(page_of_sample: Vec<Option<u64>>) -> SamplePages {
        SamplePages { page_of_sample }
    }

    /// From a function of the sample id, for samples `0..num_samples`.
    pub fn from_fn(num_samples: u64, page_of: impl FnMut(u64) -> Option<u64>) -> SamplePages {
        SamplePages {
            page_of_sample: (0..num_samples).map(page_of).collect(),
        }
    }

    /// The number of samples covered.
    pub fn num_samples(&self) -> u64 {
        self.page_of_sample.len() as u64
    }

    /// The page of `sample`; `None` for a sample without data or out of range.
    pub fn page_of(&self, sample: u64) -> Option<u64> {
        usize::try_from(sample)
            .ok()
            .and_then(|s| self.page_of_sample.get(s).copied().flatten())
    }

    /// True when at least one sample has data in a page.
    pub fn has_data_pages(&self) -> bool {
        self.page_of_sample.iter().any(Option::is_some)
    }
}
