//! The arguments of `ffcv doctor`: the loader flags it shares with `ffcv bench`
//! ([`LoaderArgs`]), plus the time budget and what the run needs.

use crate::loader_args::LoaderArgs;
use crate::numeric_flags;

/// Arguments of `ffcv doctor`: the loader flags of `ffcv bench`, plus the budget and what
/// the run needs.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// The dataset and the loader's knobs (shared with `ffcv bench`).
    #[command(flatten)]
    pub loader: LoaderArgs,

    /// Seconds all measurements together may take (above 0, at most a week).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0,
          value_parser = numeric_flags::time_budget_seconds)]
    pub time_budget: f64,

    /// The order must be the same every run (Sequential, or Random with a fixed seed).
    #[arg(long)]
    pub repeatable: bool,

    /// The shuffle must be an exactly uniform permutation (rules out QuasiRandom).
    #[arg(long)]
    pub uniform: bool,

    /// Record the facts and the rules' starting configuration, measure nothing.
    #[arg(long)]
    pub no_measure: bool,

    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
}

impl DoctorArgs {
    /// The world size the doctor measures and recommends (1 when not distributed).
    pub fn world_size(&self) -> u64 {
        self.loader
            .distributed()
            .map_or(1, |(world_size, _)| world_size)
    }

    /// This process's rank (0 when not distributed).
    pub fn rank(&self) -> u64 {
        self.loader.distributed().map_or(0, |(_, rank)| rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: DoctorArgs,
    }

    #[test]
    fn loader_flags_parse_as_ffcv_bench_names_them() {
        let argv = [
            "doctor",
            "f.beton",
            "--batch-size",
            "64",
            "--max-memory",
            "16MiB",
            "--world-size",
            "4",
            "--rank",
            "3",
            "--decoder",
            "image=center-crop:32x32",
            "--time-budget",
            "5",
            "--seed",
            "9",
            "--no-drop-last",
            "--recompile",
            "--no-compile",
            "--json",
        ];
        let a = Wrapper::parse_from(argv).args;
        let l = &a.loader;
        assert_eq!(l.batch_size, 64);
        assert_eq!(l.cache.max_memory, Some(16 << 20));
        assert_eq!((a.world_size(), a.rank()), (4, 3));
        assert_eq!(l.decoders.len(), 1);
        assert_eq!(l.decoders[0].text, "image=center-crop:32x32");
        assert_eq!(a.time_budget, 5.0);
        assert_eq!(l.seed, Some(9));
        assert!(l.no_drop_last && l.recompile && l.no_compile && a.json);
        let alone = Wrapper::parse_from(["doctor", "f.beton"]).args;
        assert_eq!((alone.world_size(), alone.rank()), (1, 0));
    }
}
