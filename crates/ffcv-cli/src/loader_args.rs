//! The loader flags `ffcv bench` and `ffcv doctor` share: one clap struct flattened into
//! both commands' arguments, so that a flag has one name, type, default and help in both,
//! and one conversion into the facade's [`LoaderBuilder`].
//!
//! The doctor reads some of these flags as where its search starts (`--num-workers`,
//! `--order`, `--batches-ahead`, `--no-os-cache`) and sets the values it measures on top of
//! [`LoaderArgs::builder`]; the help says so where the two commands differ.

use std::path::PathBuf;

use clap::builder::{OsStringValueParser, TypedValueParser};

use ffcv::{LoaderBuilder, Order};

use crate::cache_args::CacheArgs;
use crate::commands::order::OrderChoice;
use crate::error::CliError;
use crate::numeric_flags;
use crate::pipeline_args::{self, DecoderArg};
use ffcv::transform_spec::FieldTransforms;

/// The dataset and the loader's knobs on the command line.
#[derive(clap::Args, Debug, Clone)]
pub struct LoaderArgs {
    /// The .beton file (a path, `file://`, `s3://` or `http(s)://` URL), or the first of
    /// several read as one dataset (shards); a glob pattern (`'data/train-*.beton'`) or an
    /// `s3://` prefix (`s3://bucket/train-`) names every match, sorted. Not given with
    /// --mix.
    #[arg(required_unless_present = "mix", default_value = "",
          value_parser = OsStringValueParser::new().map(PathBuf::from))]
    pub file: PathBuf,
    /// More shards of the same dataset, after FILE (global sample ids run through the
    /// files in the order given).
    #[arg(value_name = "MORE")]
    pub more: Vec<PathBuf>,

    /// A weighted mixture of datasets in place of FILE.
    #[command(flatten)]
    pub mix: crate::mix_args::MixArgs,

    /// Samples per batch, 1 to 2^20 (`ffcv doctor` keeps it fixed while measuring).
    #[arg(long, default_value_t = 512, value_parser = numeric_flags::batch_size::<usize>())]
    pub batch_size: usize,

    /// Decoding threads, 1 to 1024; -1 = the CPUs this process may use. Default: -1;
    /// `ffcv doctor` starts from one per physical core.
    #[arg(long, allow_negative_numbers = true, value_parser = numeric_flags::num_workers)]
    pub num_workers: Option<i64>,

    /// The traversal order. Default: sequential; `ffcv doctor` starts from its decision
    /// rules' choice.
    #[arg(long, value_enum)]
    pub order: Option<OrderChoice>,

    /// Read through the process cache instead of the OS page cache.
    #[arg(long)]
    pub no_os_cache: bool,

    /// The seed of random orders and augmentations (default: drawn, and reported; `ffcv
    /// doctor` keeps it fixed while measuring).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Batches prepared ahead of the consumer, 1 to 1024 (`ffcv doctor` starts from it).
    #[arg(long, default_value_t = 3, value_parser = numeric_flags::batches_ahead::<usize>())]
    pub batches_ahead: usize,

    /// Keep the final partial batch.
    #[arg(long)]
    pub no_drop_last: bool,

    /// Regenerate the pipeline code at every epoch.
    #[arg(long)]
    pub recompile: bool,

    /// Run the pipelines with the interpreter instead of compiled code.
    #[arg(long)]
    pub no_compile: bool,

    /// Process-cache knobs.
    #[command(flatten)]
    pub cache: CacheArgs,

    /// Number of ranks of a distributed job (with --rank).
    #[arg(long, requires = "rank", value_parser = clap::value_parser!(u64).range(1..))]
    pub world_size: Option<u64>,

    /// This process's rank, 0..world-size (with --world-size).
    #[arg(long, requires = "world_size")]
    pub rank: Option<u64>,

    /// A field's decoder, FIELD=SPEC (the help lists the SPECs).
    #[arg(long = "decoder", value_name = "FIELD=SPEC",
          value_parser = pipeline_args::parse_decoder, help = pipeline_args::decoder_help())]
    pub decoders: Vec<DecoderArg>,

    /// A field's transforms after its decoder, FIELD=OP[,OP…] (the help lists the ops).
    #[arg(long = "transform", value_name = "FIELD=OP[,OP…]",
          value_parser = FieldTransforms::parse, help = pipeline_args::transform_help())]
    pub transforms: Vec<FieldTransforms>,

    /// Where batches go: `cpu`, or `cuda:N` to copy every batch to that GPU through the
    /// loader's GPU stage (each batch waited for on the host before the next).
    #[arg(long, default_value = "cpu")]
    pub device: ffcv::gpu::DeviceSpec,
}

impl LoaderArgs {
    /// The order `ffcv bench` runs: `--order`, else sequential.
    pub fn order(&self) -> OrderChoice {
        self.order.unwrap_or(OrderChoice::Sequential)
    }

    /// `(world size, rank)` of a distributed run: both flags given (clap requires each with
    /// the other), else `None`.
    pub fn distributed(&self) -> Option<(u64, u64)> {
        self.world_size.zip(self.rank)
    }

    /// Whether FILE or one of MORE names a remote object.
    pub fn is_remote(&self) -> bool {
        std::iter::once(&self.file)
            .chain(&self.more)
            .any(|f| crate::dataset_args::is_remote(f))
    }

    /// The loader these flags describe, not yet built: every flag given is set, the others
    /// keep the loader's defaults. With `--transform`, the file is opened here (a
    /// transformed field's default decoder depends on its type) and the same dataset is
    /// handed to the builder. Errors: the dataset cannot be opened (from the facade), or a
    /// `--decoder`/`--transform` does not fit the file's fields (a usage error).
    pub fn builder(&self) -> Result<LoaderBuilder, CliError> {
        self.builder_seeded(None)
    }

    /// As [`LoaderArgs::builder`], with the seed a `--mix` mixture takes when `--seed` is
    /// not given (a resumed state's: the mixture's order is made before the state is
    /// applied).
    pub fn builder_seeded(&self, mix_seed: Option<u64>) -> Result<LoaderBuilder, CliError> {
        let saturate = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let order = Order::from(traversal::OrderKind::from(self.order()));
        self.mix.check_no_file(&self.file, &self.more)?;
        let mixture = if self.mix.is_set() {
            let world = self.distributed().map(|(w, r)| (saturate(w), saturate(r)));
            let pages = self.cache.quasi_buffer_pages;
            Some(
                self.mix
                    .open(order.clone(), self.seed.or(mix_seed), world, pages)?,
            )
        } else {
            None
        };
        let mut b = match &mixture {
            // The mixture decides the order, the seed and each rank's positions.
            Some(m) => m.loader_builder(),
            None => crate::dataset_args::builder(&self.file, &self.more).order(order),
        };
        b = b
            .batch_size(self.batch_size)
            .num_workers(self.num_workers.unwrap_or(-1))
            .os_cache(!self.no_os_cache)
            .batches_ahead(self.batches_ahead)
            .drop_last(!self.no_drop_last)
            .recompile(self.recompile)
            .compile(!self.no_compile);
        b = self.cache.apply(b);
        if self.device != ffcv::gpu::DeviceSpec::Cpu {
            b = b.device(self.device);
        }
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        if let Some(m) = &mixture {
            let reader = std::sync::Arc::clone(&m.dataset().reader);
            return pipeline_args::apply(b, &reader, &self.decoders, &self.transforms)
                .map_err(CliError::Usage);
        }
        if let Some((world_size, rank)) = self.distributed() {
            // Saturated, so that a value past usize is the loader's error, not a wrap.
            b = b
                .distributed(true)
                .world_size(saturate(world_size))
                .rank(saturate(rank));
        }
        if self.transforms.is_empty() {
            for d in &self.decoders {
                b = match &d.source {
                    Some(source) => b.view(d.field.clone(), source.clone(), d.choice.clone()),
                    None => b.decoder(d.field.clone(), d.choice.clone()),
                };
            }
            return Ok(b);
        }
        let dataset = crate::dataset_args::open(&self.file, &self.more)?;
        let reader = std::sync::Arc::clone(&dataset.reader);
        Ok(
            pipeline_args::apply(b, &reader, &self.decoders, &self.transforms)
                .map_err(CliError::Usage)?
                .dataset(dataset),
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::commands::bench::BenchArgs;
    use crate::commands::doctor::DoctorArgs;

    #[derive(Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }

    #[derive(Parser)]
    struct Doctor {
        #[command(flatten)]
        args: DoctorArgs,
    }

    /// Every loader flag, each with a value other than its default.
    const EVERY_LOADER_FLAG: &[&str] = &[
        "data/a.beton",
        "data/b.beton",
        "--batch-size",
        "64",
        "--num-workers",
        "-1",
        "--order",
        "quasi-random",
        "--no-os-cache",
        "--seed",
        "9",
        "--batches-ahead",
        "5",
        "--no-drop-last",
        "--recompile",
        "--no-compile",
        "--max-memory",
        "16MiB",
        "--reader-threads",
        "3",
        "--prefetch-ahead",
        "2",
        "--direct-io",
        "--no-retain-pages",
        "--hold-all-pages",
        "--quasi-buffer-pages",
        "7",
        "--page-cache-dir",
        "/tmp/pages",
        "--page-cache-size",
        "1G",
        "--max-image-pixels",
        "1000",
        "--world-size",
        "4",
        "--rank",
        "3",
        "--decoder",
        "image=center-crop:32x32:dct-scale",
        "--decoder",
        "label=none",
        "--transform",
        "image=flip,normalize:imagenet:f32,chw",
        "--device",
        "cuda:1",
    ];

    #[test]
    fn bench_and_doctor_parse_the_same_loader_flags_to_the_same_values() {
        let argv = || std::iter::once("ffcv").chain(EVERY_LOADER_FLAG.iter().copied());
        let bench = Bench::try_parse_from(argv()).unwrap().args.loader;
        let doctor = Doctor::try_parse_from(argv()).unwrap().args.loader;
        assert_eq!(format!("{bench:?}"), format!("{doctor:?}"));
        assert_eq!(bench.batch_size, 64);
        assert_eq!(bench.distributed(), Some((4, 3)));
        assert_eq!(bench.decoders[0].spec(), "center-crop:32x32:dct-scale");
        // The defaults agree too.
        let bench = Bench::try_parse_from(["ffcv", "f.beton"])
            .unwrap()
            .args
            .loader;
        let doctor = Doctor::try_parse_from(["ffcv", "f.beton"])
            .unwrap()
            .args
            .loader;
        assert_eq!(format!("{bench:?}"), format!("{doctor:?}"));
    }

    #[test]
    fn both_commands_declare_each_loader_flag_with_the_same_help() {
        let loader = <super::LoaderArgs as clap::Args>::augment_args(clap::Command::new("x"));
        let (bench, doctor) = (Bench::command(), Doctor::command());
        let mut count = 0;
        for arg in loader.get_arguments() {
            let id = arg.get_id();
            let shown = |a: &clap::Arg| {
                (
                    a.get_long().map(str::to_owned),
                    a.get_help().map(ToString::to_string),
                    a.get_default_values().to_vec(),
                )
            };
            for command in [&bench, &doctor] {
                let theirs = command
                    .get_arguments()
                    .find(|a| a.get_id() == id)
                    .unwrap_or_else(|| panic!("{} lacks {id}", command.get_name()));
                assert_eq!(shown(theirs), shown(arg), "{id}");
            }
            count += 1;
        }
        assert!(count >= 25, "{count} loader flags");
    }
}
