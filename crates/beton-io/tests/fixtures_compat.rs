//! Every FFCV 1.0.2 fixture opens and reproduces the facts recorded in its expected.json.

use beton_io::Reader;
use serde_json::Value;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/ffcv-1.0.2"
);
const NAMES: [&str; 7] = [
    "scalars",
    "bytes_ndarray",
    "json",
    "images_raw",
    "images_jpg",
    "multipage",
    "page_retry",
];

fn load(name: &str) -> (Reader, Value) {
    let reader = Reader::open(format!("{FIXTURES}/{name}.beton")).unwrap();
    let text = std::fs::read_to_string(format!("{FIXTURES}/{name}.expected.json")).unwrap();
    (reader, serde_json::from_str(&text).unwrap())
}

#[test]
fn header_and_layout_match() {
    for name in NAMES {
        let (r, e) = load(name);
        let h = &e["header"];
        assert_eq!(
            u64::from(r.header().version),
            h["version"].as_u64().unwrap()
        );
        assert_eq!(
            u64::from(r.header().num_fields),
            h["num_fields"].as_u64().unwrap()
        );
        assert_eq!(r.page_size(), h["page_size"].as_u64().unwrap());
        assert_eq!(r.num_samples(), h["num_samples"].as_u64().unwrap());
        assert_eq!(
            r.header().alloc_table_ptr,
            h["alloc_table_ptr"].as_u64().unwrap()
        );
        let l = &e["layout"];
        assert_eq!(
            r.layout().metadata_offset,
            l["metadata_offset"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            r.layout().metadata_itemsize,
            l["metadata_itemsize"].as_u64().unwrap()
        );
        assert_eq!(
            r.layout().metadata_size,
            l["metadata_size"].as_u64().unwrap()
        );
        assert_eq!(
            r.layout().data_region_start,
            l["data_region_start"].as_u64().unwrap()
        );
        assert_eq!(
            r.layout().alloc_table_rows,
            l["alloc_table_rows"].as_u64().unwrap()
        );
        assert_eq!(r.file_size(), e["file_size"].as_u64().unwrap());
    }
}
