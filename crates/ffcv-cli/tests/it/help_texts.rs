//! What `--help` shows for the flags several commands share: `ffcv bench` and `ffcv doctor`
//! render every loader flag identically, and the `--decoder` and `--transform` help of
//! each command quotes the facade's lists of decoders and ops
//! ([`ffcv::DecoderChoice::GRAMMAR`], [`ffcv::transform_spec::TRANSFORM_GRAMMAR`]), so that
//! a decoder or op added there shows up in the help without a hand-made copy.

use std::collections::BTreeMap;

use crate::support::ffcv;

/// The loader flags both commands take, with the process-cache flags.
const LOADER_FLAGS: [&str; 25] = [
    "--batch-size",
    "--num-workers",
    "--order",
    "--no-os-cache",
    "--seed",
    "--batches-ahead",
    "--no-drop-last",
    "--recompile",
    "--no-compile",
    "--max-memory",
    "--reader-threads",
    "--prefetch-ahead",
    "--direct-io",
    "--no-retain-pages",
    "--hold-all-pages",
    "--quasi-buffer-pages",
    "--page-cache-dir",
    "--page-cache-size",
    "--max-image-pixels",
    "--world-size",
    "--rank",
    "--decoder",
    "--transform",
    "--device",
    "--help",
];

/// `ffcv COMMAND --help` as one block of text per flag (its lines joined by single spaces,
/// so that wrapping does not matter), keyed by the long flag.
fn flag_blocks(command: &str) -> BTreeMap<String, String> {
    let run = ffcv([command, "--help"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut blocks = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in run.stdout.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let long = trimmed
            .split([' ', ','])
            .find(|word| word.starts_with("--"))
            .filter(|_| indent <= 6 && trimmed.starts_with('-'));
        if let Some(flag) = long {
            if let Some((name, text)) = current.take() {
                blocks.insert(name, text.join(" "));
            }
            current = Some((flag.to_owned(), vec![trimmed.to_owned()]));
        } else if let Some((_, text)) = current.as_mut()
            && !trimmed.is_empty()
        {
            text.push(trimmed.to_owned());
        }
    }
    if let Some((name, text)) = current {
        blocks.insert(name, text.join(" "));
    }
    blocks
}

/// `text` with every run of whitespace made one space.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn bench_and_doctor_show_the_same_loader_flags() {
    let bench = flag_blocks("bench");
    let doctor = flag_blocks("doctor");
    for flag in LOADER_FLAGS {
        let (Some(b), Some(d)) = (bench.get(flag), doctor.get(flag)) else {
            panic!(
                "{flag}: bench has it: {}, doctor: {}",
                bench.contains_key(flag),
                doctor.contains_key(flag)
            );
        };
        assert_eq!(b, d, "{flag}");
    }
}

#[test]
fn decoder_and_transform_help_quote_the_facades_lists() {
    let decoders = squeezed(ffcv::DecoderChoice::GRAMMAR);
    let ops = squeezed(ffcv::transform_spec::TRANSFORM_GRAMMAR);
    for command in ["bench", "doctor", "dump"] {
        let blocks = flag_blocks(command);
        let decoder = blocks.get("--decoder").map(|b| squeezed(b));
        assert!(
            decoder.as_deref().is_some_and(|b| b.contains(&decoders)),
            "ffcv {command} --decoder: {decoder:?}"
        );
        if command != "dump" {
            let transform = blocks.get("--transform").map(|b| squeezed(b));
            assert!(
                transform.as_deref().is_some_and(|b| b.contains(&ops)),
                "ffcv {command} --transform: {transform:?}"
            );
        }
    }
}
