//! Field types beyond FFCV's own reach the loader through beton-io alone: a
//! `FixedBytesField` is decoded by its default decoder (batch-wide copies and the
//! per-sample path alike), and a custom field written and read through a `CustomHandler`
//! is decoded by the decoder the user gives it, from the bytes its handler locates.

use std::borrow::Cow;
use std::sync::Arc;

use ffcv::decode::{DecoderOutput, FieldInfo, FixedBytesDecoder, SampleInput};
use ffcv::format::{
    ByteOrder, CustomHandler, DatasetWriter, Extent, ExtentRule, FieldSpec, FieldType, FieldValue,
    NumpyDtype, NumpyKind, Reader, ReaderOptions, StoredLen,
};
use ffcv::{Decoder, DecoderChoice, Error, Loader, Order, OutputKind, PipelineSpec};

const N: u64 = 53;

fn digest(i: u64) -> Vec<u8> {
    (0..6).map(|k| (i * 13 + k * 5) as u8).collect()
}

/// The batches' sample ids and `digest` bytes of one sequential epoch.
fn digests(path: &std::path::Path, choice: DecoderChoice, os_cache: bool) -> Vec<(u64, Vec<u8>)> {
    let mut loader = Loader::builder(path)
        .batch_size(8)
        .num_workers(2)
        .os_cache(os_cache)
        .drop_last(false)
        .order(Order::Sequential)
        .decoder("digest", choice)
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in loader.iter() {
        let batch = batch.unwrap();
        let out = batch.output("digest").unwrap();
        assert!(out.lengths().is_none(), "full rows carry no lengths");
        for (k, &id) in batch.sample_ids().iter().enumerate() {
            rows.push((id, out.bytes()[k * 6..(k + 1) * 6].to_vec()));
        }
    }
    rows
}

/// [`FixedBytesDecoder`] without its copy rule: the loader calls `decode` per sample.
struct PerSample;

impl Decoder for PerSample {
    fn name(&self) -> String {
        "PerSample".into()
    }
    fn declare(&self, f: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        FixedBytesDecoder.declare(f)
    }
    fn decode(
        &self,
        i: &SampleInput<'_>,
        o: &mut [u8],
        s: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        FixedBytesDecoder.decode(i, o, s)
    }
}

#[test]
fn fixed_bytes_fields_decode_to_their_stored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.beton");
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("digest", FieldType::FixedBytes(6)),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..N)
        .map(|i| vec![FieldValue::Int(i as i64), FieldValue::Bytes(digest(i))])
        .collect();
    DatasetWriter::new(&path, fields)
        .unwrap()
        .write(&samples)
        .unwrap();
    let want: Vec<(u64, Vec<u8>)> = (0..N).map(|i| (i, digest(i))).collect();
    for os_cache in [true, false] {
        assert_eq!(digests(&path, DecoderChoice::Default, os_cache), want);
        let per_sample = DecoderChoice::Decoder(Arc::new(PerSample));
        assert_eq!(digests(&path, per_sample, os_cache), want);
    }
}

/// Metadata `{ptr: u64, len: u32, tag: u32}`; the value is `tag (4 bytes LE), payload`.
/// The handler locates the payload itself (`Computed`), since the length is a u32.
#[derive(Debug)]
struct Tagged;

impl CustomHandler for Tagged {
    fn metadata_layout(&self) -> (u64, u64) {
        (16, 1)
    }
    fn extent_rule(&self) -> ExtentRule {
        ExtentRule::Computed
    }
    fn extent(&self, m: &[u8]) -> Result<Option<Extent>, ffcv::ExtensionError> {
        Ok(Some(Extent {
            ptr: u64::from_le_bytes(m[..8].try_into().unwrap()),
            len: StoredLen::Bytes(u32::from_le_bytes(m[8..12].try_into().unwrap()).into()),
        }))
    }
    fn read(&self, m: &[u8], data: Option<&[u8]>) -> Result<Vec<u8>, ffcv::ExtensionError> {
        Ok([&m[12..16], data.unwrap_or_default()].concat())
    }
    fn payload<'v>(&self, value: &'v [u8]) -> Result<Option<Cow<'v, [u8]>>, ffcv::ExtensionError> {
        value
            .get(4..)
            .map(|p| Some(Cow::Borrowed(p)))
            .ok_or_else(|| "a tagged value starts with its 4-byte tag".into())
    }
    fn write_metadata(
        &self,
        v: &[u8],
        ptr: u64,
        len: u64,
        out: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        out[..8].copy_from_slice(&ptr.to_le_bytes());
        let len = u32::try_from(len).map_err(|_| "payload over 4 GiB".to_string())?;
        out[8..12].copy_from_slice(&len.to_le_bytes());
        out[12..16].copy_from_slice(&v[..4]);
        Ok(())
    }
}

/// The user's decoder of the tagged field: `[tag, sum of the payload bytes]` as two i64.
struct TagSum;

impl Decoder for TagSum {
    fn name(&self) -> String {
        "TagSum".into()
    }
    fn declare(&self, f: &FieldInfo<'_>) -> Result<DecoderOutput, ffcv::ExtensionError> {
        if f.reader.custom_handler(f.index).is_none() {
            return Err("decodes tagged fields".into());
        }
        let i64_le = NumpyDtype::numeric(NumpyKind::Int, 8, ByteOrder::Little).unwrap();
        Ok(DecoderOutput::new(vec![2], i64_le, OutputKind::Array))
    }
    fn decode(
        &self,
        input: &SampleInput<'_>,
        out: &mut [u8],
        _: &mut [u8],
    ) -> Result<(), ffcv::ExtensionError> {
        let tag = u32::from_le_bytes(input.metadata[12..16].try_into().unwrap());
        let sum: u64 = input.data.iter().map(|&b| u64::from(b)).sum();
        out[..8].copy_from_slice(&i64::from(tag).to_ne_bytes());
        out[8..].copy_from_slice(&(sum as i64).to_ne_bytes());
        Ok(())
    }
}

fn tagged_value(i: u64) -> Vec<u8> {
    let tag = (i as u32).wrapping_mul(2_654_435_761);
    let payload = (0..i * 11 % 97).map(|k| (k + i) as u8);
    tag.to_le_bytes().into_iter().chain(payload).collect()
}

#[test]
fn a_custom_field_is_decoded_by_the_users_decoder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.beton");
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::custom("tagged", Arc::new(Tagged)),
    ];
    let samples: Vec<Vec<FieldValue>> = (0..N)
        .map(|i| {
            vec![
                FieldValue::Int(i as i64),
                FieldValue::Custom(tagged_value(i)),
            ]
        })
        .collect();
    DatasetWriter::new(&path, fields)
        .unwrap()
        .write(&samples)
        .unwrap();
    let options = ReaderOptions::new().custom_handler("tagged", Arc::new(Tagged));
    let reader = Arc::new(Reader::open_with(&path, &options).unwrap());
    assert_eq!(
        reader.value(7, 1).unwrap(),
        FieldValue::Custom(tagged_value(7))
    );

    // Without a decoder the custom field has none to fall back on.
    let e = Loader::builder(&path)
        .reader(Arc::clone(&reader))
        .batch_size(4)
        .build()
        .unwrap_err();
    assert!(
        matches!(&e, Error::NoDecoder { field, .. } if field == "tagged"),
        "{e:?}"
    );

    for os_cache in [true, false] {
        let mut loader = Loader::builder(&path)
            .reader(Arc::clone(&reader))
            .batch_size(10)
            .num_workers(2)
            .os_cache(os_cache)
            .drop_last(false)
            .order(Order::Random)
            .seed(3)
            .pipeline("tagged", PipelineSpec::new(TagSum))
            .build()
            .unwrap();
        let mut seen = vec![0u32; N as usize];
        for batch in loader.iter() {
            let batch = batch.unwrap();
            let out = batch.output("tagged").unwrap();
            let words: Vec<i64> = out
                .bytes()
                .chunks_exact(8)
                .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
                .collect();
            for (k, &id) in batch.sample_ids().iter().enumerate() {
                let v = tagged_value(id);
                let tag = u32::from_le_bytes(v[..4].try_into().unwrap());
                let sum: u64 = v[4..].iter().map(|&b| u64::from(b)).sum();
                assert_eq!(words[2 * k], i64::from(tag), "sample {id}");
                assert_eq!(words[2 * k + 1], sum as i64, "sample {id}");
                seen[id as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "every sample exactly once");
    }
}
