//! Conversions from and to object storage: inputs and OUT may be `s3://`, `gs://`,
//! `az://` (and inputs `http(s)://`) URLs.
//!
//! - **Inputs** are fetched whole, front to back ([`page_cache::remote::stream`], chunks
//!   fetched ahead; four objects at once), into a staging directory before they are read,
//!   since the readers reach members at random (tar, Parquet) and the writer needs every
//!   input's record count before its first page (the header and the metadata table are
//!   sized by it, and the shards' blocks follow from it), which a tar or TFRecord file
//!   gives only once it has been read to its end. `s3://bucket/prefix*suffix` lists the
//!   bucket (`train-*.tar`); brace lists expand before, as for local names. Errors name
//!   the URL.
//! - **OUT** is written to the staging directory, and each shard is uploaded
//!   ([`page_cache::remote::upload`], multipart, committed only when complete) as soon as
//!   it is written, while later shards are still being written ([`write_and_upload`]);
//!   until its commit the store shows no object under the shard's key, so an interrupted
//!   write leaves no object that looks like a finished shard, and a write that fails
//!   deletes the shards it had committed.
//!
//! The staging directory is `$TMPDIR/ffcv-write-PID` (it needs room for the inputs and the
//! output); it is removed when the last conversion using it ends ([`Staged`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use beton_io::ShardWritten;
use ffcv::page_cache::remote::{self, RemoteConfig};

use crate::error::{Error, Result};

/// Files uploaded at once.
const UPLOADS_AT_ONCE: usize = 4;

/// The staging directory, once made, and what its files stand for.
static STAGING: Mutex<Option<Staging>> = Mutex::new(None);

/// Conversions running in this process (each holds a [`Staged`]).
static USERS: Mutex<usize> = Mutex::new(0);

/// A conversion's hold on the staging directory: made on first use, removed with
/// everything in it (fetched inputs, outputs not uploaded) when the last hold is dropped,
/// so that conversions running side by side (Python threads) share it safely.
pub struct Staged(());

impl Staged {
    /// Holds the staging directory until dropped.
    pub fn hold() -> Staged {
        *USERS.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Staged(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap_or_else(|e| e.into_inner());
        *users = users.saturating_sub(1);
        if *users == 0 {
            remove_staging();
        }
    }
}

struct Staging {
    dir: PathBuf,
    /// Staged file → the URL it was fetched from (inputs) or goes to (outputs).
    urls: HashMap<PathBuf, String>,
    /// How many files were staged (for unique names).
    count: usize,
}

/// Whether `name` is an object-storage URL rather than a local path.
pub fn is_remote(name: &str) -> bool {
    remote::is_remote_url(name)
}

/// Runs `f` with the staging directory (made on first use).
fn with_staging<T>(f: impl FnOnce(&mut Staging) -> Result<T>) -> Result<T> {
    let mut guard = STAGING.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        let dir = std::env::temp_dir().join(format!("ffcv-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
            path: dir.clone(),
            source: e,
        })?;
        *guard = Some(Staging {
            dir,
            urls: HashMap::new(),
            count: 0,
        });
    }
    f(guard.as_mut().expect("made above"))
}

/// Removes the staging directory and everything in it (fetched inputs, outputs not
/// uploaded). [`Staged`] calls it when the last conversion ends.
fn remove_staging() {
    let mut guard = STAGING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(staging) = guard.take() {
        let _ = std::fs::remove_dir_all(&staging.dir);
    }
}

/// The URL a staged file stands for, if it is one.
pub fn url_of(path: &Path) -> Option<String> {
    let guard = STAGING.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref()?.urls.get(path).cloned()
}

/// How to name `path` in messages: its URL when it is a staged object.
pub fn display_name(path: &Path) -> String {
    url_of(path).unwrap_or_else(|| path.display().to_string())
}

/// The last component of a URL's path (`s3://b/dir/x.tar` → `x.tar`).
fn file_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// The objects `name` (a URL, possibly `s3://bucket/prefix*suffix`) stands for.
pub fn expand_remote(name: &str) -> Result<Vec<String>> {
    let Some((prefix, suffix)) = name.split_once('*') else {
        return Ok(vec![name.to_owned()]);
    };
    if suffix.contains(['*', '?', '[']) || name.contains(['?', '[']) {
        return Err(Error::Usage(format!(
            "input `{name}`: a URL takes one `*`, as PREFIX*SUFFIX (s3://bucket/train-*.tar)"
        )));
    }
    let objects = remote::listing::list_prefix_ending(prefix, suffix, &RemoteConfig::default())
        .map_err(|e| Error::Usage(format!("input `{name}`: {e}")))?;
    if objects.is_empty() {
        return Err(Error::Usage(format!("input `{name}`: no object matches")));
    }
    Ok(objects)
}

/// Objects fetched at once.
const FETCHES_AT_ONCE: usize = 4;

/// Fetches every object of `urls` ([`fetch`]), several at once; the local copies' paths,
/// in the order of `urls`. The first failure (in that order) is the error.
pub fn fetch_all(urls: &[String]) -> Result<Vec<PathBuf>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let fetched: Mutex<Vec<Option<Result<PathBuf>>>> =
        Mutex::new((0..urls.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..FETCHES_AT_ONCE.min(urls.len()) {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(url) = urls.get(k) else {
                        return;
                    };
                    let result = fetch(url);
                    fetched.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(result);
                }
            });
        }
    });
    fetched
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .zip(urls)
        .map(|(r, url)| {
            r.unwrap_or_else(|| {
                Err(Error::Remote {
                    url: url.clone(),
                    reason: "not fetched".into(),
                })
            })
        })
        .collect()
}

/// Fetches the object at `url` into the staging directory; the local copy's path.
pub fn fetch(url: &str) -> Result<PathBuf> {
    let local = with_staging(|s| {
        s.count += 1;
        let local = s.dir.join(format!("in-{:05}-{}", s.count, file_name(url)));
        s.urls.insert(local.clone(), url.to_owned());
        Ok(local)
    })?;
    let failed = |reason: String| Error::Remote {
        url: url.to_owned(),
        reason,
    };
    let mut reader = remote::stream::ObjectReader::open(url, &RemoteConfig::default())
        .map_err(|e| failed(e.to_string()))?;
    let mut file = std::fs::File::create(&local).map_err(|e| Error::Io {
        path: local.clone(),
        source: e,
    })?;
    let copied = std::io::copy(&mut reader, &mut file).map_err(|e| failed(e.to_string()))?;
    tracing::debug!(url, bytes = copied, local = %local.display(), "fetched input object");
    Ok(local)
}

/// Where to write OUT: OUT itself, or for a URL a file in the staging directory that
/// [`write_and_upload`] uploads to it.
pub fn local_output(out: &Path) -> Result<PathBuf> {
    let name = out.to_string_lossy();
    if !is_remote(&name) {
        return Ok(out.to_path_buf());
    }
    if name.starts_with("http://") || name.starts_with("https://") {
        return Err(Error::Usage(format!(
            "OUT `{name}`: uploads go to s3://, gs:// or az:// URLs"
        )));
    }
    with_staging(|s| {
        s.count += 1;
        let dir = s.dir.join(format!("out-{:05}", s.count));
        std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
            path: dir.clone(),
            source: e,
        })?;
        let local = dir.join(file_name(&name));
        s.urls.insert(dir, base_url(&name).to_owned());
        Ok(local)
    })
}

/// Writes `text` as the skip report of `out`, `OUT.skipped.json` beside OUT (uploaded
/// when OUT is a URL); where it went.
pub fn write_skip_report(out: &Path, text: &[u8]) -> Result<String> {
    let mut name = out.as_os_str().to_owned();
    name.push(".skipped.json");
    let report = PathBuf::from(name);
    let shown = report.to_string_lossy().into_owned();
    if is_remote(&shown) {
        remote::upload::upload_from(&mut &text[..], &shown, &RemoteConfig::default()).map_err(
            |e| Error::Remote {
                url: shown.clone(),
                reason: format!("cannot upload the skip report: {e}"),
            },
        )?;
    } else {
        std::fs::write(&report, text).map_err(|source| Error::Io {
            path: report.clone(),
            source,
        })?;
    }
    Ok(shown)
}

/// The URL without its last component (`s3://b/dir/x.beton` → `s3://b/dir`).
fn base_url(url: &str) -> &str {
    url.rsplit_once('/').map_or(url, |(base, _)| base)
}

/// The URL folder a staged output file goes to, if `path` is one ([`local_output`]).
pub fn upload_base(path: &Path) -> Option<String> {
    url_of(path.parent()?)
}

/// A shard handed over for upload: its number, its open file, its URL.
type Upload = (u64, std::fs::File, String);

/// How a shard's upload went: its number, its URL, and the error if it failed.
type Uploaded = (u64, String, std::result::Result<(), String>);

/// Runs `write` (a write into the staging directory) with a hook that uploads each shard
/// as soon as its file is complete, several at once, while later shards are still being
/// written; then names each shard by its URL (`name_of(k)` is shard k's local name, whose
/// file name goes under `base`) and removes the staged files. A failed write, or a failed
/// upload, deletes the shards already committed, so that a failure leaves none of the
/// set in the store (as a local write leaves no file); its error is the write's, else the
/// first failed upload's (by shard).
pub fn write_and_upload(
    base: &str,
    name_of: &(dyn Fn(u64) -> PathBuf + Sync),
    write: impl FnOnce(&(dyn Fn(u64, &Path) + Sync)) -> beton_io::Result<Vec<ShardWritten>>,
) -> Result<Vec<ShardWritten>> {
    let config = RemoteConfig::default();
    let url_of_shard = |k: u64| {
        let name = name_of(k);
        let name = name.file_name().unwrap_or_default().to_string_lossy();
        format!("{base}/{name}")
    };
    let (send, receive) = std::sync::mpsc::channel::<Upload>();
    let receive = Mutex::new(receive);
    let send = Mutex::new(Some(send));
    let results: Mutex<Vec<Uploaded>> = Mutex::new(Vec::new());
    let record = |k: u64, url: String, result: std::result::Result<(), String>| {
        results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((k, url, result));
    };
    let written = std::thread::scope(|scope| {
        for _ in 0..UPLOADS_AT_ONCE {
            scope.spawn(|| {
                loop {
                    let next = receive.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((k, mut file, url)) = next else { return };
                    let result = remote::upload::upload_from(&mut file, &url, &config)
                        .map(|stats| {
                            tracing::info!(
                                url,
                                bytes = stats.bytes,
                                parts = stats.parts,
                                "uploaded shard"
                            );
                        })
                        .map_err(|e| e.to_string());
                    record(k, url, result);
                }
            });
        }
        // The file is opened here, on the writing thread: the writer renames or removes
        // it once the write ends, which an open file outlives.
        let finished = |k: u64, file: &Path| {
            let url = url_of_shard(k);
            match std::fs::File::open(file) {
                Ok(opened) => {
                    let sender = send.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(sender) = sender.as_ref() {
                        let _ = sender.send((k, opened, url));
                    }
                }
                Err(e) => record(
                    k,
                    url,
                    Err(format!("cannot open the shard to upload it: {e}")),
                ),
            }
        };
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(&finished)));
        // No more shards: the uploaders finish the queue and end (after a panic too, or
        // the scope would wait for them forever).
        send.lock().unwrap_or_else(|e| e.into_inner()).take();
        written.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(k, ..)| *k);
    let failure = match &written {
        Err(_) => None,
        Ok(_) => results.iter().find_map(|(_, url, r)| {
            r.as_ref().err().map(|reason| Error::Remote {
                url: url.clone(),
                reason: reason.clone(),
            })
        }),
    };
    let mut shards = match (written, failure) {
        (Ok(shards), None) => shards,
        (written, failure) => {
            for (_, url, result) in &results {
                if result.is_ok()
                    && let Err(e) = remote::upload::delete(url, &config)
                {
                    tracing::warn!(url, error = %e, "cannot delete a shard of the failed write");
                }
            }
            return Err(match (written, failure) {
                (Err(source), _) => {
                    let staged = name_of(0);
                    let folder = staged.parent().unwrap_or(Path::new("")).display();
                    Error::Output {
                        message: source
                            .to_string()
                            .replace(&format!("{folder}/"), &format!("{base}/")),
                        source: Box::new(source),
                    }
                }
                (_, Some(failure)) => failure,
                (Ok(_), None) => unreachable!("handled above"),
            });
        }
    };
    for (k, shard) in shards.iter_mut().enumerate() {
        let _ = std::fs::remove_file(&shard.path);
        shard.path = PathBuf::from(url_of_shard(k as u64));
    }
    Ok(shards)
}
