//! Deterministic synthetic datasets: the content behind `ffcv write synthetic` and the
//! benchmark data sets.
//!
//! Sample `i` of a spec depends only on `(seed, i)` (never on the writer's thread count), so
//! the same command always writes the same values, and a reader can recompute any sample to
//! check what it read.

use beton_io::{
    ByteOrder, FieldSpec, FieldType, FieldValue, NdArrayArgs, NumpyDtype, NumpyKind, RgbImage,
    VarArrayArgs,
};

/// What a synthetic dataset holds.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `index` (int) and `value` (float in [-1000, 1000)).
    Scalars,
    /// `index` (int) and `blob` (random bytes, lengths uniform in mean ± mean/2).
    Bytes,
    /// `index` (int) and `array` (ndarray of the spec's dtype and shape).
    Ndarray,
    /// `image` (u8 32x32x3 ndarray), `label` (int 0..10) and `index`, like CIFAR-10.
    CifarRaw,
    /// `image` (raw RGB image of the spec's H,W; 32x32 by default), `label` (0..10), `index`.
    ImagesRaw,
    /// `image` (a JPEG of a synthetic picture: gradients, a rectangle, noise; sides drawn
    /// from `shape` = `[MIN, MAX]`, 160..=256 by default; `jpeg_quality`), `label` (0..10),
    /// `index`.
    Jpeg,
    /// `image` (a JPEG cut from photographs, see [`crate::photos`]; sides drawn from
    /// `shape` = `[MIN, MAX]`, 350..=500 by default; `jpeg_quality`), `label` (0..10),
    /// `index`. Decodes at a photograph's speed, unlike `jpeg`'s gradients and noise.
    Photos,
}

impl Kind {
    /// The name on the command line (`cifar-raw`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Scalars => "scalars",
            Kind::Bytes => "bytes",
            Kind::Ndarray => "ndarray",
            Kind::CifarRaw => "cifar-raw",
            Kind::ImagesRaw => "images-raw",
            Kind::Jpeg => "jpeg",
            Kind::Photos => "photos",
        }
    }
}

/// A synthetic dataset's description: its kind, seed and per-kind parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// What to generate.
    pub kind: Kind,
    /// Seed of the content.
    pub seed: u64,
    /// Mean length of `bytes` samples.
    pub mean_size: u64,
    /// Shape of `ndarray` samples, or `[height, width]` of `images-raw` images.
    pub shape: Vec<u64>,
    /// The dtype of `ndarray` samples.
    pub dtype: NumpyDtype,
    /// JPEG quality of `jpeg` samples (1..=100).
    pub jpeg_quality: u8,
    /// When set, every kind gets one more field, [`VAR_ARRAY_FIELD`]: a `VarArrayField` of
    /// float32 rows of 4 ([`VAR_ARRAY_INNER`]), `K` uniform in `0..=max` (a box list).
    pub var_rows: Option<u64>,
}

/// The name of the variable-length field [`Spec::var_rows`] adds.
pub const VAR_ARRAY_FIELD: &str = "boxes";
/// The inner shape of [`VAR_ARRAY_FIELD`]'s float32 rows.
pub const VAR_ARRAY_INNER: [u64; 1] = [4];

impl Spec {
    /// A spec of `kind` with the defaults: seed 0, 4 KiB bytes, `<f4` arrays of shape `[3, 4]`,
    /// 32x32 images.
    pub fn new(kind: Kind) -> Spec {
        let shape = match kind {
            Kind::ImagesRaw => vec![32, 32],
            Kind::Jpeg => vec![160, 256],
            Kind::Photos => vec![
                u64::from(crate::photos::DEFAULT_SIDES.0),
                u64::from(crate::photos::DEFAULT_SIDES.1),
            ],
            _ => vec![3, 4],
        };
        Spec {
            kind,
            seed: 0,
            mean_size: 4096,
            shape,
            dtype: NumpyDtype::f32(),
            jpeg_quality: 90,
            var_rows: None,
        }
    }

    /// The rows of sample `index`'s [`VAR_ARRAY_FIELD`] (empty without
    /// [`Spec::var_rows`]): from a stream of its own, so the other fields' values are the
    /// same with and without it. Elements are multiples of 1/256 in [-8, 8).
    pub fn var_array(&self, index: u64) -> Vec<f32> {
        let Some(max) = self.var_rows else {
            return Vec::new();
        };
        let mut rng = SplitMix64::for_sample(self.seed ^ 0x5641_5252_4159_5321, index);
        let rows = rng.below(max.saturating_add(1));
        (0..rows * VAR_ARRAY_INNER[0])
            .map(|_| float_value(rng.next_u64()) as f32)
            .collect()
    }

    fn var_array_spec(&self) -> Result<Option<FieldSpec>, String> {
        let Some(max) = self.var_rows else {
            return Ok(None);
        };
        let args = VarArrayArgs::new(NumpyDtype::f32(), VAR_ARRAY_INNER.to_vec())?;
        max.checked_mul(args.row_bytes().unwrap_or(u64::MAX))
            .ok_or_else(|| format!("{max} rows of boxes overflow 64 bits"))?;
        Ok(Some(FieldSpec::new(
            VAR_ARRAY_FIELD,
            FieldType::VarArray(args),
        )))
    }

    /// The fields, in order; an error names the parameter a kind cannot use.
    pub fn fields(&self) -> Result<Vec<FieldSpec>, String> {
        let mut fields = self.base_fields()?;
        fields.extend(self.var_array_spec()?);
        Ok(fields)
    }

    fn base_fields(&self) -> Result<Vec<FieldSpec>, String> {
        let index = FieldSpec::new("index", FieldType::Int);
        let label = FieldSpec::new("label", FieldType::Int);
        Ok(match self.kind {
            Kind::Scalars => vec![index, FieldSpec::new("value", FieldType::Float)],
            Kind::Bytes => vec![index, FieldSpec::new("blob", FieldType::Bytes)],
            Kind::Ndarray => {
                element_writer(&self.dtype)?;
                let args = NdArrayArgs::new(self.dtype.clone(), self.shape.clone());
                args.byte_len()
                    .ok_or_else(|| format!("ndarray shape {:?} is too large", self.shape))?;
                vec![index, FieldSpec::new("array", FieldType::NdArray(args))]
            }
            Kind::CifarRaw => {
                let args = NdArrayArgs::new(NumpyDtype::u8(), CIFAR_SHAPE.to_vec());
                vec![
                    FieldSpec::new("image", FieldType::NdArray(args)),
                    label,
                    index,
                ]
            }
            Kind::ImagesRaw => {
                self.image_size()?;
                vec![FieldSpec::new("image", FieldType::RgbImage), label, index]
            }
            Kind::Jpeg | Kind::Photos => {
                self.jpeg_sides()?;
                if self.kind == Kind::Photos {
                    let (_, max) = self.jpeg_sides()?;
                    if max > crate::photos::MAX_SIDE {
                        return Err(format!(
                            "photos sides are at most {} (the largest tile must fit in an \
                             embedded photograph), got {max}",
                            crate::photos::MAX_SIDE
                        ));
                    }
                }
                if !(1..=100).contains(&self.jpeg_quality) {
                    return Err(format!(
                        "JPEG quality {} is not in 1..=100",
                        self.jpeg_quality
                    ));
                }
                vec![FieldSpec::new("image", FieldType::RgbImage), label, index]
            }
        })
    }

    /// Sample `index`: one value per field of [`Spec::fields`].
    ///
    /// Call [`Spec::fields`] first: it validates the parameters this relies on (a spec
    /// that `fields` rejects gives empty arrays and images here). A sample allocates up to
    /// [`Spec::largest_sample_bytes`]: check that against the page size before writing.
    pub fn sample(&self, index: u64) -> Vec<FieldValue> {
        let mut values = self.base_sample(index);
        if self.var_rows.is_some() {
            let rows = self.var_array(index);
            values.push(FieldValue::NdArray(
                rows.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ));
        }
        values
    }

    fn base_sample(&self, index: u64) -> Vec<FieldValue> {
        let mut rng = SplitMix64::for_sample(self.seed, index);
        let id = FieldValue::Int(index as i64);
        match self.kind {
            Kind::Scalars => {
                // 53 random bits mapped onto [-1000, 1000): exact, reproducible floats.
                let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                vec![id, FieldValue::Float(unit * 2000.0 - 1000.0)]
            }
            Kind::Bytes => {
                let low = self.mean_size / 2;
                let len = low.saturating_add(rng.below(self.mean_size.saturating_add(1)));
                vec![id, FieldValue::Bytes(rng.bytes(len as usize))]
            }
            Kind::Ndarray => {
                let count = self.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
                let mut data = Vec::new();
                if let (Ok(write_element), Some(count)) = (element_writer(&self.dtype), count) {
                    for _ in 0..count {
                        write_element(rng.next_u64(), &mut data);
                    }
                }
                vec![id, FieldValue::NdArray(data)]
            }
            Kind::CifarRaw => {
                let pixels = rng.bytes(CIFAR_SHAPE.iter().product::<u64>() as usize);
                let label = rng.below(10) as i64;
                vec![FieldValue::NdArray(pixels), FieldValue::Int(label), id]
            }
            Kind::ImagesRaw => {
                let (height, width) = self.image_size().unwrap_or((0, 0));
                let pixels = rng.bytes(usize::from(height) * usize::from(width) * 3);
                let label = rng.below(10) as i64;
                let image = RgbImage::Raw {
                    width,
                    height,
                    pixels,
                };
                vec![FieldValue::RgbImage(image), FieldValue::Int(label), id]
            }
            Kind::Jpeg | Kind::Photos => {
                let (min_side, max_side) = self.jpeg_sides().unwrap_or((1, 1));
                let label = FieldValue::Int(rng.below(10) as i64);
                // `fields` validated the sides and the quality, so encoding succeeds; were
                // it to fail, an empty JPEG makes the loader report this sample.
                let encoded = if self.kind == Kind::Jpeg {
                    let sides = ffcv::image::SyntheticImageSpec { min_side, max_side };
                    ffcv::image::synthetic_jpeg(self.seed, index, sides, self.jpeg_quality)
                        .map_err(|e| e.to_string())
                } else {
                    let sides = (min_side, max_side);
                    crate::photos::photo_jpeg(self.seed, index, sides, self.jpeg_quality)
                };
                let (bytes, width, height) = encoded.unwrap_or((Vec::new(), 1, 1));
                let image = RgbImage::Jpeg {
                    width: u16::try_from(width).unwrap_or(0),
                    height: u16::try_from(height).unwrap_or(0),
                    bytes,
                };
                vec![FieldValue::RgbImage(image), label, id]
            }
        }
    }

    /// `(min, max)` side of `jpeg` images from `shape`, checked to fit u16.
    fn jpeg_sides(&self) -> Result<(u32, u32), String> {
        match self.shape[..] {
            [lo, hi] if lo > 0 && lo <= hi && hi <= u64::from(u16::MAX) => {
                Ok((lo as u32, hi as u32))
            }
            _ => Err(format!(
                "jpeg image sides {:?} are not MIN,MAX with 1 <= MIN <= MAX <= 65535",
                self.shape
            )),
        }
    }

    /// The largest number of bytes one sample can allocate in the data pages (`None` if it
    /// overflows `u64`). A writer needs a page at least this large; checking it first keeps
    /// an oversized request from allocating a sample's worth of memory before failing.
    pub fn largest_sample_bytes(&self) -> Option<u64> {
        let var = match self.var_rows {
            Some(max) => max.checked_mul(4 * VAR_ARRAY_INNER[0])?,
            None => 0,
        };
        self.base_largest_bytes()?.checked_add(var)
    }

    fn base_largest_bytes(&self) -> Option<u64> {
        match self.kind {
            Kind::Scalars => Some(0),
            Kind::Bytes => self.mean_size.checked_add(self.mean_size / 2),
            Kind::Ndarray => NdArrayArgs::new(self.dtype.clone(), self.shape.clone()).byte_len(),
            Kind::CifarRaw => Some(CIFAR_SHAPE.iter().product()),
            Kind::ImagesRaw => {
                let (h, w) = self.image_size().ok()?;
                Some(u64::from(h) * u64::from(w) * 3)
            }
            // A noisy JPEG stays below its raw size; twice it plus the headers is a safe bound.
            Kind::Jpeg | Kind::Photos => {
                let (_, max) = self.jpeg_sides().ok()?;
                Some(u64::from(max) * u64::from(max) * 6 + 65536)
            }
        }
    }

    /// `(height, width)` of `images-raw` images, checked to fit FFCV's u16 metadata.
    fn image_size(&self) -> Result<(u16, u16), String> {
        match self.shape[..] {
            [h, w] if h > 0 && w > 0 => {
                let fit =
                    |v: u64| u16::try_from(v).map_err(|_| format!("image side {v} exceeds 65535"));
                Ok((fit(h)?, fit(w)?))
            }
            _ => Err(format!(
                "images-raw takes --shape HEIGHT,WIDTH with both above 0 (got {:?})",
                self.shape
            )),
        }
    }
}

/// CIFAR-10's image shape (height, width, channels).
const CIFAR_SHAPE: [u64; 3] = [32, 32, 3];

/// Appends one element of a dtype, from 64 random bits, to a byte buffer.
type ElementWriter = fn(u64, &mut Vec<u8>);

/// The element generator for `dtype`: random bits for integers, 0/1 for bools, and for floats
/// multiples of 1/256 in [-8, 8), which every float width (float16 included) holds exactly.
fn element_writer(dtype: &NumpyDtype) -> Result<ElementWriter, String> {
    let big = dtype.byte_order() == ByteOrder::Big;
    let writer: ElementWriter = match (dtype.kind(), dtype.item_size(), big) {
        (NumpyKind::Bool, 1, _) => |r, out| out.push((r & 1) as u8),
        (NumpyKind::Int | NumpyKind::UInt, 1, _) => |r, out| out.push(r as u8),
        (NumpyKind::Int | NumpyKind::UInt, 2, false) => {
            |r, out| out.extend((r as u16).to_le_bytes())
        }
        (NumpyKind::Int | NumpyKind::UInt, 2, true) => {
            |r, out| out.extend((r as u16).to_be_bytes())
        }
        (NumpyKind::Int | NumpyKind::UInt, 4, false) => {
            |r, out| out.extend((r as u32).to_le_bytes())
        }
        (NumpyKind::Int | NumpyKind::UInt, 4, true) => {
            |r, out| out.extend((r as u32).to_be_bytes())
        }
        (NumpyKind::Int | NumpyKind::UInt, 8, false) => |r, out| out.extend(r.to_le_bytes()),
        (NumpyKind::Int | NumpyKind::UInt, 8, true) => |r, out| out.extend(r.to_be_bytes()),
        (NumpyKind::Float, 2, false) => |r, out| out.extend(f16_bits(sixteenths(r)).to_le_bytes()),
        (NumpyKind::Float, 2, true) => |r, out| out.extend(f16_bits(sixteenths(r)).to_be_bytes()),
        (NumpyKind::Float, 4, false) => |r, out| out.extend((float_value(r) as f32).to_le_bytes()),
        (NumpyKind::Float, 4, true) => |r, out| out.extend((float_value(r) as f32).to_be_bytes()),
        (NumpyKind::Float, 8, false) => |r, out| out.extend(float_value(r).to_le_bytes()),
        (NumpyKind::Float, 8, true) => |r, out| out.extend(float_value(r).to_be_bytes()),
        _ => {
            return Err(format!(
                "synthetic ndarrays support bool, int, uint and float dtypes (got {})",
                dtype.descr()
            ));
        }
    };
    Ok(writer)
}

/// An integer k in [-2048, 2048): the float element is k / 256.
fn sixteenths(r: u64) -> i32 {
    (r % 4096) as i32 - 2048
}

fn float_value(r: u64) -> f64 {
    f64::from(sixteenths(r)) / 256.0
}

/// The IEEE binary16 bits of k / 256 for |k| <= 2048, exactly (11 significant bits suffice).
fn f16_bits(k: i32) -> u16 {
    if k == 0 {
        return 0;
    }
    let sign = if k < 0 { 0x8000 } else { 0 };
    let m = k.unsigned_abs();
    let top = 31 - m.leading_zeros(); // m = 1.f * 2^top
    let exponent = top as i32 - 8 + 15; // value = m * 2^-8
    // The 10 bits below the leading one; only m = 2048 (k = -2048) has its leading one above them.
    let fraction = if top <= 10 {
        m << (10 - top)
    } else {
        m >> (top - 10)
    };
    let fraction = (fraction & 0x3ff) as u16;
    sign | ((exponent as u16) << 10) | fraction
}

/// splitmix64: a tiny, well-mixed generator; one independent stream per sample.
#[derive(Debug, Clone)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn for_sample(seed: u64, index: u64) -> SplitMix64 {
        let mut base = SplitMix64 { state: seed };
        let stream = base.next_u64() ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        SplitMix64 { state: stream }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..bound` (bound > 0) by multiply-shift.
    fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, Spec, f16_bits};
    use beton_io::{FieldValue, NumpyDtype};

    #[test]
    fn float16_encoding_is_exact_for_sixteenths() {
        assert_eq!(f16_bits(256), 0x3c00); // 1.0
        assert_eq!(f16_bits(-512), 0xc000); // -2.0
        assert_eq!(f16_bits(1), 0x1c00); // 2^-8
        assert_eq!(f16_bits(384), 0x3e00); // 1.5
        assert_eq!(f16_bits(2047), 0x47ff); // 7.99609375
        assert_eq!(f16_bits(-2048), 0xc800); // -8.0
    }

    #[test]
    fn samples_depend_only_on_seed_and_index() {
        let spec = Spec::new(Kind::Bytes);
        assert_eq!(spec.sample(7), spec.sample(7));
        assert_ne!(spec.sample(7), spec.sample(8));
        let other_seed = Spec {
            seed: 1,
            ..spec.clone()
        };
        assert_ne!(spec.sample(7), other_seed.sample(7));
    }

    #[test]
    fn byte_lengths_stay_within_half_the_mean_of_it() {
        let spec = Spec {
            mean_size: 100,
            ..Spec::new(Kind::Bytes)
        };
        for i in 0..500 {
            let FieldValue::Bytes(bytes) = &spec.sample(i)[1] else {
                panic!()
            };
            assert!((50..=150).contains(&bytes.len()), "{}", bytes.len());
        }
    }

    #[test]
    fn ndarray_values_fill_the_shape_in_the_dtype() {
        for (descr, item) in [
            ("<f2", 2),
            (">f4", 4),
            ("<f8", 8),
            ("|b1", 1),
            (">i2", 2),
            ("<u8", 8),
        ] {
            let spec = Spec {
                dtype: descr.parse::<NumpyDtype>().unwrap(),
                shape: vec![2, 3],
                ..Spec::new(Kind::Ndarray)
            };
            spec.fields().unwrap();
            let FieldValue::NdArray(data) = &spec.sample(0)[1] else {
                panic!()
            };
            assert_eq!(data.len(), 6 * item, "{descr}");
        }
        let big = Spec {
            dtype: ">f8".parse().unwrap(),
            shape: vec![1],
            ..Spec::new(Kind::Ndarray)
        };
        let FieldValue::NdArray(data) = &big.sample(3)[1] else {
            panic!()
        };
        let x = f64::from_be_bytes(data[..8].try_into().unwrap());
        assert_eq!((x * 256.0).fract(), 0.0);
        assert!((-8.0..8.0).contains(&x));
    }

    #[test]
    fn the_largest_sample_bounds_every_generated_sample() {
        let bytes = Spec {
            mean_size: 1000,
            ..Spec::new(Kind::Bytes)
        };
        assert_eq!(bytes.largest_sample_bytes(), Some(1500));
        let images = Spec {
            shape: vec![20, 30],
            ..Spec::new(Kind::ImagesRaw)
        };
        assert_eq!(images.largest_sample_bytes(), Some(1800));
        assert_eq!(Spec::new(Kind::CifarRaw).largest_sample_bytes(), Some(3072));
        assert_eq!(Spec::new(Kind::Ndarray).largest_sample_bytes(), Some(48));
        let huge = Spec {
            mean_size: u64::MAX,
            ..Spec::new(Kind::Bytes)
        };
        assert_eq!(huge.largest_sample_bytes(), None);
    }

    #[test]
    fn unusable_parameters_are_rejected_by_fields() {
        let complex = Spec {
            dtype: "<c8".parse().unwrap(),
            ..Spec::new(Kind::Ndarray)
        };
        assert!(
            complex
                .fields()
                .unwrap_err()
                .contains("bool, int, uint and float")
        );
        let flat = Spec {
            shape: vec![32],
            ..Spec::new(Kind::ImagesRaw)
        };
        assert!(flat.fields().unwrap_err().contains("HEIGHT,WIDTH"));
        let huge = Spec {
            shape: vec![70_000, 2],
            ..Spec::new(Kind::ImagesRaw)
        };
        assert!(huge.fields().unwrap_err().contains("65535"));
    }
}
