//! Where a writer's samples come from: [`SampleSource`], implemented for vectors of
//! samples and, through [`from_fn`], for a length and a function.

use crate::error::SourceError;
use crate::value::FieldValue;

/// Where samples come from: anything indexable, shared by the writer threads.
pub trait SampleSource: Sync {
    /// Number of samples.
    fn num_samples(&self) -> u64;
    /// Sample `index` (`0..num_samples()`), one value per field in field order.
    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError>;
}

impl SampleSource for [Vec<FieldValue>] {
    fn num_samples(&self) -> u64 {
        self.len() as u64
    }
    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        Ok(self[index as usize].clone())
    }
}

impl SampleSource for Vec<Vec<FieldValue>> {
    fn num_samples(&self) -> u64 {
        self.len() as u64
    }
    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        Ok(self[index as usize].clone())
    }
}

/// A [`SampleSource`] made of a length and a function; see [`from_fn`].
#[derive(Debug, Clone)]
pub struct FnSource<F> {
    len: u64,
    f: F,
}

/// A source of `len` samples, sample `i` being `f(i)`.
pub fn from_fn<F>(len: u64, f: F) -> FnSource<F>
where
    F: Fn(u64) -> std::result::Result<Vec<FieldValue>, SourceError> + Sync,
{
    FnSource { len, f }
}

impl<F> SampleSource for FnSource<F>
where
    F: Fn(u64) -> std::result::Result<Vec<FieldValue>, SourceError> + Sync,
{
    fn num_samples(&self) -> u64 {
        self.len
    }
    fn sample(&self, index: u64) -> std::result::Result<Vec<FieldValue>, SourceError> {
        (self.f)(index)
    }
}
