//! `--mix NAME:WEIGHT` (repeated) and its knobs: a weighted mixture of datasets
//! (`ffcv::Loader::builder_mixture`, `docs/mixtures.md`) in place of FILE, for the
//! commands that take the loader flags (`ffcv bench`; `ffcv doctor` refuses it).

use std::path::{Path, PathBuf};

use ffcv::{Loader, Mixture, MixtureSpec, Order, WhenExhausted};

use crate::error::CliError;

/// One `--mix` value: a source's name (a file, a URL, or a glob pattern / `s3://` prefix
/// naming a shard set) and its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct MixArg {
    /// The source's name.
    pub name: String,
    /// Its weight (finite, non-negative).
    pub weight: f64,
}

/// Parses `NAME:WEIGHT`, split at the last `:` (so URLs keep theirs); the weight must
/// be a finite non-negative number.
pub fn parse_mix(s: &str) -> Result<MixArg, String> {
    let Some((name, weight)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not NAME:WEIGHT (e.g. a.beton:0.7)"));
    };
    if name.is_empty() {
        return Err(format!("{s:?} names no dataset before ':'"));
    }
    let weight: f64 = weight
        .parse()
        .map_err(|_| format!("{s:?}: the weight {weight:?} is not a number"))?;
    if !weight.is_finite() || weight < 0.0 {
        return Err(format!(
            "{s:?}: the weight {weight} must be finite and non-negative"
        ));
    }
    Ok(MixArg {
        name: name.to_owned(),
        weight,
    })
}

/// The mixture flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MixArgs {
    /// A weighted source of a mixture, NAME:WEIGHT, repeated (in place of FILE): samples
    /// are drawn from the sources in proportion to the weights (`docs/mixtures.md`).
    /// NAME is a file, a URL, or a glob pattern / `s3://` prefix naming a shard set.
    #[arg(long = "mix", value_name = "NAME:WEIGHT", value_parser = parse_mix)]
    pub mix: Vec<MixArg>,

    /// With --mix: what a source does when it runs out inside an epoch (`cycle`: a
    /// new pass in a fresh order; `stop`: end the epoch).
    #[arg(long, value_name = "POLICY", default_value = "cycle", value_parser = parse_when)]
    pub mix_when_exhausted: WhenExhausted,

    /// With --mix: positions per epoch over all ranks [default: the sum of the sources'
    /// lengths].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub mix_samples_per_epoch: Option<u64>,
}

fn parse_when(s: &str) -> Result<WhenExhausted, String> {
    s.parse()
}

impl MixArgs {
    /// Whether `--mix` was given.
    pub fn is_set(&self) -> bool {
        !self.mix.is_empty()
    }

    /// Refuses FILE (or MORE) beside `--mix`: the mixture's sources are the data set.
    pub fn check_no_file(&self, file: &Path, more: &[PathBuf]) -> Result<(), CliError> {
        if self.is_set() && (!file.as_os_str().is_empty() || !more.is_empty()) {
            return Err(CliError::Usage(format!(
                "--mix replaces FILE; give {} as --mix {}:WEIGHT instead",
                file.display(),
                file.display()
            )));
        }
        Ok(())
    }

    /// The mixture's spec with the loader's order, seed, rank and QuasiRandom buffer
    /// (`None`: the mixture's default), opened. A zero sum of weights is a usage error; a source that cannot be
    /// opened or whose fields differ is the facade's error.
    pub fn open(
        &self,
        order: Order,
        seed: Option<u64>,
        distributed: Option<(usize, usize)>,
        buffer_pages: Option<u64>,
    ) -> Result<Mixture, CliError> {
        if self.mix.iter().map(|m| m.weight).sum::<f64>() <= 0.0 {
            return Err(CliError::Usage(
                "--mix: the weights sum to 0; give some source a positive weight".into(),
            ));
        }
        let weights: Vec<f64> = self.mix.iter().map(|m| m.weight).collect();
        let names = self.mix.iter().map(|m| m.name.clone());
        let mut spec: MixtureSpec = Loader::builder_mixture(names, &weights)
            .order(order)
            .when_exhausted(self.mix_when_exhausted);
        if let Some(seed) = seed {
            spec = spec.seed(seed);
        }
        if let Some(n) = self.mix_samples_per_epoch {
            spec = spec.samples_per_epoch(n);
        }
        if let Some((world_size, rank)) = distributed {
            spec = spec.distributed(rank, world_size);
        }
        if let Some(pages) = buffer_pages {
            spec = spec.quasi_buffer_pages(usize::try_from(pages).unwrap_or(usize::MAX));
        }
        Ok(spec.open()?)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mix;

    #[test]
    fn mix_values_split_at_the_last_colon_and_refuse_bad_weights() {
        let m = parse_mix("s3://bucket/a.beton:0.25").unwrap();
        assert_eq!((m.name.as_str(), m.weight), ("s3://bucket/a.beton", 0.25));
        assert_eq!(parse_mix("a.beton:3").unwrap().weight, 3.0);
        for bad in [
            "a.beton",
            ":1",
            "a.beton:x",
            "a.beton:-1",
            "a.beton:nan",
            "a.beton:inf",
        ] {
            assert!(parse_mix(bad).is_err(), "{bad}");
        }
    }
}
