//! `ffcv inspect` on every FFCV 1.0.2 fixture reports the recorded header, layout and fields.

use crate::support;

use serde_json::Value;
use support::{FIXTURES, expected, ffcv, fixture};

#[test]
fn inspect_json_reports_the_recorded_header_layout_and_fields() {
    for name in FIXTURES {
        let got = ffcv([
            "inspect".as_ref(),
            "--json".as_ref(),
            fixture(name).as_os_str(),
        ])
        .json();
        let want = expected(name);
        for key in [
            "version",
            "num_fields",
            "page_size",
            "num_samples",
            "alloc_table_ptr",
        ] {
            assert_eq!(got[key], want["header"][key], "{name}: header.{key}");
        }
        for key in [
            "metadata_offset",
            "metadata_itemsize",
            "metadata_size",
            "data_region_start",
            "alloc_table_rows",
        ] {
            assert_eq!(got[key], want["layout"][key], "{name}: layout.{key}");
        }
        assert_eq!(got["file_size"], want["file_size"], "{name}: file_size");

        let got_fields = got["fields"].as_array().expect("fields is a list");
        let want_fields = want["fields"].as_array().unwrap();
        let writer_fields = want["writer"]["fields"].as_array().unwrap();
        assert_eq!(
            got_fields.len(),
            want_fields.len(),
            "{name}: number of fields"
        );
        for ((got_field, want_field), writer_field) in
            got_fields.iter().zip(want_fields).zip(writer_fields)
        {
            let field = want_field["name"].as_str().unwrap();
            assert_eq!(got_field["name"], want_field["name"], "{name}");
            assert_eq!(
                got_field["type_id"], want_field["type_id"],
                "{name}.{field}"
            );
            assert_eq!(got_field["type"], want_field["type_name"], "{name}.{field}");
            assert_eq!(
                got_field["metadata_offset"], want_field["metadata_offset"],
                "{name}.{field}"
            );
            assert_eq!(
                got_field["metadata_itemsize"], want_field["metadata_itemsize"],
                "{name}.{field}"
            );
            if writer_field["class"] == "NDArrayField" {
                assert_eq!(
                    got_field["dtype"], writer_field["params"]["dtype"],
                    "{name}.{field}"
                );
                assert_eq!(
                    got_field["shape"], writer_field["params"]["shape"],
                    "{name}.{field}"
                );
            } else {
                assert!(
                    got_field.get("dtype").is_none(),
                    "{name}.{field} has no dtype"
                );
            }
        }

        // Pages that hold sample data: exactly the pages the fixture's page map lists.
        let data_pages = want["pages"]["page_to_samples"]
            .as_object()
            .map_or(0, |pages| pages.len());
        assert_eq!(
            got["data_pages"],
            Value::from(data_pages),
            "{name}: data_pages"
        );
    }
}

#[test]
fn inspect_table_names_every_field_and_the_sample_count() {
    for name in FIXTURES {
        let run = ffcv(["inspect".as_ref(), fixture(name).as_os_str()]);
        assert_eq!(run.code, Some(0), "{name}: {}", run.stderr);
        let want = expected(name);
        let samples_line = format!("samples       {}", want["header"]["num_samples"]);
        assert!(run.stdout.contains(&samples_line), "{name}: {}", run.stdout);
        for field in want["fields"].as_array().unwrap() {
            let row = format!(" {} ", field["name"].as_str().unwrap());
            assert!(
                run.stdout.contains(&row),
                "{name}: no row for {row} in {}",
                run.stdout
            );
        }
    }
}
