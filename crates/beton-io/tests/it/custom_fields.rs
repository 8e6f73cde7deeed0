//! Custom fields (FFCV's custom `Field` subclasses, type id 255) are written and read
//! through a registered `CustomHandler`: their values round-trip, their stored bytes are
//! located by the handler and checked against the allocation table at open, and without
//! a handler they are refused on both sides.

use std::borrow::Cow;
use std::sync::Arc;

use beton_io::{
    CustomHandler, DatasetWriter, Error, ExtensionError, Extent, ExtentRule, FieldSpec, FieldType,
    FieldValue, Reader, ReaderOptions, StoredLen,
};

/// A value is `[tag, payload...]`: the payload goes to a page, the tag stays in the
/// metadata `{ptr: u64, len: u64, tag: u8}` (17 bytes, packed). With `computed` the
/// handler locates the payload itself instead of declaring the `Sized` rule.
#[derive(Debug)]
struct Tagged {
    computed: bool,
}

impl CustomHandler for Tagged {
    fn class_name(&self) -> &str {
        "TaggedField"
    }
    fn metadata_layout(&self) -> (u64, u64) {
        (17, 1)
    }
    fn extent_rule(&self) -> ExtentRule {
        if self.computed {
            ExtentRule::Computed
        } else {
            ExtentRule::Sized
        }
    }
    fn extent(&self, m: &[u8]) -> Result<Option<Extent>, ExtensionError> {
        let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
        Ok(Some(Extent {
            ptr: word(0),
            len: StoredLen::Bytes(word(8)),
        }))
    }
    fn read(&self, m: &[u8], data: Option<&[u8]>) -> Result<Vec<u8>, ExtensionError> {
        let mut v = vec![m[16]];
        v.extend_from_slice(data.ok_or("no stored bytes")?);
        Ok(v)
    }
    fn payload<'v>(&self, value: &'v [u8]) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        match value {
            [] => Err("a tagged value needs its tag byte".into()),
            [_, rest @ ..] => Ok(Some(Cow::Borrowed(rest))),
        }
    }
    fn write_metadata(
        &self,
        v: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ExtensionError> {
        out[0..8].copy_from_slice(&ptr.to_le_bytes());
        out[8..16].copy_from_slice(&len.to_le_bytes());
        out[16] = v[0];
        Ok(())
    }
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![i as u8 ^ 0x5a];
    v.extend((0..i * 37 % 300).map(|k| (k * 7 + i) as u8));
    v
}

fn samples(n: u64) -> Vec<Vec<FieldValue>> {
    (0..n)
        .map(|i| vec![FieldValue::Int(i as i64 * 3), FieldValue::Custom(value(i))])
        .collect()
}

fn write(path: &std::path::Path, handler: Arc<dyn CustomHandler>, n: u64) {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::custom("tagged", handler),
    ];
    DatasetWriter::new(path, fields)
        .unwrap()
        .with_num_workers(1)
        .write(&samples(n))
        .unwrap();
}

#[test]
fn a_custom_field_round_trips_through_its_handler() {
    for computed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("custom.beton");
        let handler: Arc<dyn CustomHandler> = Arc::new(Tagged { computed });
        write(&path, Arc::clone(&handler), 50);

        let options = ReaderOptions::new().custom_handler("tagged", handler);
        let r = Reader::open_with(&path, &options).unwrap();
        let f = &r.fields()[1];
        assert_eq!(f.type_id, 255);
        assert_eq!(f.field_type, FieldType::Custom);
        assert_eq!(f.metadata_itemsize, 17);
        // Int (8, align 8) then 17 packed bytes: the row is padded to 32.
        assert_eq!(f.metadata_offset, 8);
        assert_eq!(r.layout().metadata_itemsize, 32);
        assert!(r.stores_data(1));
        assert_eq!(
            r.extent_rule(1),
            if computed {
                ExtentRule::Computed
            } else {
                ExtentRule::Sized
            }
        );
        for i in 0..50 {
            let v = value(i);
            assert_eq!(r.field_data(i, 1).unwrap().unwrap(), &v[1..]);
            assert_eq!(r.metadata_bytes(i, 1).unwrap()[16], v[0]);
            assert_eq!(
                r.read_sample(i).unwrap(),
                vec![FieldValue::Int(i as i64 * 3), FieldValue::Custom(v)]
            );
        }
    }
}

#[test]
fn the_layout_alone_opens_the_file_but_reads_no_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.beton");
    write(&path, Arc::new(Tagged { computed: false }), 5);
    let r = Reader::open_with(&path, &ReaderOptions::new().custom_field("tagged", 17, 1)).unwrap();
    assert!(!r.stores_data(1));
    assert_eq!(r.field_data(2, 1).unwrap(), None);
    assert_eq!(r.metadata_bytes(2, 1).unwrap()[16], value(2)[0]);
    let e = r.read_sample(2).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidMetadata { sample: 2, field, .. } if field == "tagged"),
        "{e:?}"
    );
}

#[test]
fn without_a_handler_custom_fields_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.beton");
    let e = DatasetWriter::new(&path, vec![FieldSpec::new("x", FieldType::Custom)]).unwrap_err();
    assert!(e.to_string().contains("FieldSpec::custom"), "{e}");

    write(&path, Arc::new(Tagged { computed: false }), 5);
    let e = Reader::open(&path).unwrap_err();
    assert!(
        matches!(&e, Error::MissingCustomHandler { index: 1, name, .. } if name == "tagged"),
        "{e:?}"
    );
}

#[test]
fn a_value_the_handler_refuses_names_sample_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.beton");
    let fields = vec![FieldSpec::custom(
        "tagged",
        Arc::new(Tagged { computed: false }),
    )];
    let mut s: Vec<Vec<FieldValue>> = (0..4).map(|i| vec![FieldValue::Custom(value(i))]).collect();
    s[3] = vec![FieldValue::Custom(Vec::new())];
    let w = DatasetWriter::new(&path, fields)
        .unwrap()
        .with_num_workers(1);
    let e = w.write(&s).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidValue { sample: 3, field, reason, .. }
            if field == "tagged" && reason.contains("tag byte")),
        "{e:?}"
    );
    s[3] = vec![FieldValue::Int(1)];
    let e = w.write(&s).unwrap_err();
    assert!(
        e.to_string()
            .contains("a Int value for a TaggedField field"),
        "{e}"
    );
    assert!(!path.exists());
}

#[test]
fn a_handler_extent_outside_the_allocations_is_refused_at_open() {
    for computed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("custom.beton");
        let handler: Arc<dyn CustomHandler> = Arc::new(Tagged { computed });
        write(&path, Arc::clone(&handler), 5);
        let options = ReaderOptions::new().custom_handler("tagged", handler);
        let good = std::fs::read(&path).unwrap();
        let r = Reader::open_with(&path, &options).unwrap();
        // Sample 4's len word (field offset 8, bytes 8..16 of the field).
        let at = (r.layout().metadata_offset + 4 * 32 + 8 + 8) as usize;
        let mut bad = good.clone();
        bad[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let e = Reader::from_vec("x", bad, &options).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidMetadata { sample: 4, field, reason, .. }
                if field == "tagged" && reason.contains("allocation there has")),
            "{e:?}"
        );
        let mut bad = good;
        bad[at - 8..at].copy_from_slice(&3u64.to_le_bytes());
        let e = Reader::from_vec("x", bad, &options).unwrap_err();
        assert!(
            e.to_string()
                .contains("data pointer 3 starts no allocation-table row"),
            "{e}"
        );
    }
}

#[test]
fn a_handler_whose_rule_reads_past_its_metadata_is_refused() {
    #[derive(Debug)]
    struct Short;
    impl CustomHandler for Short {
        fn metadata_layout(&self) -> (u64, u64) {
            (4, 4)
        }
        fn extent_rule(&self) -> ExtentRule {
            ExtentRule::Fixed { len: 1 }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.beton");
    write(&path, Arc::new(Tagged { computed: false }), 2);
    let options = ReaderOptions::new().custom_handler("tagged", Arc::new(Short));
    let e = Reader::open_with(&path, &options).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidFieldArguments { index: 1, reason, .. }
            if reason.contains("fewer than the 8")),
        "{e:?}"
    );
}
