//! Resuming across processes: `ffcv bench --stop-after N --save-state S.json` in one
//! process, `ffcv order --resume S.json` and `ffcv bench --resume S.json` in others;
//! the same world size continues the saved order, another one delivers the rest of the
//! epoch once; bad state files and misfits exit 1 with one line.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use support::{ffcv, fixture, u64s};

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_state_saved_by_one_process_resumes_the_same_order_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.json");
    let file = fixture("multipage");
    let knobs = [
        "--order",
        "quasi-random",
        "--seed",
        "5",
        "--batch-size",
        "4",
    ];
    let saved = ffcv(
        ["bench", s(&file), "--num-workers", "1", "--no-os-cache"]
            .into_iter()
            .chain(knobs)
            .chain(["--stop-after", "3", "--save-state", s(&state), "--json"]),
    )
    .json();
    assert_eq!(saved["batches_consumed"], 3);
    assert_eq!(saved["epoch"], 0);
    let consumed = u64s(&saved["sample_ids"]);
    assert_eq!(consumed.len(), 12);

    let rest = ffcv(
        ["order", s(&file)]
            .into_iter()
            .chain(knobs)
            .chain(["--resume", s(&state)]),
    )
    .json();
    // Without the knobs, `order --resume` takes the order, seed and batch size from the
    // state: the shell-script form `ffcv order FILE --resume S.json`.
    let bare = ffcv(["order", s(&file), "--resume", s(&state)]).json();
    assert_eq!(u64s(&bare), u64s(&rest));
    let whole = ffcv(["order", s(&file)].into_iter().chain(knobs)).json();
    // 40 samples in batches of 4: nothing dropped.
    let mut joined = consumed.clone();
    joined.extend(u64s(&rest));
    assert_eq!(joined, u64s(&whole));

    // A third process continues the loader: the rest of the epoch, then ordinary epochs.
    let resumed = ffcv(
        ["bench", s(&file), "--num-workers", "2"]
            .into_iter()
            .chain(knobs)
            .chain([
                "--resume",
                s(&state),
                "--warmup",
                "0",
                "--epochs",
                "1",
                "--json",
            ]),
    )
    .json();
    assert_eq!(resumed["samples_per_epoch"], 28);
    assert_eq!(resumed["seed"], 5);
}

#[test]
fn a_state_saved_by_two_ranks_is_finished_by_three_each_sample_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("scalars");
    let knobs = [
        "--order",
        "random",
        "--seed",
        "2",
        "--batch-size",
        "8",
        "--world-size",
    ];
    let mut consumed = Vec::new();
    let mut state = None;
    for rank in 0..2 {
        let path = dir.path().join(format!("rank{rank}.json"));
        let rank_text = rank.to_string();
        let saved = ffcv(
            ["bench", s(&file), "--no-drop-last"]
                .into_iter()
                .chain(knobs)
                .chain(["2", "--rank", &rank_text])
                .chain(["--stop-after", "2", "--save-state", s(&path), "--json"]),
        )
        .json();
        consumed.extend(u64s(&saved["sample_ids"]));
        state = Some(path);
    }
    // Rank 1's state alone resumes every new rank.
    let state = state.unwrap();
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for id in consumed {
        *counts.entry(id).or_default() += 1;
    }
    for rank in 0..3 {
        let rank_text = rank.to_string();
        let rest = ffcv(["order", s(&file)].into_iter().chain(knobs).chain([
            "3",
            "--rank",
            &rank_text,
            "--resume",
            s(&state),
        ]))
        .json();
        let rest = u64s(&rest);
        // 100 samples, 32 consumed: 68 left, 23 per new rank (the last pads one).
        assert_eq!(rest.len(), 23, "rank {rank}");
        for id in rest {
            *counts.entry(id).or_default() += 1;
        }
    }
    assert_eq!(counts.len(), 100, "every sample of the epoch");
    let repeats: Vec<u64> = counts
        .iter()
        .filter(|&(_, &c)| c > 1)
        .map(|(&id, _)| id)
        .collect();
    assert_eq!(repeats.len(), 1, "one padding entry: {repeats:?}");
}

#[test]
fn bad_state_files_and_misfits_exit_1_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("scalars");
    let state = dir.path().join("s.json");
    ffcv([
        "bench",
        s(&file),
        "--order",
        "random",
        "--seed",
        "1",
        "--batch-size",
        "10",
        "--stop-after",
        "1",
        "--save-state",
        s(&state),
        "--json",
    ])
    .json();

    let missing = dir.path().join("missing.json");
    ffcv(["order", s(&file), "--resume", s(&missing)])
        .assert_runtime_error("missing.json: cannot read the loader state");

    let text = std::fs::read_to_string(&state).unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 3]).unwrap();
    ffcv(["order", s(&file), "--resume", s(&truncated)]).assert_runtime_error(
        "truncated.json: loader state: not a loader state: the JSON is corrupt or truncated",
    );

    ffcv([
        "order",
        s(&file),
        "--order",
        "sequential",
        "--batch-size",
        "10",
        "--seed",
        "1",
        "--resume",
        s(&state),
    ])
    .assert_runtime_error(
        "cannot resume from this loader state: the state was saved with order random, this \
         loader uses order sequential",
    );
    ffcv([
        "bench",
        s(&file),
        "--order",
        "random",
        "--batch-size",
        "20",
        "--resume",
        s(&state),
    ])
    .assert_runtime_error(
        "cannot resume from this loader state: the state was saved with batch size 10, this \
         loader uses 20",
    );
    let other = fixture("multipage");
    ffcv([
        "order",
        s(&other),
        "--order",
        "random",
        "--batch-size",
        "10",
        "--seed",
        "1",
        "--resume",
        s(&state),
    ])
    .assert_runtime_error("cannot resume from this loader state: the state is from another file");

    // --stop-after needs --save-state: a usage error.
    let run = ffcv(["bench", s(&file), "--stop-after", "2"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
}
