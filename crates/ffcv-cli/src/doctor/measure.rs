//! One bounded measurement of the loader for `ffcv doctor`: build the loader with the given
//! knobs, warm up, then take batches until the time slice is spent, and read the loader's
//! counters into a [`Measurement`].

use std::time::Duration;

use beton_io::Reader;

use super::DoctorArgs;
use super::diagnose::{Knobs, Measurement};

/// Measures `knobs` on the file for at most about `slice` of wall time.
pub fn measure(
    _args: &DoctorArgs,
    _reader: &Reader,
    _knobs: &Knobs,
    _seed: u64,
    _slice: Duration,
) -> Result<Measurement, String> {
    Err("the loader is not available in this build yet".to_owned())
}
