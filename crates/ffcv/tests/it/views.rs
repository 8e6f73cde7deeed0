//! Several views of one field (`LoaderBuilder::view`, FFCV-SSL's `custom_field_mapper`):
//! the batch's output order, view 0 bit-identical to a one-view loader, each view equal to
//! a one-view loader seeded with its view seed (so the decode-once path gives the bytes of
//! decoding each view alone, on the test photographs and on generated images, under every
//! policy and worker count), resume mid-epoch, exactly-once epochs, and the build errors.

use std::path::{Path, PathBuf};

use ffcv::decode::{CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder};
use ffcv::format::{DatasetWriter, FieldSpec, FieldType, FieldValue, RgbImage};
use ffcv::image::ViewsPolicy;
use ffcv::jit::ElemType;
use ffcv::{DecoderChoice, Error, Loader, LoaderBuilder, Order, PipelineSpec, transforms};

/// Writes `images` (JPEG bytes, width, height) as an `image` field with a `label` field.
fn write_images(path: &Path, images: &[(Vec<u8>, u16, u16)], samples: u64) -> PathBuf {
    let fields = vec![
        FieldSpec::new("image", FieldType::RgbImage),
        FieldSpec::new("label", FieldType::Int),
    ];
    DatasetWriter::new(path, fields)
        .unwrap()
        .write(&ffcv::format::from_fn(samples, |i| {
            let (bytes, width, height) = images[i as usize % images.len()].clone();
            Ok(vec![
                FieldValue::RgbImage(RgbImage::Jpeg {
                    width,
                    height,
                    bytes,
                }),
                FieldValue::Int(i as i64 * 3),
            ])
        }))
        .unwrap();
    path.to_owned()
}

/// The four test photographs, 16 samples.
pub(crate) fn photos(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rgb-image/tests/data/photos");
    let images: Vec<_> = ["astronaut", "chelsea", "coffee", "rocket"]
        .iter()
        .map(|name| {
            let bytes = std::fs::read(root.join(format!("{name}.jpg"))).unwrap();
            let frame = ffcv::image::JpegFrame::find(&bytes).unwrap();
            let (w, h) = (frame.width, frame.height);
            (bytes, w, h)
        })
        .collect();
    write_images(&dir.join("photos.beton"), &images, 16)
}

/// 23 generated JPEGs of 20 to 120 px.
pub(crate) fn generated(dir: &Path) -> PathBuf {
    let spec = ffcv::image::SyntheticImageSpec {
        min_side: 20,
        max_side: 120,
    };
    let images: Vec<_> = (0..23)
        .map(|i| {
            let (bytes, w, h) = ffcv::image::synthetic_jpeg(5, i, spec, 90).unwrap();
            (bytes, w as u16, h as u16)
        })
        .collect();
    write_images(&dir.join("generated.beton"), &images, 23)
}

fn rrc(side: u32) -> PipelineSpec {
    PipelineSpec::new(RandomResizedCropRGBImageDecoder::new((side, side)))
}

fn flipped(side: u32) -> PipelineSpec {
    rrc(side).then(transforms::random_horizontal_flip(0.5).unwrap())
}

/// Batches of 5 in sequential order: a loader seeded with a view's seed then reads the
/// samples in the same order (the seed decides a random order too).
fn base(path: &Path, seed: u64) -> LoaderBuilder {
    Loader::builder(path)
        .batch_size(5)
        .drop_last(false)
        .seed(seed)
}

/// Every batch of one epoch: each output's name and bytes, and the sample ids.
type Epoch = Vec<(Vec<(String, Vec<u8>)>, Vec<u64>)>;

fn epoch(loader: &mut Loader) -> Epoch {
    loader
        .iter()
        .map(|b| {
            let b = b.unwrap();
            let outs = b
                .outputs()
                .iter()
                .map(|o| (o.name.clone(), b.output(&o.name).unwrap().bytes().to_vec()))
                .collect();
            (outs, b.sample_ids().to_vec())
        })
        .collect()
}

/// One output's bytes over an epoch.
fn column(e: &Epoch, name: &str) -> Vec<Vec<u8>> {
    e.iter()
        .map(|(outs, _)| outs.iter().find(|(n, _)| n == name).unwrap().1.clone())
        .collect()
}

#[test]
fn views_come_after_the_fields_in_the_order_they_were_added() {
    let dir = tempfile::tempdir().unwrap();
    let path = generated(dir.path());
    let names = |b: LoaderBuilder| -> Vec<String> {
        let loader = b.build().unwrap();
        loader.outputs().iter().map(|o| o.name.clone()).collect()
    };
    let b = base(&path, 1)
        .view("image_1", "image", rrc(16))
        .pipeline("image", rrc(16))
        .view("image_0", "image", rrc(24));
    assert_eq!(names(b.clone()), ["image", "label", "image_1", "image_0"]);
    // The source itself may be left out; a view of a view is a view of its source.
    let b = b.disable("image").view("image_2", "image_0", rrc(8)).view(
        "label_0",
        "label",
        DecoderChoice::Default,
    );
    assert_eq!(
        names(b),
        ["label", "image_1", "image_0", "image_2", "label_0"]
    );
}

#[test]
fn view_zero_is_unchanged_and_each_view_is_a_loader_seeded_with_its_view_seed() {
    let dir = tempfile::tempdir().unwrap();
    for path in [photos(dir.path()), generated(dir.path())] {
        let seed = 11;
        let one = epoch(
            &mut base(&path, seed)
                .pipeline("image", flipped(32))
                .build()
                .unwrap(),
        );
        let alone_1 = epoch(
            &mut base(&path, ffcv::view_seed(seed, 1))
                .pipeline("image", flipped(32))
                .build()
                .unwrap(),
        );
        let alone_2 = epoch(
            &mut base(&path, ffcv::view_seed(seed, 2))
                .pipeline("image", rrc(48))
                .build()
                .unwrap(),
        );
        for policy in [ViewsPolicy::Auto, ViewsPolicy::Once, ViewsPolicy::PerView] {
            for workers in [1, 3] {
                let mut loader = base(&path, seed)
                    .num_workers(workers)
                    .views_policy(policy)
                    .pipeline("image", flipped(32))
                    .view("image_0", "image", flipped(32))
                    .view("image_1", "image", rrc(48))
                    .view("label_0", "label", DecoderChoice::Default)
                    .build()
                    .unwrap();
                let views = epoch(&mut loader);
                let what = format!("{} {policy:?} {workers}w", path.display());
                // View 0 is the one-view loader, bit for bit (order and labels too).
                assert_eq!(column(&views, "image"), column(&one, "image"), "{what}");
                assert_eq!(column(&views, "label"), column(&one, "label"), "{what}");
                assert_eq!(column(&views, "label_0"), column(&one, "label"), "{what}");
                // View k draws as a loader seeded with view_seed(seed, k) draws.
                assert_eq!(
                    column(&views, "image_0"),
                    column(&alone_1, "image"),
                    "{what}"
                );
                assert_eq!(
                    column(&views, "image_1"),
                    column(&alone_2, "image"),
                    "{what}"
                );
                // The second epoch too (the epoch is in every draw).
                let again = epoch(&mut loader);
                assert_ne!(column(&again, "image_0"), column(&views, "image_0"));
            }
        }
        // Two views of one sample differ: every row of image_0 differs from image's.
        let rows = |e: &Epoch, name: &str| -> Vec<Vec<u8>> {
            column(e, name)
                .concat()
                .chunks(32 * 32 * 3)
                .map(<[u8]>::to_vec)
                .collect()
        };
        let a = rows(&one, "image");
        let b = rows(&alone_1, "image");
        assert!(a.iter().zip(&b).all(|(x, y)| x != y), "{}", path.display());
    }
}

#[test]
fn views_through_transforms_of_another_dtype_and_centre_crops() {
    let dir = tempfile::tempdir().unwrap();
    let path = photos(dir.path());
    let norm = || {
        rrc(24).then(
            transforms::normalize_image([120.0, 110.0, 100.0], [60.0; 3], ElemType::F32).unwrap(),
        )
    };
    let centre = PipelineSpec::new(CenterCropRGBImageDecoder::new((20, 20), 0.875));
    let mut loader = base(&path, 3)
        .pipeline("image", centre.clone())
        .view("image_0", "image", norm())
        .build()
        .unwrap();
    let views = epoch(&mut loader);
    let centre_alone = epoch(&mut base(&path, 3).pipeline("image", centre).build().unwrap());
    let norm_alone = epoch(
        &mut base(&path, ffcv::view_seed(3, 1))
            .pipeline("image", norm())
            .build()
            .unwrap(),
    );
    assert_eq!(column(&views, "image"), column(&centre_alone, "image"));
    assert_eq!(column(&views, "image_0"), column(&norm_alone, "image"));
    assert_eq!(column(&views, "image_0")[0].len(), 5 * 24 * 24 * 3 * 4);
}

#[test]
fn a_resumed_two_view_epoch_gives_the_same_batches_and_every_sample_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = photos(dir.path());
    let builder = || {
        base(&path, 7)
            .order(Order::Random)
            .pipeline("image", flipped(32))
            .view("image_0", "image", flipped(32))
    };
    let mut loader = builder().build().unwrap();
    let whole = epoch(&mut loader);
    let mut ids: Vec<u64> = whole.iter().flat_map(|(_, ids)| ids.clone()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..16).collect::<Vec<_>>(),
        "every sample exactly once"
    );
    // The same loader built again gives the same epoch.
    assert_eq!(epoch(&mut builder().build().unwrap()), whole);
    let mut loader = builder().build().unwrap();
    let state = {
        let mut it = loader.iter();
        for _ in 0..2 {
            it.next().unwrap().unwrap();
        }
        it.state()
    };
    let mut resumed = builder().resume(state).build().unwrap();
    assert_eq!(epoch(&mut resumed), whole[2..]);
}

#[test]
fn bad_views_are_refused_when_the_loader_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let path = generated(dir.path());
    let reason = |b: LoaderBuilder| match b.build() {
        Err(Error::Config { reason, .. }) => reason,
        other => panic!("expected a configuration error, got {other:?}"),
    };
    let base = |path, seed| base(path, seed).pipeline("image", rrc(8));
    let r = reason(base(&path, 1).view("label", "image", rrc(8)));
    assert!(r.contains("view \"label\" has the name of a field"), "{r}");
    let r = reason(base(&path, 1).view("image_0", "picture", rrc(8)));
    assert!(
        r.contains("view \"image_0\" maps to \"picture\"") && r.contains("fields: image, label"),
        "{r}"
    );
    // A view's decoder is checked against its source's type, naming the view.
    let r = reason(base(&path, 1).view("label_0", "label", rrc(8)));
    assert!(
        r.contains("field \"label_0\"") && r.contains("RGBImageField"),
        "{r}"
    );
}

#[test]
fn a_damaged_image_fails_the_group_decode_naming_the_field_and_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rgb-image/tests/data/photos");
    let bytes = std::fs::read(root.join("coffee.jpg")).unwrap();
    let frame = ffcv::image::JpegFrame::find(&bytes).unwrap();
    let (w, h) = (frame.width, frame.height);
    let cut = bytes[..bytes.len() / 20].to_vec();
    let images = [(bytes.clone(), w, h), (bytes.clone(), w, h), (cut, w, h)];
    let path = write_images(&dir.path().join("damaged.beton"), &images, 6);
    for policy in [ViewsPolicy::Once, ViewsPolicy::PerView] {
        let mut loader = base(&path, 1)
            .batch_size(2)
            .views_policy(policy)
            .pipeline("image", rrc(16))
            .view("image_0", "image", rrc(16))
            .build()
            .unwrap();
        let err = loader
            .iter()
            .find_map(|b| b.err())
            .expect("the damaged sample fails");
        match &err {
            Error::Decode {
                field,
                sample,
                decoder,
                ..
            } => {
                assert_eq!((field.as_str(), *sample), ("image", 2), "{err}");
                assert_eq!(decoder, "RandomResizedCropRGBImageDecoder");
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
}
