//! A custom field handler that fails with an `ExtensionError` carrying a cause (here the
//! I/O error of a side file it needs) gives the reader's or writer's error with that cause
//! at the end of its chain of sources, at every place a handler is called: the argument
//! check and the extents at open, a value read, a payload and its metadata written. The
//! handler's message is the error's `reason`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_io::{
    CustomHandler, DatasetWriter, Error, ExtensionError, Extent, ExtentRule, FieldSpec, FieldType,
    FieldValue, Reader, ReaderOptions, StoredLen,
};

/// Where a [`NeedsTable`] handler consults its table (and fails when it is missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Arguments,
    Extent,
    Read,
    Payload,
    Metadata,
}

/// Values are stored bytes with metadata `{ptr: u64, len: u64}`, located by the handler
/// (`Computed`, so the reader asks it for every sample at open). In `fails_in` it first
/// reads a side table, which does not exist.
#[derive(Debug)]
struct NeedsTable {
    table: PathBuf,
    fails_in: Option<Step>,
}

impl NeedsTable {
    fn consult(&self, step: Step) -> Result<(), ExtensionError> {
        if self.fails_in == Some(step) {
            std::fs::read(&self.table).map_err(|e| {
                ExtensionError::with_source(format!("cannot read the tag table ({step:?})"), e)
            })?;
        }
        Ok(())
    }
}

impl CustomHandler for NeedsTable {
    fn metadata_layout(&self) -> (u64, u64) {
        (16, 1)
    }
    fn accept_arguments(&self, _: &[u8]) -> Result<(), ExtensionError> {
        self.consult(Step::Arguments)
    }
    fn extent_rule(&self) -> ExtentRule {
        ExtentRule::Computed
    }
    fn extent(&self, m: &[u8]) -> Result<Option<Extent>, ExtensionError> {
        self.consult(Step::Extent)?;
        let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
        Ok(Some(Extent {
            ptr: word(0),
            len: StoredLen::Bytes(word(8)),
        }))
    }
    fn read(&self, _: &[u8], data: Option<&[u8]>) -> Result<Vec<u8>, ExtensionError> {
        self.consult(Step::Read)?;
        Ok(data.unwrap_or_default().to_vec())
    }
    fn payload<'v>(&self, value: &'v [u8]) -> Result<Option<Cow<'v, [u8]>>, ExtensionError> {
        self.consult(Step::Payload)?;
        Ok(Some(Cow::Borrowed(value)))
    }
    fn write_metadata(
        &self,
        _: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ExtensionError> {
        self.consult(Step::Metadata)?;
        out[..8].copy_from_slice(&ptr.to_le_bytes());
        out[8..].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }
}

fn handler(dir: &Path, fails_in: Option<Step>) -> Arc<NeedsTable> {
    Arc::new(NeedsTable {
        table: dir.join("tags.table"),
        fails_in,
    })
}

fn write(path: &Path, handler: Arc<NeedsTable>) -> beton_io::Result<()> {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::custom("tagged", handler),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..6)
        .map(|i| vec![FieldValue::Int(i), FieldValue::Custom(vec![i as u8; 10])])
        .collect();
    DatasetWriter::new(path, fields)?.write(&samples)?;
    Ok(())
}

/// The last error of `e`'s chain of sources, which must be the handler's missing table.
fn assert_ends_in_the_missing_table(e: &Error) {
    let mut last: &(dyn std::error::Error + 'static) = e;
    while let Some(next) = last.source() {
        last = next;
    }
    let io = last
        .downcast_ref::<std::io::Error>()
        .unwrap_or_else(|| panic!("the chain of {e:?} ends in {last:?}"));
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound, "{e:?}");
}

#[test]
fn a_handlers_error_when_writing_keeps_its_io_source() {
    let dir = tempfile::tempdir().unwrap();
    for step in [Step::Payload, Step::Metadata] {
        let path = dir.path().join(format!("{step:?}.beton"));
        let e = write(&path, handler(dir.path(), Some(step))).unwrap_err();
        match &e {
            Error::InvalidValue {
                field,
                reason,
                cause: Some(_),
                ..
            } => {
                assert_eq!(field, "tagged");
                assert_eq!(reason, &format!("cannot read the tag table ({step:?})"));
            }
            other => panic!("{step:?}: {other:?}"),
        }
        assert_ends_in_the_missing_table(&e);
    }
}

#[test]
fn a_handlers_error_when_reading_keeps_its_io_source() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tagged.beton");
    write(&path, handler(dir.path(), None)).unwrap();
    let open = |step| {
        let options = ReaderOptions::new().custom_handler("tagged", handler(dir.path(), step));
        Reader::open_with(&path, &options)
    };
    assert_eq!(
        open(None).unwrap().value(4, 1).unwrap(),
        FieldValue::Custom(vec![4; 10])
    );

    let e = open(Some(Step::Arguments)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidFieldArguments { index: 1, reason, cause: Some(_), .. }
            if reason == "cannot read the tag table (Arguments)"),
        "{e:?}"
    );
    assert_ends_in_the_missing_table(&e);

    let e = open(Some(Step::Extent)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidMetadata { sample: 0, reason, cause: Some(_), .. }
            if reason == "cannot read the tag table (Extent)"),
        "{e:?}"
    );
    assert_ends_in_the_missing_table(&e);

    let reader = open(Some(Step::Read)).unwrap();
    let e = reader.value(4, 1).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidMetadata { sample: 4, reason, cause: Some(_), .. }
            if reason == "cannot read the tag table (Read)"),
        "{e:?}"
    );
    assert_ends_in_the_missing_table(&e);
    assert!(
        e.to_string().contains("cannot read the tag table (Read)"),
        "{e}"
    );
}

#[test]
fn a_handlers_plain_message_has_no_source() {
    #[derive(Debug)]
    struct Refuses;
    impl CustomHandler for Refuses {
        fn metadata_layout(&self) -> (u64, u64) {
            (1, 1)
        }
        fn accept_arguments(&self, _: &[u8]) -> Result<(), ExtensionError> {
            Err("this block is not mine".into())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tagged.beton");
    write(&path, handler(dir.path(), None)).unwrap();
    let options = ReaderOptions::new().custom_handler("tagged", Arc::new(Refuses));
    let e = Reader::open_with(&path, &options).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidFieldArguments { reason, cause: None, .. }
            if reason == "this block is not mine"),
        "{e:?}"
    );
    assert!(std::error::Error::source(&e).is_none());
}
