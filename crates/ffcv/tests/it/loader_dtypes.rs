//! NDArray and TorchTensor fields come out in their stored dtype and shape; typed views
//! check the element type (and byte order), byte views always work.

use ffcv::format::{
    ByteOrder, DatasetWriter, FieldSpec, FieldType, FieldValue, NdArrayArgs, NumpyDtype, NumpyKind,
    from_fn,
};
use ffcv::{Error, Loader};

#[test]
fn torch_tensors_and_big_endian_arrays_keep_their_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dtypes.beton");
    let f64_args = NdArrayArgs::new(
        NumpyDtype::numeric(NumpyKind::Float, 8, ByteOrder::Little).unwrap(),
        vec![2, 3],
    );
    let be_args = NdArrayArgs::new(
        NumpyDtype::numeric(NumpyKind::Int, 2, ByteOrder::Big).unwrap(),
        vec![4],
    );
    DatasetWriter::new(
        &path,
        vec![
            FieldSpec::new("t", FieldType::TorchTensor(f64_args)),
            FieldSpec::new("be", FieldType::NdArray(be_args)),
        ],
    )
    .unwrap()
    .write(&from_fn(10, |i| {
        let t: Vec<u8> = (0..6)
            .flat_map(|k| (i as f64 * 10.0 + k as f64).to_le_bytes())
            .collect();
        let be: Vec<u8> = (0..4)
            .flat_map(|k| (-(i as i16) * 100 - k as i16).to_be_bytes())
            .collect();
        Ok(vec![FieldValue::NdArray(t), FieldValue::NdArray(be)])
    }))
    .unwrap();

    let mut loader = Loader::builder(&path)
        .batch_size(4)
        .drop_last(false)
        .num_workers(2)
        .build()
        .unwrap();
    let outputs = loader.outputs();
    assert_eq!(outputs[0].dtype.descr(), "<f8");
    assert_eq!(outputs[0].shape, vec![2, 3]);
    assert_eq!(outputs[1].dtype.descr(), ">i2");
    assert_eq!(outputs[1].shape, vec![4]);
    let mut seen = 0;
    for batch in &mut loader {
        let batch = batch.unwrap();
        let t = batch.get::<f64>("t").unwrap();
        assert_eq!(t.shape(), &[batch.len(), 2, 3]);
        let be = batch.output("be").unwrap();
        for (row, &s) in batch.sample_ids().iter().enumerate() {
            let want: Vec<f64> = (0..6).map(|k| s as f64 * 10.0 + k as f64).collect();
            assert_eq!(t.row(row), &want[..]);
            let got: Vec<i16> = be
                .row(row)
                .chunks_exact(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]))
                .collect();
            let want: Vec<i16> = (0..4).map(|k| -(s as i16) * 100 - k).collect();
            assert_eq!(got, want);
        }
        // Big-endian values cannot be viewed as native i16, and f64 is not f32.
        let err = batch.get::<i16>("be").unwrap_err();
        assert!(matches!(err, Error::Output { .. }), "{err:?}");
        assert!(err.to_string().contains(">i2"), "{err}");
        assert!(batch.get::<f32>("t").is_err());
        assert!(batch.output("nope").is_err());
        seen += batch.len();
    }
    assert_eq!(seen, 10);
}
