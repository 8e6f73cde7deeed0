//! Loader state files (`--resume STATE.json`, `--save-state STATE.json`): reading and
//! writing [`ffcv::LoaderState`] JSON, with errors that name the file.

use std::path::{Path, PathBuf};

use ffcv::LoaderState;

/// A state file that cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The file cannot be read.
    #[error("{path}: cannot read the loader state: {source}")]
    Read {
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a loader state this build reads.
    #[error("{path}: {source}")]
    Parse {
        /// The state file.
        path: PathBuf,
        /// What `LoaderState::from_json` reported (boxed: the facade's error is large).
        #[source]
        source: Box<ffcv::Error>,
    },
    /// The file cannot be written.
    #[error("{path}: cannot write the loader state: {source}")]
    Write {
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the state at `path`.
pub fn read(path: &Path) -> Result<LoaderState, StateFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| StateFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    LoaderState::from_json(&text).map_err(|source| StateFileError::Parse {
        path: path.to_owned(),
        source: Box::new(source),
    })
}

/// Writes `state` to `path` (through a temporary file renamed over it, so that a crash
/// never leaves half a state behind).
pub fn write(path: &Path, state: &LoaderState) -> Result<(), StateFileError> {
    let error = |source| StateFileError::Write {
        path: path.to_owned(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, state.to_json() + "\n").map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)
}
