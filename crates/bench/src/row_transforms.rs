//! `--transform FIELD=OP[,OP…]` of the bench matrix: a user's transforms run on the loader
//! rows, so that a training pipeline can be measured in the matrix without writing Rust.
//!
//! The rule, in one place: a `--transform` on field F applies to every data set whose file
//! has F, and there to the rows whose pipeline is a decoder alone (`copy`, `rrc64`,
//! `rrc224`, with their `ahead1` and `cuda0` variants, and the tracing-overhead row, which
//! is measured on one of them). Such a row runs its own decoder for F followed by the ops,
//! compiled, and its name gets the suffix `/+F=OPS` (one per field, by field name), so a
//! `--compare` never sets a transformed row against an untransformed one. Rows that carry
//! their own transform chain (`cifar-train/*`, `imagenet-*`) keep it and their names: they
//! stay the fixed reference chains. The op grammar and its errors are the facade's
//! ([`ffcv::transform_spec`]).

use ffcv::transform_spec::FieldTransforms;

/// The transforms of a run, merged by field: a field named by several `--transform`s runs
/// their ops in the order given (as `ffcv bench` does). Kept sorted by field name so that a
/// row's name does not depend on the order of the flags.
#[derive(Debug, Clone, Default)]
pub struct RowTransforms {
    fields: Vec<FieldTransforms>,
}

impl RowTransforms {
    /// Merges the `--transform` values by field.
    pub fn new(args: &[FieldTransforms]) -> RowTransforms {
        let mut fields: Vec<FieldTransforms> = Vec::new();
        for arg in args {
            match fields.iter_mut().find(|f| f.field == arg.field) {
                Some(merged) => {
                    merged.ops_text.push(',');
                    merged.ops_text.push_str(&arg.ops_text);
                    merged.ops.extend(arg.ops.iter().cloned());
                }
                None => fields.push(arg.clone()),
            }
        }
        fields.sort_by(|a, b| a.field.cmp(&b.field));
        RowTransforms { fields }
    }

    /// No transforms (every row runs as without the flag).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The transforms that apply to a data set whose file has the fields `names`.
    pub fn for_fields(&self, names: &[&str]) -> RowTransforms {
        RowTransforms {
            fields: self
                .fields
                .iter()
                .filter(|f| names.contains(&f.field.as_str()))
                .cloned()
                .collect(),
        }
    }

    /// The fields and their merged ops, by field name.
    pub fn fields(&self) -> &[FieldTransforms] {
        &self.fields
    }

    /// The row-name suffix of a transformed row: `/+F=OPS` per field ("" when empty).
    pub fn suffix(&self) -> String {
        self.fields
            .iter()
            .map(|f| format!("/+{}={}", f.field, f.ops_text))
            .collect()
    }

    /// What a transformed row's description adds: `; then F: OPS` per field.
    pub fn description(&self) -> String {
        self.fields
            .iter()
            .map(|f| format!("; then {}: {}", f.field, f.describe()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(values: &[&str]) -> RowTransforms {
        let args: Vec<FieldTransforms> = values
            .iter()
            .map(|v| FieldTransforms::parse(v).unwrap())
            .collect();
        RowTransforms::new(&args)
    }

    #[test]
    fn values_parse_with_the_facade_grammar_and_bad_ops_are_refused() {
        let arg =
            FieldTransforms::parse("image=flip,normalize:0.5,0.5,0.5/0.2,0.2,0.2:f16,chw").unwrap();
        assert_eq!(arg.field, "image");
        assert_eq!(
            arg.ops_text,
            "flip,normalize:0.5,0.5,0.5/0.2,0.2,0.2:f16,chw"
        );
        assert_eq!(arg.ops.len(), 3);
        for bad in [
            "image=blur",
            "image=",
            "=flip",
            "flip",
            "image=flip:2",
            "image=cutout",
        ] {
            let err = FieldTransforms::parse(bad).unwrap_err().to_string();
            assert!(err.contains("invalid transform"), "{bad}: {err}");
            assert!(
                err.contains("normalize:imagenet"),
                "{bad}: grammar missing: {err}"
            );
        }
    }

    #[test]
    fn transforms_merge_by_field_sort_by_name_and_name_their_rows() {
        let t = parsed(&["label=convert:f32", "image=flip", "image=chw"]);
        let fields: Vec<(&str, &str, usize)> = t
            .fields()
            .iter()
            .map(|f| (f.field.as_str(), f.ops_text.as_str(), f.ops.len()))
            .collect();
        assert_eq!(
            fields,
            [("image", "flip,chw", 2), ("label", "convert:f32", 1)]
        );
        assert_eq!(t.suffix(), "/+image=flip,chw/+label=convert:f32");
        // The order of the flags does not change the name.
        let swapped = parsed(&["image=flip", "label=convert:f32", "image=chw"]);
        assert_eq!(swapped.suffix(), t.suffix());

        // Only the fields a data set has apply to it.
        assert_eq!(t.for_fields(&["array", "index"]).suffix(), "");
        assert!(t.for_fields(&["array", "index"]).is_empty());
        assert_eq!(
            t.for_fields(&["image", "index"]).suffix(),
            "/+image=flip,chw"
        );
        assert!(RowTransforms::default().suffix().is_empty());
        assert!(
            t.for_fields(&["image"])
                .description()
                .starts_with("; then image: ")
        );
    }

    #[test]
    fn only_the_decoder_only_rows_of_a_data_set_with_the_field_are_transformed() {
        use crate::loader_matrix::{JPEG_LABEL, PHOTOS_LABEL, row_names, row_names_with};
        let t = parsed(&["image=flip,normalize:imagenet:f32,chw"]);
        let suffix = "/+image=flip,normalize:imagenet:f32,chw";
        // The 128 KiB data set has no `image` field: its rows are unchanged.
        assert_eq!(row_names_with("128k", &t), row_names("128k"));
        for label in ["3k", JPEG_LABEL, PHOTOS_LABEL] {
            let plain = row_names(label);
            let with = row_names_with(label, &t);
            assert_eq!(plain.len(), with.len(), "{label}");
            for (plain, with) in plain.iter().zip(&with) {
                let decoder_only = ["/copy", "/rrc64", "/rrc224", "tracing-overhead"]
                    .iter()
                    .any(|p| plain.contains(p));
                if decoder_only {
                    assert_eq!(*with, format!("{plain}{suffix}"));
                } else {
                    // The rows with their own chains keep it and their names.
                    assert!(
                        plain.contains("/jit") || plain.contains("/interp"),
                        "{plain}"
                    );
                    assert_eq!(with, plain);
                }
            }
        }
        let photos = row_names_with(PHOTOS_LABEL, &t);
        assert!(photos.contains(&format!("loader/photos/os/random/1t/rrc224{suffix}")));
        assert!(photos.contains(&"loader/photos/os/random/1t/imagenet-f32/jit".to_owned()));
        let cifar = row_names_with("3k", &t);
        assert!(cifar.contains(&format!("loader/3k/os/random/all/copy/cuda0{suffix}")));
        assert!(cifar.contains(&format!("loader/3k/tracing-overhead{suffix}")));
        // A transform on a field only the 128 KiB data set has leaves the image rows alone.
        let array = parsed(&["array=convert:f32"]);
        assert_eq!(row_names_with("3k", &array), row_names("3k"));
        assert_eq!(
            row_names_with("128k", &array)[0],
            "loader/128k/os/random/all/copy/+array=convert:f32"
        );
    }

    #[test]
    fn a_transformed_row_runs_its_decoder_then_the_ops_and_is_reported_under_its_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let mut recipe = crate::datasets::small().remove(1);
        assert_eq!(recipe.label, "3k");
        recipe.samples = 1030;
        recipe.page_size = 2 << 20;
        let dataset = crate::datasets::ensure(dir.path(), &recipe, &|_| {}).unwrap();
        let config = crate::loader_matrix::Config {
            os_cache: true,
            order: crate::loader_matrix::OrderName::Sequential,
            workers: Some(1),
            pipeline: crate::loader_matrix::PipelineName::Copy,
            batches_ahead: 3,
            cuda: false,
        };
        let first_image = |t: &RowTransforms| {
            let mut loader = crate::loader_matrix::builder(&dataset, &config, t)
                .unwrap()
                .build()
                .unwrap();
            let info = loader
                .outputs()
                .iter()
                .find(|o| o.name == "image")
                .unwrap()
                .clone();
            let batch = loader.iter().next().unwrap().unwrap();
            let bytes = batch.output("image").unwrap().bytes().to_vec();
            (info.shape, info.dtype.descr(), bytes)
        };
        let (shape, dtype, stored) = first_image(&RowTransforms::default());
        assert_eq!((shape, dtype.as_str()), (vec![32, 32, 3], "|u1"));
        let (shape, dtype, chw) = first_image(&parsed(&["image=chw"]));
        assert_eq!((shape, dtype.as_str()), (vec![3, 32, 32], "|u1"));
        assert_eq!(stored.len(), chw.len());
        // Every sample is its stored pixels laid out channel-first.
        for sample in 0..stored.len() / 3072 {
            let (hwc, out) = (
                &stored[sample * 3072..][..3072],
                &chw[sample * 3072..][..3072],
            );
            for c in 0..3 {
                for p in 0..1024 {
                    assert_eq!(out[c * 1024 + p], hwc[p * 3 + c], "sample {sample}");
                }
            }
        }

        // End to end: the suffixed row is measured and reported under its name, with the
        // ops in its description; a transform on a field the file lacks changes nothing.
        let t = parsed(&["image=chw", "nosuchfield=flip"]);
        let name = "loader/3k/os/sequential/1t/copy/+image=chw";
        let rows = crate::loader_matrix::rows(&dataset, &t, &|n| n == name, &|_| {}).unwrap();
        let [row] = rows.as_slice() else {
            panic!("{rows:?}");
        };
        assert_eq!(row.name, name);
        assert!(
            row.config.ends_with("; then image: ToChw"),
            "{}",
            row.config
        );
        assert!(row.samples_per_sec > 0.0);
    }
}
