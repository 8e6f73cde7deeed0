//! The `ffcv` command line: inspect, dump, order, write, bench and doctor for FFCV `.beton`
//! files.
//!
//! Exit status: 0 on success, 1 on a runtime error (one line on stderr, `ffcv: error: ...`,
//! naming the file and what is wrong), 2 on a usage error (clap's message).

mod byte_size;
mod cache_args;
mod commands;
mod dataset_args;
mod error;
mod loader_args;
mod mix_args;
mod numeric_flags;
mod pipeline_args;
mod process_counters;
mod state_file;

use std::error::Error as StdError;
use std::io::ErrorKind;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// Work with FFCV .beton datasets.
#[derive(Parser, Debug)]
#[command(name = "ffcv", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a file's header, layout and fields.
    Inspect(commands::inspect::InspectArgs),
    /// Print every sample as one JSON line, each field decoded.
    Dump(commands::dump::DumpArgs),
    /// Print one epoch's sample order as a JSON array.
    Order(commands::order::OrderArgs),
    /// Write a .beton file.
    Write(commands::write::WriteArgs),
    /// Measure the loader: samples/s, latency, memory, where the time went.
    Bench(commands::bench::BenchArgs),
    /// Find what limits the loader here and recommend settings (bounded by --time-budget).
    Doctor(commands::doctor::DoctorArgs),
}

type AnyError = Box<dyn StdError + Send + Sync>;

fn run(cli: &Cli) -> Result<(), AnyError> {
    match &cli.command {
        Command::Doctor(args) => commands::doctor::run(args)?,
        Command::Inspect(args) => commands::inspect::run(args)?,
        Command::Dump(args) => commands::dump::run(args)?,
        Command::Order(args) => commands::order::run(args)?,
        Command::Write(args) => commands::write::run(args)?,
        Command::Bench(args) => commands::bench::run(args)?,
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => exit_on_parse_error(&err),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FFCV_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // With `FFCV_LOG=ffcv=debug`, each closed span (fill, slot_wait, consumer_wait,
        // slot_stage, page loads) prints its busy and idle time: the loader's timeline.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
    // Fetched inputs and outputs not uploaded (`ffcv write` with URLs) go when the hold
    // is dropped, after the command.
    let staged = ffcv_ingest::object_io::Staged::hold();
    let result = run(&cli);
    drop(staged);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `ffcv dump FILE | head` closes the pipe early: that is the reader's choice, not an error.
        Err(err) if is_broken_pipe(err.as_ref()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ffcv: error: {}", one_line(err.as_ref()));
            if matches!(err.downcast_ref::<CliError>(), Some(CliError::Usage(_))) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `--help` and `--version` print as clap renders them (exit 0); a usage error prints as one
/// line on stderr (exit 2), so that scripts and logs get the whole message on a line.
fn exit_on_parse_error(err: &clap::Error) -> ! {
    use clap::error::ErrorKind as Kind;
    if matches!(
        err.kind(),
        Kind::DisplayHelp | Kind::DisplayVersion | Kind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        err.exit();
    }
    let rendered = err.render().to_string();
    let line: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    eprintln!("{}", line.join(" "));
    std::process::exit(2);
}

fn is_broken_pipe(err: &(dyn StdError + 'static)) -> bool {
    matches!(err.downcast_ref::<CliError>(), Some(CliError::Stdout(io)) if io.kind() == ErrorKind::BrokenPipe)
}

/// The error and its causes on one line; a cause already quoted by its parent is not repeated.
fn one_line(err: &(dyn StdError + 'static)) -> String {
    ffcv::message_with_causes(err).replace(['\n', '\r'], " ")
}
