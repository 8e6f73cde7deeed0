//! The index set as a [`crate::LoaderState`] records it (`indices.count`, `indices.hash64`,
//! `indices.sha256`), the stable 64-bit [`indices_hash`], and the check that an older or
//! a corrupt state's record is read correctly. Apart from `resume.rs` because a set can
//! change between epochs ([`crate::Loader::set_indices`]), so the loader recomputes it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first state format that records `indices.hash64`.
const HASH64_VERSION: u32 = 3;

/// The index set: its length, a SHA-256 of its ids (little-endian u64s) and, from format
/// 3 on, the 64-bit hash [`indices_hash`] (16 hex digits: the SHA-256's first 16).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IndicesIdentity {
    pub(super) count: u64,
    /// Absent in states of formats 1 and 2 (and then not written back, so that such a
    /// state stays readable by the build that wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash64: Option<String>,
    sha256: String,
}

impl IndicesIdentity {
    /// The identity of `indices`. O(ids).
    pub(super) fn of(indices: &[u64]) -> IndicesIdentity {
        let sha256 = hex(&digest(indices));
        IndicesIdentity {
            count: indices.len() as u64,
            hash64: Some(sha256[..16].to_owned()),
            sha256,
        }
    }

    /// The 64-bit hash as 16 hex digits: recorded, or derived from the SHA-256 (older
    /// formats).
    pub(super) fn hash_text(&self) -> &str {
        self.hash64
            .as_deref()
            .unwrap_or_else(|| self.sha256.get(..16).unwrap_or(&self.sha256))
    }

    /// Why a state over this set cannot resume a loader over `current`, naming both sets'
    /// lengths and hashes; `None` for the same set (an older state's missing `hash64` is
    /// the SHA-256's prefix, so the SHA-256 decides).
    pub(super) fn refusal(&self, current: &IndicesIdentity) -> Option<String> {
        if self.count == current.count && self.sha256 == current.sha256 {
            return None;
        }
        Some(format!(
            "the state was saved over another index set ({} ids, hash {}); this loader's \
             current set has {} ids, hash {} (build it with the set in use when the state \
             was saved: the builder's indices, or the last set_indices before the state)",
            self.count,
            self.hash_text(),
            current.count,
            current.hash_text()
        ))
    }

    /// What a state of `format_version` must hold: a SHA-256 of 64 hex digits and, from
    /// format 3 on, a `hash64` that is its first 16 digits. The reason when not.
    pub(super) fn check(&self, format_version: u32) -> Result<(), String> {
        let sha = &self.sha256;
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("indices.sha256 {sha:?} is not 64 hex digits"));
        }
        match &self.hash64 {
            None if format_version >= HASH64_VERSION => Err(format!(
                "not a loader state of format {format_version}: missing field `indices.hash64`"
            )),
            Some(h) if !h.eq_ignore_ascii_case(&sha[..16]) => Err(format!(
                "indices.hash64 {h} does not match indices.sha256 {sha} (whose first 16 \
                 digits it is): the state is corrupt"
            )),
            _ => Ok(()),
        }
    }
}

fn digest(indices: &[u64]) -> sha2::digest::Output<Sha256> {
    let mut ids = Sha256::new();
    for &i in indices {
        ids.update(i.to_le_bytes());
    }
    ids.finalize()
}

/// The 64-bit hash of an index list that [`crate::LoaderState`] records
/// (`indices.hash64`) and that a refused resume names: the first 8 bytes, read
/// big-endian, of the SHA-256 of the ids as little-endian `u64`s, in list order (so a
/// reordered list or a repeated id is another set). Printed as 16 lowercase hex digits,
/// it is the first 16 digits of the state's `indices.sha256`. Stable across builds,
/// platforms and processes. O(ids).
pub fn indices_hash(indices: &[u64]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest(indices)[..8]);
    u64::from_be_bytes(first)
}

/// Lowercase hex digits of `digest`.
pub(super) fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
