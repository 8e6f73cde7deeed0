//! `ffcv write` from and to object storage: inputs and OUT may be `s3://`, `gs://`,
//! `az://` (and inputs `http(s)://`) URLs.
//!
//! - **Inputs** are fetched whole, front to back ([`page_cache::remote::stream`], chunks
//!   fetched ahead; four objects at once), into a staging directory before they are read, since the readers
//!   reach members at random (tar, Parquet). `s3://bucket/prefix*suffix` lists the bucket
//!   (`train-*.tar`); brace lists expand before, as for local names. Errors name the URL.
//! - **OUT** is written to the staging directory first, then each file is uploaded
//!   ([`page_cache::remote::upload`], multipart, committed only when complete, several
//!   files at once); until its commit the store shows no object under the shard's key, so
//!   an interrupted write leaves no object that looks like a finished shard.
//!
//! The staging directory is `$TMPDIR/ffcv-write-PID` (it needs room for the inputs and the
//! output) and is removed when the command ends ([`remove_staging`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use beton_io::ShardWritten;
use ffcv::page_cache::remote::{self, RemoteConfig};

use crate::error::{CliError, Result};

/// Files uploaded at once.
const UPLOADS_AT_ONCE: usize = 4;

/// The staging directory, once made, and what its files stand for.
static STAGING: Mutex<Option<Staging>> = Mutex::new(None);

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
        std::fs::create_dir_all(&dir).map_err(|e| CliError::Io {
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
/// uploaded). Call when the command ends.
pub fn remove_staging() {
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
        return Err(CliError::Usage(format!(
            "input `{name}`: a URL takes one `*`, as PREFIX*SUFFIX (s3://bucket/train-*.tar)"
        )));
    }
    let objects = remote::listing::list_prefix_ending(prefix, suffix, &RemoteConfig::default())
        .map_err(|e| CliError::Usage(format!("input `{name}`: {e}")))?;
    if objects.is_empty() {
        return Err(CliError::Usage(format!(
            "input `{name}`: no object matches"
        )));
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
                Err(CliError::Remote {
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
    let failed = |reason: String| CliError::Remote {
        url: url.to_owned(),
        reason,
    };
    let mut reader = remote::stream::ObjectReader::open(url, &RemoteConfig::default())
        .map_err(|e| failed(e.to_string()))?;
    let mut file = std::fs::File::create(&local).map_err(|e| CliError::Io {
        path: local.clone(),
        source: e,
    })?;
    let copied = std::io::copy(&mut reader, &mut file).map_err(|e| failed(e.to_string()))?;
    tracing::debug!(url, bytes = copied, local = %local.display(), "fetched input object");
    Ok(local)
}

/// Where to write OUT: OUT itself, or for a URL a file in the staging directory that
/// [`commit`] uploads to it.
pub fn local_output(out: &Path) -> Result<PathBuf> {
    let name = out.to_string_lossy();
    if !is_remote(&name) {
        return Ok(out.to_path_buf());
    }
    if name.starts_with("http://") || name.starts_with("https://") {
        return Err(CliError::Usage(format!(
            "OUT `{name}`: uploads go to s3://, gs:// or az:// URLs"
        )));
    }
    with_staging(|s| {
        s.count += 1;
        let dir = s.dir.join(format!("out-{:05}", s.count));
        std::fs::create_dir_all(&dir).map_err(|e| CliError::Io {
            path: dir.clone(),
            source: e,
        })?;
        let local = dir.join(file_name(&name));
        s.urls.insert(dir, base_url(&name).to_owned());
        Ok(local)
    })
}

/// Writes `text` as the skip report of `out`, `OUT.skipped.json` beside OUT (uploaded
/// when OUT is a URL), and prints where it went.
pub fn write_skip_report(out: &Path, text: &[u8]) -> Result<()> {
    let mut name = out.as_os_str().to_owned();
    name.push(".skipped.json");
    let report = PathBuf::from(name);
    let shown = report.to_string_lossy().into_owned();
    if is_remote(&shown) {
        remote::upload::upload_from(&mut &text[..], &shown, &RemoteConfig::default()).map_err(
            |e| CliError::Remote {
                url: shown.clone(),
                reason: format!("cannot upload the skip report: {e}"),
            },
        )?;
    } else {
        std::fs::write(&report, text).map_err(|source| CliError::Io {
            path: report.clone(),
            source,
        })?;
    }
    println!("listed in {shown}");
    Ok(())
}

/// The URL without its last component (`s3://b/dir/x.beton` → `s3://b/dir`).
fn base_url(url: &str) -> &str {
    url.rsplit_once('/').map_or(url, |(base, _)| base)
}

/// Uploads the staged shards among `shards` (those [`local_output`] placed) to their
/// URLs, several at once, and names each by its URL from then on; local shards are left
/// as they are. The first failure is the error; shards committed before it stay.
pub fn commit(shards: &mut [ShardWritten]) -> Result<()> {
    let targets: Vec<(usize, PathBuf, String)> = shards
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let dir = s.path.parent()?;
            let base = url_of(dir)?;
            let name = s.path.file_name()?.to_string_lossy().into_owned();
            Some((i, s.path.clone(), format!("{base}/{name}")))
        })
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    let config = RemoteConfig::default();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, std::result::Result<(), String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..UPLOADS_AT_ONCE.min(targets.len()) {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((i, local, url)) = targets.get(k) else {
                        return;
                    };
                    let result = remote::upload::upload_file(local, url, &config)
                        .map(|stats| {
                            tracing::info!(
                                url,
                                bytes = stats.bytes,
                                parts = stats.parts,
                                "uploaded shard"
                            );
                            let _ = std::fs::remove_file(local);
                        })
                        .map_err(|e| e.to_string());
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((*i, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    for (i, result) in results {
        let url = &targets.iter().find(|t| t.0 == i).expect("a target").2;
        if let Err(reason) = result {
            return Err(CliError::Remote {
                url: url.clone(),
                reason,
            });
        }
        shards[i].path = PathBuf::from(url);
    }
    Ok(())
}
