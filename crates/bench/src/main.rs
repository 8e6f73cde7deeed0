//! The benchmark runner behind `cargo xtask bench --small`: a bounded matrix of measurements,
//! printed as a table and written to `target/bench/small.json` and `small.md`.
//!
//! Each suite module returns [`report::Row`]s: `reader` (the Reader beside memcpy),
//! `loader_matrix` (the ffcv Loader end to end), `resume` (a loader state taken after every
//! batch against none), `page_cache` (process vs OS cache, cold
//! reads) and `jit` (compiled vs interpreted pipelines). Data sets are written once under the
//! output folder and reused. Progress goes to stderr, results to stdout (the table, or the
//! JSON document with `--json`); `plot` draws `small.svg`. `--transform FIELD=OP[,OP…]`
//! (repeatable) runs a user's transforms on the decoder-only loader rows
//! ([`row_transforms`] has the rule).

mod datasets;
mod jit;
mod loader_matrix;
mod mixture;
mod page_cache;
mod plot;
mod reader;
mod remote;
mod report;
mod resume;
mod row_transforms;
mod timing;
mod views;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

use crate::report::{Machine, Report, Row};
use crate::row_transforms::RowTransforms;
use ffcv::transform_spec::FieldTransforms;

/// Timed repetitions per reader row (after one warm-up pass).
const READER_REPS: usize = 9;

/// Run the bounded benchmark matrix.
#[derive(Parser, Debug)]
#[command(name = "ffcv-bench", about)]
struct Args {
    /// The small matrix (the only one so far): bounded to about two minutes on 2 cores.
    #[arg(long)]
    small: bool,
    /// Only rows whose name contains one of these comma-separated patterns
    /// (e.g. `reader/random`, `128k`); other suites run only when a pattern names them.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print the JSON document on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Also print each row's throughput relative to the same-named row of an earlier run.
    #[arg(long, value_name = "OLD.json")]
    compare: Option<PathBuf>,
    /// Where data sets and results go [default: <workspace>/target/bench].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Transforms after the decoder of FIELD on the decoder-only loader rows (the help
    /// lists the ops).
    #[arg(
        long = "transform",
        value_name = "FIELD=OP[,OP…]",
        value_parser = FieldTransforms::parse,
        help = transform_help()
    )]
    transforms: Vec<FieldTransforms>,
    /// Instead of the matrix: the remote benchmark (local file against the moto S3
    /// server behind a delaying proxy), written to `remote.json` and `remote.md`.
    #[arg(long)]
    remote: bool,
    /// `--remote`: the delay the proxy adds to each request, in milliseconds.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// `--remote`: the loaders' `prefetch_ahead` values to measure (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [3usize])]
    prefetch_ahead: Vec<usize>,
    /// `--remote`: range requests in flight at most (the remote source's concurrency).
    #[arg(long, default_value_t = ::page_cache::remote::RemoteConfig::default().concurrency)]
    concurrency: usize,
    /// `--remote`: longest range of one request; longer page reads are split.
    #[arg(long, default_value_t = ::page_cache::remote::DEFAULT_PART_BYTES)]
    part_bytes: u64,
    /// `--remote`: timed epochs of each loader (after one warm-up epoch).
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// `--remote`: skip the S3 rows (the moto server is slow: see docs/benchmarking.md).
    #[arg(long)]
    no_s3: bool,
    /// Internal: the measuring child of `--remote` (LOCAL URL...).
    #[arg(long, num_args = 2.., value_names = ["LOCAL", "URL"], hide = true)]
    remote_measure: Vec<String>,
    /// Internal, with `--remote-measure`: the decoder of `image`.
    #[arg(long, hide = true)]
    decoder: Option<String>,
}

/// The help of `--transform`, with the facade's list of ops (so that no copy of it can go
/// stale).
fn transform_help() -> String {
    format!(
        "Run these transforms after the decoder of FIELD on the decoder-only loader rows \
         (`copy`, `rrc64`, `rrc224`) of every data set that has FIELD; those rows' names get \
         `/+FIELD=OPS`. Repeatable; ops: {}",
        ffcv::transform_spec::TRANSFORM_GRAMMAR
    )
}

/// `<workspace>/target/bench`, whatever the current directory.
fn default_out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench")
}

/// Row-name filter from `--only`.
struct Filter {
    patterns: Vec<String>,
}

impl Filter {
    fn keeps(&self, name: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| name.contains(p.as_str()))
    }

    /// Whether the suite whose rows are named `SUITE/...` should run: yes unless every
    /// pattern names another suite (`--only reader/random` skips `jit`; `--only 128k`
    /// runs every suite and keeps the matching rows).
    fn runs_suite(&self, suite: &str) -> bool {
        self.patterns.is_empty()
            || self.patterns.iter().any(|pattern| {
                SUITES
                    .iter()
                    .find(|name| pattern.starts_with(*name))
                    .is_none_or(|name| *name == suite)
            })
    }
}

/// The suites, by the first segment of their row names.
const SUITES: [&str; 4] = ["reader", "loader", "page-cache", "jit"];

fn progress(message: &str) {
    eprintln!("bench: {message}");
}

fn run(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    std::fs::create_dir_all(&out_dir)
        .map_err(|err| format!("cannot create {}: {err}", out_dir.display()))?;
    // `<crate>/../../target/bench` reads better resolved.
    let out_dir = out_dir.canonicalize().unwrap_or(out_dir);
    let filter = Filter {
        patterns: args.only.clone(),
    };
    let transforms = RowTransforms::new(&args.transforms);
    let machine = Machine::current();
    let threads = machine.cpus;
    progress(&format!(
        "{} CPUs ({}); data sets and results in {}",
        machine.cpus,
        machine.model,
        out_dir.display()
    ));
    let mut rows: Vec<Row> = Vec::new();

    // reader/*: every data set, reader beside memcpy. A pattern such as `128k` selects rows
    // by name, so every data set is considered and rows are filtered before measuring.
    for recipe in datasets::small() {
        if !reader::row_names(recipe.label)
            .iter()
            .any(|name| filter.keeps(name))
        {
            continue;
        }
        let dataset = datasets::ensure(&out_dir, &recipe, &progress)?;
        rows.extend(reader::rows(
            &dataset,
            READER_REPS,
            threads,
            &|name| filter.keeps(name),
            &|name| progress(&format!("measuring {name}")),
        )?);
    }

    // loader/*: the ffcv Loader end to end over the same data sets.
    for recipe in datasets::small() {
        if !loader_matrix::row_names_with(recipe.label, &transforms)
            .iter()
            .any(|name| filter.keeps(name))
        {
            continue;
        }
        let dataset = datasets::ensure(&out_dir, &recipe, &progress)?;
        rows.extend(loader_matrix::rows(
            &dataset,
            &transforms,
            &|name| filter.keeps(name),
            &progress,
        )?);
    }
    // loader/resume/*: taking a state after every batch, on the 3k data set.
    for recipe in datasets::small() {
        let name = resume::row_name(recipe.label);
        if recipe.label != "3k" || !filter.keeps(&name) {
            continue;
        }
        let dataset = datasets::ensure(&out_dir, &recipe, &progress)?;
        progress(&format!("measuring {name}"));
        match resume::row(&dataset, loader_matrix::batch_size(recipe.label)) {
            Ok(row) => rows.push(row),
            Err(err) => progress(&format!("{name}: skipped: {err}")),
        }
    }
    // loader/mixture/*: a 3-source mixture against one file, on the 3k data set.
    for recipe in datasets::small() {
        let name = mixture::row_name(recipe.label);
        if recipe.label != "3k" || !filter.keeps(&name) {
            continue;
        }
        let dataset = datasets::ensure(&out_dir, &recipe, &progress)?;
        progress(&format!("measuring {name}"));
        match mixture::row(&dataset, loader_matrix::batch_size(recipe.label)) {
            Ok(row) => rows.push(row),
            Err(err) => progress(&format!("{name}: skipped: {err}")),
        }
    }
    // page-cache/* and jit/*: suites that bring their own data.
    if filter.runs_suite("page-cache") {
        progress("measuring page-cache/*");
        let suite_rows = page_cache::rows(&out_dir)?;
        rows.extend(suite_rows.into_iter().filter(|row| filter.keeps(&row.name)));
    }
    if filter.runs_suite("jit") {
        progress("measuring jit/*");
        let suite_rows = jit::rows()?;
        rows.extend(suite_rows.into_iter().filter(|row| filter.keeps(&row.name)));
    }

    if loader_matrix::row_names_with(loader_matrix::JPEG_LABEL, &transforms)
        .iter()
        .any(|name| filter.keeps(name))
    {
        let dataset = loader_matrix::ensure_jpeg(&out_dir, &progress)?;
        rows.extend(loader_matrix::rows(
            &dataset,
            &transforms,
            &|name| filter.keeps(name),
            &progress,
        )?);
    }
    // loader/photos/views/*: two views of each photograph against one.
    if views::row_names().iter().any(|name| filter.keeps(name)) {
        let dataset = loader_matrix::ensure_photos(&out_dir, &progress)?;
        progress("measuring loader/photos/views/*");
        let suite_rows = views::rows(&dataset)?;
        rows.extend(suite_rows.into_iter().filter(|row| filter.keeps(&row.name)));
    }
    if loader_matrix::row_names_with(loader_matrix::PHOTOS_LABEL, &transforms)
        .iter()
        .any(|name| filter.keeps(name))
    {
        let dataset = loader_matrix::ensure_photos(&out_dir, &progress)?;
        rows.extend(loader_matrix::rows(
            &dataset,
            &transforms,
            &|name| filter.keeps(name),
            &progress,
        )?);
    }
    let mut labels: Vec<&str> = datasets::small().iter().map(|r| r.label).collect();
    labels.push(loader_matrix::JPEG_LABEL);
    labels.push(loader_matrix::PHOTOS_LABEL);
    plot::write_svg(&out_dir.join("small.svg"), &rows, &labels)?;

    let report = Report {
        machine,
        args: std::env::args().skip(1).collect(),
        total_seconds: started.elapsed().as_secs_f64(),
        rows,
    };
    let json_path = out_dir.join("small.json");
    let md_path = out_dir.join("small.md");
    let document = serde_json::to_string_pretty(&report.to_json())
        .map_err(|err| format!("cannot format the report: {err}"))?;
    std::fs::write(&json_path, format!("{document}\n"))
        .map_err(|err| format!("cannot write {}: {err}", json_path.display()))?;
    std::fs::write(&md_path, report.markdown())
        .map_err(|err| format!("cannot write {}: {err}", md_path.display()))?;

    if args.json {
        eprint!("{}", report.table());
        println!("{document}");
    } else {
        print!("{}", report.table());
    }
    if let Some(old_path) = &args.compare {
        let text = std::fs::read_to_string(old_path)
            .map_err(|err| format!("cannot read {}: {err}", old_path.display()))?;
        let old: serde_json::Value = serde_json::from_str(&text)
            .map_err(|err| format!("{}: not a bench report: {err}", old_path.display()))?;
        let comparison = report::compare(&old, &report.rows)
            .map_err(|err| format!("{}: {err}", old_path.display()))?;
        eprintln!("\ncompared with {}:", old_path.display());
        if args.json {
            eprint!("{comparison}");
        } else {
            print!("{comparison}");
        }
    }
    progress(&format!(
        "wrote {} and {} ({} rows, {:.1} s)",
        json_path.display(),
        md_path.display(),
        report.rows.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// `--remote`: the remote benchmark's rows, written beside the matrix's files.
fn run_remote(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let out_dir = args.out.clone().unwrap_or_else(default_out_dir);
    std::fs::create_dir_all(&out_dir)
        .map_err(|err| format!("cannot create {}: {err}", out_dir.display()))?;
    let out_dir = out_dir.canonicalize().unwrap_or(out_dir);
    let bench = remote::RemoteBench {
        latency: std::time::Duration::from_millis(args.latency_ms),
        prefetch_ahead: args.prefetch_ahead.clone(),
        concurrency: args.concurrency,
        part_bytes: args.part_bytes,
        epochs: args.epochs,
        s3: !args.no_s3,
    };
    let rows = remote::rows(&out_dir, &bench, &progress)?;
    if rows.is_empty() {
        return Ok(());
    }
    let report = Report {
        machine: Machine::current(),
        args: std::env::args().skip(1).collect(),
        total_seconds: started.elapsed().as_secs_f64(),
        rows,
    };
    let json_path = out_dir.join("remote.json");
    let document = serde_json::to_string_pretty(&report.to_json())
        .map_err(|err| format!("cannot format the report: {err}"))?;
    std::fs::write(&json_path, format!("{document}\n"))
        .map_err(|err| format!("cannot write {}: {err}", json_path.display()))?;
    std::fs::write(out_dir.join("remote.md"), report.markdown())
        .map_err(|err| format!("cannot write remote.md: {err}"))?;
    if args.json {
        println!("{document}");
    }
    print!("{}", report.table());
    for row in &report.rows {
        if row.ratio.is_some() {
            let get = |k: &str| {
                row.extra
                    .get(k)
                    .and_then(|v| v.as_f64())
                    .unwrap_or(f64::NAN)
            };
            println!(
                "{}: {:.1} % of local; read amplification {:.3}, {:.2} requests per page, \
                 {:.1} requests in flight on average (peak {}), {:.1} ms per request",
                row.name,
                100.0 * row.ratio.unwrap_or(0.0),
                get("read_amplification"),
                get("requests_per_page"),
                get("mean_requests_in_flight"),
                get("peak_requests_in_flight"),
                1e3 * get("mean_request_seconds"),
            );
        }
    }
    progress(&format!(
        "wrote {} ({:.1} s)",
        json_path.display(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let [local, urls @ ..] = args.remote_measure.as_slice() {
        let measure = remote::MeasureArgs {
            local: PathBuf::from(local),
            urls: urls.to_vec(),
            decoder: args.decoder.clone(),
            prefetch_ahead: args.prefetch_ahead.first().copied().unwrap_or(3),
            concurrency: args.concurrency,
            part_bytes: args.part_bytes,
            epochs: args.epochs,
        };
        return match remote::measure(&measure) {
            Ok(figures) => {
                println!("{figures}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("bench: error: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if args.remote {
        return match run_remote(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("bench: error: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if !args.small {
        progress("no matrix size given; running the small matrix (--small)");
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench: error: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Args, Filter};
    use clap::Parser;

    #[test]
    fn transform_is_repeatable_and_a_bad_op_string_is_a_usage_error() {
        let args = Args::try_parse_from([
            "ffcv-bench",
            "--small",
            "--transform",
            "image=flip,chw",
            "--transform",
            "label=convert:f32",
        ])
        .unwrap();
        let given: Vec<String> = args.transforms.iter().map(|t| format!("{t:?}")).collect();
        assert_eq!(given, ["image=flip,chw", "label=convert:f32"]);
        assert!(
            Args::try_parse_from(["ffcv-bench"])
                .unwrap()
                .transforms
                .is_empty()
        );

        let err =
            Args::try_parse_from(["ffcv-bench", "--transform", "image=flip,blur"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("unknown op \"blur\""), "{text}");
        assert!(text.contains("normalize:imagenet"), "{text}");
    }

    #[test]
    fn the_transform_help_lists_the_facades_ops() {
        use clap::CommandFactory;
        let command = Args::command();
        let help = command
            .get_arguments()
            .find(|a| a.get_id() == "transforms")
            .and_then(|a| a.get_help())
            .unwrap()
            .to_string();
        assert!(
            help.contains(ffcv::transform_spec::TRANSFORM_GRAMMAR),
            "{help}"
        );
    }

    fn filter(patterns: &[&str]) -> Filter {
        Filter {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn only_selects_rows_by_substring_and_suites_by_their_name() {
        let all = filter(&[]);
        assert!(all.keeps("jit/fused") && all.runs_suite("jit"));

        let reader = filter(&["reader/random"]);
        assert!(reader.keeps("reader/random/3k/1t"));
        assert!(!reader.keeps("reader/sequential/3k/1t"));
        assert!(reader.runs_suite("reader") && !reader.runs_suite("jit"));

        let size = filter(&["128k"]);
        assert!(size.runs_suite("page-cache") && size.runs_suite("jit"));
        assert!(size.keeps("page-cache/os/random/128k") && !size.keeps("jit/fused"));

        let two = filter(&["jit", "page-cache/os"]);
        assert!(two.runs_suite("jit") && two.runs_suite("page-cache") && !two.runs_suite("loader"));
    }
}
