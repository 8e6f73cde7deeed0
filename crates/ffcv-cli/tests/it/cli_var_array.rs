//! `ffcv write synthetic --var-rows N`: every kind gains a `boxes` VarArrayField whose rows
//! (0 to N per sample) are the generator's, the other fields unchanged; the lengths are
//! deterministic; the default loader reads it back padded.

use crate::support;

use beton_io::{FieldType, FieldValue, NumpyDtype, Reader, VarArrayArgs};
use ffcv_cli::synthetic::{Kind, Spec, VAR_ARRAY_FIELD};
use support::ffcv;

fn write(out: &std::path::Path, extra: &[&str]) {
    let mut args = vec![
        "write",
        "synthetic",
        out.to_str().unwrap(),
        "--kind",
        "scalars",
        "--samples",
        "90",
        "--seed",
        "5",
        "--page-size",
        "2MiB",
    ];
    args.extend_from_slice(extra);
    let run = ffcv(&args);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

#[test]
fn var_rows_add_a_box_field_with_the_generators_rows() {
    let dir = tempfile::tempdir().unwrap();
    let [plain, var, again] =
        ["plain", "var", "again"].map(|n| dir.path().join(format!("{n}.beton")));
    write(&plain, &[]);
    write(&var, &["--var-rows", "6", "--workers", "1"]);
    write(&again, &["--var-rows", "6", "--workers", "1"]);
    assert_eq!(std::fs::read(&var).unwrap(), std::fs::read(&again).unwrap());

    let spec = Spec {
        seed: 5,
        var_rows: Some(6),
        ..Spec::new(Kind::Scalars)
    };
    let r = Reader::open(&var).unwrap();
    let p = Reader::open(&plain).unwrap();
    assert_eq!(r.fields()[2].name, VAR_ARRAY_FIELD);
    assert_eq!(
        r.fields()[2].field_type,
        FieldType::VarArray(VarArrayArgs::new(NumpyDtype::f32(), vec![4]).unwrap())
    );
    let mut counts = [0usize; 7];
    for i in 0..90 {
        let rows = spec.var_array(i);
        let bytes: Vec<u8> = rows.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            r.value(i, 2).unwrap(),
            FieldValue::NdArray(bytes),
            "sample {i}"
        );
        counts[rows.len() / 4] += 1;
        // The other fields are those of the file written without the flag.
        assert_eq!(
            r.read_sample(i).unwrap()[..2],
            p.read_sample(i).unwrap()[..],
            "{i}"
        );
    }
    assert!(
        counts.iter().all(|&c| c > 0),
        "every K in 0..=6 occurs: {counts:?}"
    );
}

#[test]
fn var_rows_out_of_range_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.beton");
    let run = ffcv([
        "write",
        "synthetic",
        out.to_str().unwrap(),
        "--kind",
        "scalars",
        "--samples",
        "3",
        "--var-rows",
        "1048577",
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--var-rows"), "{}", run.stderr);
}
