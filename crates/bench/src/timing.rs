//! Repeated timing of one pass: warm-up, then timed repetitions summarised by their median.

use std::time::Instant;

use serde_json::{Value, json};

/// Seconds of the timed repetitions of one measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Every timed repetition, in seconds, sorted ascending.
    pub seconds: Vec<f64>,
}

impl Timing {
    /// The median repetition (the reported figure: robust against one disturbed run).
    pub fn median(&self) -> f64 {
        let n = self.seconds.len();
        if n == 0 {
            return f64::NAN;
        }
        if n % 2 == 1 {
            self.seconds[n / 2]
        } else {
            (self.seconds[n / 2 - 1] + self.seconds[n / 2]) / 2.0
        }
    }

    /// `{"min", "median", "max"}` in seconds, for a row's `extra`.
    pub fn summary(&self) -> Value {
        json!({
            "min": self.seconds.first(),
            "median": self.median(),
            "max": self.seconds.last(),
        })
    }
}

/// Times `reps` runs of each pass in `passes`, after one untimed warm-up run of each.
///
/// The passes alternate inside every repetition, so a slow phase of the machine (another
/// process, frequency scaling) hits every pass alike and their ratio stays fair.
/// The first failing pass ends the measurement with its error.
pub fn interleaved<const N: usize>(
    reps: usize,
    passes: [&dyn Fn() -> Result<(), String>; N],
) -> Result<[Timing; N], String> {
    for pass in &passes {
        pass()?;
    }
    let mut seconds: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(reps));
    for _ in 0..reps {
        for (pass, times) in passes.iter().zip(seconds.iter_mut()) {
            let started = Instant::now();
            pass()?;
            times.push(started.elapsed().as_secs_f64());
        }
    }
    Ok(seconds.map(|mut times| {
        times.sort_by(f64::total_cmp);
        Timing { seconds: times }
    }))
}

#[cfg(test)]
mod tests {
    use super::{Timing, interleaved};
    use std::cell::Cell;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(
            Timing {
                seconds: vec![1.0, 2.0, 9.0]
            }
            .median(),
            2.0
        );
        assert_eq!(
            Timing {
                seconds: vec![1.0, 2.0, 4.0, 9.0]
            }
            .median(),
            3.0
        );
        assert!(Timing { seconds: vec![] }.median().is_nan());
    }

    #[test]
    fn every_pass_runs_once_to_warm_up_then_reps_times() {
        let (a, b) = (Cell::new(0), Cell::new(0));
        let count = |cell: &Cell<u32>| {
            cell.set(cell.get() + 1);
            Ok(())
        };
        let [ta, tb] = interleaved(3, [&|| count(&a), &|| count(&b)]).unwrap();
        assert_eq!((a.get(), b.get()), (4, 4));
        assert_eq!((ta.seconds.len(), tb.seconds.len()), (3, 3));
        assert!(ta.seconds.windows(2).all(|w| w[0] <= w[1]));
        let failing = || Err("disk gone".to_owned());
        assert_eq!(interleaved(3, [&failing]).unwrap_err(), "disk gone");
    }
}
