//! An image folder in torchvision's `ImageFolder` layout (one subfolder per
//! class) as a source of samples for the writer.
//!
//! Classes are the subfolders in sorted (byte-wise) order and a class's label
//! is its position in that order, whatever happens to its files; each
//! class's `.jpg`/`.jpeg`/`.png` files (any case) are taken in sorted order
//! and decoded by content ([`read_image_file`]), so a PNG named `.JPEG`
//! reads as a PNG. Every other file (`README.txt`, `.DS_Store`, other image
//! types) is not a sample: it is listed in [`ImageFolder::non_images`].
//!
//! By default an undecodable file fails the write naming the file.
//! [`ImageFolder::skip_unreadable`] instead decodes every image once
//! beforehand (a `.beton` file's sample count is fixed before its first page
//! is written, so which files are readable must be known first) and drops
//! the ones that fail, keeping them in [`ImageFolder::skipped`].

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{ImageError, RgbImage, read_image_file};

/// Errors of scanning an image folder.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The root is not a folder.
    #[error("{}: not a folder", path.display())]
    NotAFolder {
        /// The path given.
        path: PathBuf,
    },
    /// A folder could not be listed.
    #[error("{}: cannot list the folder: {source}", path.display())]
    List {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The root holds no subfolder.
    #[error("{}: has no class subfolders", path.display())]
    NoClasses {
        /// The root.
        path: PathBuf,
    },
    /// No class subfolder holds an image file (or every one was skipped).
    #[error("{}: has no {what}.jpg, .jpeg or .png files in its class subfolders", path.display())]
    NoImages {
        /// The root.
        path: PathBuf,
        /// "readable " after skipping, else empty.
        what: &'static str,
    },
}

/// One image of the folder and its label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderImage {
    /// The file.
    pub path: PathBuf,
    /// The position of its class folder in sorted order.
    pub label: i64,
}

/// An image file that could not be decoded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// The file.
    pub path: PathBuf,
    /// The decoder's error.
    pub error: String,
}

/// The scanned folder: its classes, its images in write order, and the
/// files that are not samples.
#[derive(Clone, Debug)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    images: Vec<FolderImage>,
    non_images: Vec<PathBuf>,
    skipped: Vec<Unreadable>,
}

/// Whether `path` has an image extension the folder takes as a sample.
fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, FolderError> {
    let cannot = |source| FolderError::List {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = std::fs::read_dir(dir)
        .map_err(cannot)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(cannot)?;
    paths.sort();
    Ok(paths)
}

impl ImageFolder {
    /// Lists `root`'s class subfolders and their files (no file is read).
    pub fn scan(root: impl AsRef<Path>) -> Result<Self, FolderError> {
        let root = root.as_ref().to_path_buf();
        if !root.is_dir() {
            return Err(FolderError::NotAFolder { path: root });
        }
        let mut classes = Vec::new();
        let mut images = Vec::new();
        let mut non_images = Vec::new();
        for dir in read_dir_sorted(&root)?.into_iter().filter(|p| p.is_dir()) {
            let label = classes.len() as i64;
            classes.push(
                dir.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
            for path in read_dir_sorted(&dir)? {
                if path.is_file() && is_image(&path) {
                    images.push(FolderImage { path, label });
                } else {
                    non_images.push(path);
                }
            }
        }
        if classes.is_empty() {
            return Err(FolderError::NoClasses { path: root });
        }
        if images.is_empty() {
            return Err(FolderError::NoImages {
                path: root,
                what: "",
            });
        }
        Ok(Self {
            root,
            classes,
            images,
            non_images,
            skipped: Vec::new(),
        })
    }

    /// Decodes every image on `threads` threads (0: rayon's default) and
    /// drops the ones that fail from [`Self::images`], recording them in
    /// [`Self::skipped`] (in folder order). Labels do not change: they
    /// follow the class folders, not the files left. Fails only if no
    /// image is left.
    pub fn skip_unreadable(&mut self, threads: usize) -> Result<&[Unreadable], FolderError> {
        let probe = |images: &[FolderImage]| -> Vec<Option<String>> {
            images
                .par_iter()
                .map(|img| read_image_file(&img.path).err().map(|e| source_message(&e)))
                .collect()
        };
        let results = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
            Ok(pool) => pool.install(|| probe(&self.images)),
            // No pool of that size: the global one.
            Err(_) => probe(&self.images),
        };
        let mut kept = Vec::with_capacity(self.images.len());
        for (img, result) in std::mem::take(&mut self.images).into_iter().zip(results) {
            match result {
                None => kept.push(img),
                Some(error) => {
                    // Debug, not warn: the caller reports the whole list once.
                    tracing::debug!(
                        path = %img.path.display(),
                        %error,
                        "skipping an unreadable image"
                    );
                    self.skipped.push(Unreadable {
                        path: img.path,
                        error,
                    });
                }
            }
        }
        self.images = kept;
        if self.images.is_empty() {
            return Err(FolderError::NoImages {
                path: self.root.clone(),
                what: "readable ",
            });
        }
        Ok(&self.skipped)
    }

    /// The class names (subfolder names, sorted); a label indexes this.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The images to write, in order.
    pub fn images(&self) -> &[FolderImage] {
        &self.images
    }

    /// Files in the class folders that are not samples (other extensions,
    /// subfolders), in folder order.
    pub fn non_images(&self) -> &[PathBuf] {
        &self.non_images
    }

    /// The files [`Self::skip_unreadable`] dropped.
    pub fn skipped(&self) -> &[Unreadable] {
        &self.skipped
    }

    /// Decodes image `index` of [`Self::images`] as
    /// `PIL.Image.open(p).convert("RGB")` would.
    pub fn read(&self, index: usize) -> Result<RgbImage, ImageError> {
        match self.images.get(index) {
            Some(img) => read_image_file(&img.path),
            None => Err(ImageError::BadSetting(format!(
                "image {index} of a folder of {}",
                self.images.len()
            ))),
        }
    }

    /// The skipped and non-image files as JSON: `{"root", "images",
    /// "skipped": [{"path", "error"}], "non_images": [path]}`.
    pub fn report_json(&self) -> String {
        let path = |p: &Path| serde_json::Value::from(p.to_string_lossy().into_owned());
        let doc = serde_json::json!({
            "root": path(&self.root),
            "images": self.images.len(),
            "skipped": self.skipped.iter().map(|u| serde_json::json!({
                "path": path(&u.path),
                "error": u.error,
            })).collect::<Vec<_>>(),
            "non_images": self.non_images.iter().map(|p| path(p)).collect::<Vec<_>>(),
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// The decoder's message without the path (the report has it already).
fn source_message(e: &ImageError) -> String {
    match e {
        ImageError::File { source, .. } => source.to_string(),
        ImageError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}
