//! The value parsers of the commands' numeric flags, and the bounds they enforce.
//!
//! Every number a user types is checked here, when clap parses it, so that a value out of
//! range is a usage error (exit 2, one line) naming the flag, instead of a panic, a hang or
//! an allocation sized by it later. The bounds are far above any useful setting; they only
//! keep the arithmetic that follows (thread pools, slot counts, `Duration`s) well defined.

use clap::builder::RangedU64ValueParser;

/// The most threads a worker flag (`--num-workers`, `--workers`, `--reader-threads`) may ask
/// for: each is an OS thread started up front.
pub const MAX_THREADS: u64 = 1024;

/// The largest `--batch-size`: a batch's slot holds this many samples of every field.
pub const MAX_BATCH_SIZE: u64 = 1 << 20;

/// The largest `--batches-ahead`: the loader allocates `batches_ahead + 2` batch slots.
pub const MAX_BATCHES_AHEAD: u64 = 1024;

/// The longest `ffcv doctor --time-budget`, in seconds (a week).
pub const MAX_TIME_BUDGET_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// `--batch-size`: 1 to [`MAX_BATCH_SIZE`].
pub fn batch_size<T>() -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::new().range(1..=MAX_BATCH_SIZE)
}

/// `--batches-ahead`: 1 to [`MAX_BATCHES_AHEAD`].
pub fn batches_ahead<T>() -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::new().range(1..=MAX_BATCHES_AHEAD)
}

/// A thread count (`--workers`, `--reader-threads`): 1 to [`MAX_THREADS`].
pub fn threads<T>() -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::new().range(1..=MAX_THREADS)
}

/// The most rows `ffcv write synthetic --var-rows` gives a sample (16 MiB of boxes).
pub const MAX_VAR_ROWS: u64 = 1 << 20;

/// `--var-rows`: 0 to [`MAX_VAR_ROWS`].
pub fn var_rows<T>() -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::new().range(0..=MAX_VAR_ROWS)
}

/// `--num-workers`: -1 (the CPUs this process may use) or 1 to [`MAX_THREADS`].
pub fn num_workers(text: &str) -> Result<i64, String> {
    let value: i64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of threads"))?;
    match value {
        -1 => Ok(-1),
        n if (1..=MAX_THREADS as i64).contains(&n) => Ok(n),
        _ => Err(format!(
            "{value} is not -1 (all CPUs of this process) or a thread count from 1 to {MAX_THREADS}"
        )),
    }
}

/// `--time-budget`: a finite number of seconds above 0 and at most
/// [`MAX_TIME_BUDGET_SECONDS`] (NaN, infinities and 1e20 would overflow a `Duration`).
pub fn time_budget_seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if value.is_finite() && value > 0.0 && value <= MAX_TIME_BUDGET_SECONDS {
        Ok(value)
    } else {
        Err(format!(
            "{text} is not a number of seconds above 0 and at most {MAX_TIME_BUDGET_SECONDS} (a week)"
        ))
    }
}

/// A probability (`--compress-probability`): a finite number from 0 to 1.
pub fn probability(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{text} is not a probability from 0 to 1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_workers_is_minus_one_or_a_bounded_count() {
        assert_eq!(num_workers("-1"), Ok(-1));
        assert_eq!(num_workers("1"), Ok(1));
        assert_eq!(num_workers("1024"), Ok(1024));
        for bad in ["0", "-2", "1025", "9223372036854775808", "1e3", "x", ""] {
            assert!(num_workers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_budgets_are_finite_positive_and_at_most_a_week() {
        assert_eq!(time_budget_seconds("0.5"), Ok(0.5));
        assert_eq!(time_budget_seconds("604800"), Ok(604_800.0));
        for bad in [
            "0", "-1", "nan", "NaN", "inf", "-inf", "1e20", "604801", "soon", "",
        ] {
            assert!(time_budget_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn probabilities_lie_in_the_unit_interval() {
        assert_eq!(probability("0"), Ok(0.0));
        assert_eq!(probability("1"), Ok(1.0));
        assert_eq!(probability("0.25"), Ok(0.25));
        for bad in ["-0.1", "1.5", "nan", "inf", "1e20", "half"] {
            assert!(probability(bad).is_err(), "{bad}");
        }
    }
}
