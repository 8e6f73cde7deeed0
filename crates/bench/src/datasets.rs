//! The benchmark data sets: written once under the output folder with beton-io's writer and
//! reused while their parameters (recorded beside each file) are unchanged.
//!
//! The content is `ffcv write synthetic`'s (`ffcv_cli::synthetic`), so any data set here can
//! be rebuilt by hand with the command printed in its `.params` file.

use std::path::{Path, PathBuf};

use beton_io::{DatasetWriter, NumpyDtype, Reader, from_fn};
use ffcv_cli::synthetic::{Kind, Spec};

/// A data set ready to read.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The .beton file.
    pub path: PathBuf,
    /// Short label used in row names (`128k`, `3k`).
    pub label: String,
    /// The field the reader rows read.
    pub field: String,
    /// What one sample is, for the rows' `config`.
    pub sample_description: String,
}

/// How to build one data set.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// Short label used in file and row names.
    pub label: &'static str,
    /// The synthetic content.
    pub spec: Spec,
    /// Number of samples.
    pub samples: u64,
    /// Page size of the file.
    pub page_size: u64,
    /// The field the reader rows read.
    pub field: &'static str,
    /// What one sample is.
    pub sample_description: &'static str,
}

/// Bumped when the writer or the synthetic content changes in a way that alters the files.
const FORMAT_REVISION: u32 = 1;

/// The `--small` data sets: 2,048 samples of 128 KiB (256 MiB) and 50,000 CIFAR-like samples
/// of 3 KiB (147 MiB), both larger than any CPU cache, small enough to write in seconds.
pub fn small() -> Vec<Recipe> {
    vec![
        Recipe {
            label: "128k",
            spec: Spec {
                shape: vec![128 * 1024],
                dtype: NumpyDtype::u8(),
                ..Spec::new(Kind::Ndarray)
            },
            samples: 2048,
            page_size: 8 << 20,
            field: "array",
            sample_description: "128 KiB (u8 ndarray [131072])",
        },
        Recipe {
            label: "3k",
            spec: Spec::new(Kind::CifarRaw),
            samples: 50_000,
            page_size: 8 << 20,
            field: "image",
            sample_description: "3 KiB (CIFAR-like u8 32x32x3 + label)",
        },
    ]
}

impl Recipe {
    /// The command that writes the same file, and the parameters that identify it.
    fn params(&self) -> String {
        let spec = &self.spec;
        let kind_options = match spec.kind {
            Kind::Ndarray => format!(
                " --shape {} --dtype '{}'",
                spec.shape
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                spec.dtype.descr()
            ),
            Kind::Bytes => format!(" --size {}", spec.mean_size),
            _ => String::new(),
        };
        format!(
            "revision {FORMAT_REVISION}\nffcv write synthetic OUT --kind {} --samples {} --seed {} --page-size {}{kind_options}\n",
            spec.kind.name(),
            self.samples,
            spec.seed,
            self.page_size
        )
    }
}

/// The data set of `recipe` under `dir`: reused when its recorded parameters match and it
/// opens with the expected sample count, otherwise (re)written.
pub fn ensure(dir: &Path, recipe: &Recipe, progress: &dyn Fn(&str)) -> Result<Dataset, String> {
    let path = dir.join(format!("reader-{}.beton", recipe.label));
    let params_path = dir.join(format!("reader-{}.params", recipe.label));
    let params = recipe.params();
    let reusable = std::fs::read_to_string(&params_path).is_ok_and(|old| old == params)
        && Reader::open(&path).is_ok_and(|reader| reader.num_samples() == recipe.samples);
    if !reusable {
        progress(&format!(
            "writing {} ({} samples)",
            path.display(),
            recipe.samples
        ));
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        // The parameters go last: a half-written data set is never taken for a finished one.
        let _ = std::fs::remove_file(&params_path);
        let fields = recipe.spec.fields()?;
        let spec = &recipe.spec;
        DatasetWriter::new(&path, fields)
            .and_then(|writer| writer.with_page_size(recipe.page_size))
            .and_then(|writer| writer.write(&from_fn(recipe.samples, |i| Ok(spec.sample(i)))))
            .map_err(|err| err.to_string())?;
        std::fs::write(&params_path, &params)
            .map_err(|err| format!("cannot write {}: {err}", params_path.display()))?;
    }
    Ok(Dataset {
        path,
        label: recipe.label.to_owned(),
        field: recipe.field.to_owned(),
        sample_description: recipe.sample_description.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::{ensure, small};

    #[test]
    fn a_data_set_is_written_once_then_reused_until_its_parameters_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut recipe = small().remove(1);
        recipe.samples = 40;
        recipe.page_size = 2 << 20;
        let messages = std::cell::RefCell::new(Vec::new());
        let log = |m: &str| messages.borrow_mut().push(m.to_owned());

        let first = ensure(dir.path(), &recipe, &log).unwrap();
        let written = std::fs::metadata(&first.path).unwrap().modified().unwrap();
        assert_eq!(messages.borrow().len(), 1, "written the first time");

        ensure(dir.path(), &recipe, &log).unwrap();
        assert_eq!(messages.borrow().len(), 1, "reused the second time");
        assert_eq!(
            std::fs::metadata(&first.path).unwrap().modified().unwrap(),
            written
        );

        recipe.spec.seed = 9;
        ensure(dir.path(), &recipe, &log).unwrap();
        assert_eq!(
            messages.borrow().len(),
            2,
            "rewritten when the seed changes"
        );
        let params = std::fs::read_to_string(dir.path().join("reader-3k.params")).unwrap();
        assert!(
            params.contains("--kind cifar-raw --samples 40 --seed 9 --page-size 2097152"),
            "{params}"
        );
    }
}
