//! Datasets in object storage (feature `remote`): [`ObjectSource`], a [`PageSource`] over
//! one object read by range requests through the `object_store` crate (S3-compatible
//! stores and plain HTTP(S) servers), and [`open_url`], which opens a `.beton` there.
//!
//! The object's size and ETag are pinned when it is opened; every later range request
//! asks for that ETag (`If-Match`) and checks the one in the answer, so an object replaced
//! after open fails the read instead of handing out bytes of two different files.
//! Transient failures (timeouts, 5xx, resets) are retried by `object_store` with bounded
//! exponential backoff; each request has a timeout and a whole read an outer deadline, so
//! nothing waits forever.
//!
//! Besides: [`listing`] lists a prefix's objects, [`stream::ObjectReader`] reads one object
//! front to back (for formats read in sequence), and [`upload`] writes objects as
//! multipart uploads committed only when complete.

pub mod listing;
pub mod stream;
pub mod upload;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use beton_io::{Reader, ReaderOptions};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, ClientOptions, GetOptions, GetRange, ObjectStore,
    ObjectStoreExt, RetryConfig,
};

use crate::source::{PageSource, SourceKind};

/// Timeouts and retries of remote reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteConfig {
    /// Limit of one HTTP request, connection included (default 30 s).
    pub request_timeout: Duration,
    /// Limit of establishing a connection (default 5 s).
    pub connect_timeout: Duration,
    /// Retries of a transient failure (default 5); 0 disables them.
    pub max_retries: usize,
    /// First backoff between retries (default 100 ms), doubled each time.
    pub initial_backoff: Duration,
    /// Longest backoff between retries (default 5 s).
    pub max_backoff: Duration,
    /// No retry starts later than this after the first attempt (default 60 s).
    pub retry_timeout: Duration,
    /// Range requests in flight at once (the process cache's reader threads for a remote
    /// source; default 32). Memory stays bounded by the cache's slots either way.
    pub concurrency: usize,
    /// Longest range one request asks for (default 8 MiB, FFCV's default page: one
    /// request per page). A longer page read is split into parts of at most this many
    /// bytes, requested at once, so that more requests are in flight without more page
    /// slots; every part is pinned to the ETag like a whole page.
    pub part_bytes: u64,
}

/// [`RemoteConfig::part_bytes`] by default.
pub const DEFAULT_PART_BYTES: u64 = 8 << 20;

/// The smallest part a page read is split into: below this a request's fixed cost
/// dominates whatever it carries.
const MIN_PART_BYTES: u64 = 64 << 10;

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(60),
            concurrency: 32,
            part_bytes: DEFAULT_PART_BYTES,
        }
    }
}

impl RemoteConfig {
    /// The outer deadline of one read: every attempt at its timeout, with the backoffs
    /// between them. A read still running then has hung somewhere below us.
    fn read_deadline(&self) -> Duration {
        let attempts = u32::try_from(self.max_retries.saturating_add(1)).unwrap_or(u32::MAX);
        self.request_timeout
            .saturating_mul(attempts)
            .saturating_add(self.retry_timeout)
            .saturating_add(self.connect_timeout)
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// Whether `path` names a remote object this build can open (`s3://`, `gs://`,
/// `az://`, `abfs[s]://`, `http(s)://`, …; see `docs/remote.md`).
pub fn is_remote_url(path: &str) -> bool {
    remote_kind(path).is_some()
}

fn remote_kind(url: &str) -> Option<SourceKind> {
    crate::store_url::kind(url)
}

/// Counters of an [`ObjectSource`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Range requests completed (retries inside one request not counted; a read split
    /// into parts counts each part).
    pub requests: u64,
    /// Reads completed ([`PageSource::read_at`] calls: a page, or a structure range).
    pub reads: u64,
    /// Most range requests in flight at once so far.
    pub peak_in_flight: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Reads that failed after their retries.
    pub failures: u64,
    /// Sum of the requests' durations (sent to last byte), for the mean; over the wall
    /// time it is the mean number in flight.
    pub busy: Duration,
}

/// One object in a store, pinned at open (size and ETag), read by range requests.
///
/// Owns a small tokio runtime (two worker threads, named `ffcv-object-store`) that
/// drives the requests; callers block on it from their own threads, so as many requests
/// are in flight as threads read at once. Dropping the source shuts the runtime down and
/// joins its threads.
pub struct ObjectSource {
    url: String,
    kind: SourceKind,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    size: u64,
    e_tag: Option<String>,
    version: Option<String>,
    config: RemoteConfig,
    runtime: Option<tokio::runtime::Runtime>,
    requests: AtomicU64,
    reads: AtomicU64,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    busy_nanos: Arc<AtomicU64>,
}

impl std::fmt::Debug for ObjectSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSource")
            .field("url", &self.url)
            .field("size", &self.size)
            .field("e_tag", &self.e_tag)
            .finish_non_exhaustive()
    }
}

/// An error of a remote read, as an `io::Error` whose message says what to do.
fn remote_error(url: &str, what: &str, e: object_store::Error) -> io::Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => io::ErrorKind::NotFound,
        E::Precondition { .. } => io::ErrorKind::InvalidData,
        E::Unauthenticated { .. } | E::PermissionDenied { .. } => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::Other,
    };
    let hint = match &e {
        E::Precondition { .. } => {
            " (the object changed since it was opened; reopen it to read the new version)"
        }
        _ => "",
    };
    io::Error::new(kind, format!("{what} {url}: {e}{hint}"))
}

impl ObjectSource {
    /// Connects to the store `url` names and pins the object's size and ETag.
    ///
    /// `s3://bucket/key` takes its configuration from the standard environment variables
    /// (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_REGION`, …), `gs://` from `GOOGLE_*` and the Azure forms
    /// from `AZURE_*` (`object_store`'s `from_env` builders); `http(s)://host/path` needs
    /// a server that answers `HEAD` with the length and `GET` with byte ranges.
    pub fn open(url: &str, config: &RemoteConfig) -> io::Result<ObjectSource> {
        let kind = remote_kind(url).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{url}: not an s3://, gs://, az://, abfs[s]://, http:// or https:// URL"),
            )
        })?;
        // reqwest is built without a default TLS provider (so no C-built crypto); give
        // rustls the `ring` one. Fails only if the process already chose one: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (store, location) = connect(url, kind, config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ffcv-object-store")
            .enable_all()
            .build()?;
        let mut source = ObjectSource {
            url: url.to_owned(),
            kind,
            store,
            location,
            size: 0,
            e_tag: None,
            version: None,
            config: config.clone(),
            runtime: Some(runtime),
            requests: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak_in_flight: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            busy_nanos: Arc::new(AtomicU64::new(0)),
        };
        let meta = source.block_on("HEAD", async { source.store.head(&source.location).await })?;
        source.size = meta.size;
        source.e_tag = meta.e_tag;
        source.version = meta.version;
        tracing::debug!(url, size = source.size, e_tag = ?source.e_tag, "opened remote object");
        Ok(source)
    }

    /// The ETag pinned at open, if the server gave one.
    pub fn e_tag(&self) -> Option<&str> {
        self.e_tag.as_deref()
    }

    /// The object version seen at open, if the store reports versions.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The timeouts and retries in use.
    pub fn config(&self) -> &RemoteConfig {
        &self.config
    }

    /// Requests, bytes and time so far.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.requests.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            peak_in_flight: self.peak_in_flight.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_nanos.load(Ordering::Relaxed)),
        }
    }

    /// Runs `fut` on the source's runtime under the read deadline.
    fn block_on<T>(
        &self,
        what: &str,
        fut: impl Future<Output = object_store::Result<T>>,
    ) -> io::Result<T> {
        let Some(rt) = &self.runtime else {
            return Err(io::Error::other(format!("{}: source closed", self.url)));
        };
        let deadline = self.config.read_deadline();
        match rt.block_on(async { tokio::time::timeout(deadline, fut).await }) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(remote_error(&self.url, what, e))
            }
            Err(_) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{what} {}: no answer within {:?} (timeouts and retries included)",
                        self.url, deadline
                    ),
                ))
            }
        }
    }
}

impl PageSource for ObjectSource {
    fn name(&self) -> &str {
        &self.url
    }

    fn kind(&self) -> SourceKind {
        self.kind
    }

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "bytes {offset}..{} are past the end of the {}-byte object",
                        offset.saturating_add(buf.len() as u64),
                        self.size
                    ),
                )
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let what = format!("GET bytes {offset}..{end} of");
        let parts = part_ranges(offset, end, self.config.part_bytes);
        let n = parts.len() as u64;
        let now = self.in_flight.fetch_add(n, Ordering::Relaxed) + n;
        self.peak_in_flight.fetch_max(now, Ordering::Relaxed);
        let answers = self.block_on(&what, async {
            // One task per part, all in flight at once; dropping the set (an error, the
            // outer deadline) aborts the others.
            let mut set = tokio::task::JoinSet::new();
            for range in parts.iter().cloned() {
                let store = Arc::clone(&self.store);
                let location = self.location.clone();
                let if_match = self.e_tag.clone();
                let busy = Arc::clone(&self.busy_nanos);
                set.spawn(async move {
                    let t0 = Instant::now();
                    let options = GetOptions {
                        range: Some(GetRange::Bounded(range.clone())),
                        if_match,
                        ..GetOptions::default()
                    };
                    let result = store.get_opts(&location, options).await?;
                    let e_tag = result.meta.e_tag.clone();
                    let bytes = result.bytes().await?;
                    busy.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    Ok::<_, object_store::Error>((range, bytes, e_tag))
                });
            }
            let mut answers = Vec::with_capacity(parts.len());
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok(answer) => answers.push(answer?),
                    Err(e) => {
                        return Err(object_store::Error::Generic {
                            store: "ffcv",
                            source: Box::new(e),
                        });
                    }
                }
            }
            Ok(answers)
        });
        self.in_flight.fetch_sub(n, Ordering::Relaxed);
        for (range, bytes, e_tag) in answers? {
            let changed = matches!((&self.e_tag, &e_tag), (Some(a), Some(b)) if a != b);
            if changed {
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{what} {}: the object changed since it was opened (ETag {} then, {} \
                         now); reopen it to read the new version",
                        self.url,
                        self.e_tag.as_deref().unwrap_or("?"),
                        e_tag.as_deref().unwrap_or("?")
                    ),
                ));
            }
            let want = range.end - range.start;
            if bytes.len() as u64 != want {
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{what} {}: short read, {} of {want} bytes at offset {}",
                        self.url,
                        bytes.len(),
                        range.start
                    ),
                ));
            }
            // In bounds: the parts tile offset..end, which is buf.
            let at = (range.start - offset) as usize;
            buf[at..at + bytes.len()].copy_from_slice(&bytes);
            self.bytes.fetch_add(want, Ordering::Relaxed);
        }
        self.requests.fetch_add(n, Ordering::Relaxed);
        self.reads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn preferred_concurrency(&self) -> usize {
        self.config.concurrency.max(1)
    }

    fn pinned_identity(&self) -> Option<String> {
        match (&self.e_tag, &self.version) {
            (None, None) => None,
            (e_tag, version) => Some(format!("etag={e_tag:?} version={version:?}")),
        }
    }
}

impl Drop for ObjectSource {
    fn drop(&mut self) {
        // Joins the runtime's worker threads; a request still in flight is abandoned.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// `offset..end` cut into consecutive parts of at most `part_bytes` (at least
/// [`MIN_PART_BYTES`]), of nearly equal length so that no tiny last part pays a whole
/// request's latency for a few bytes.
fn part_ranges(offset: u64, end: u64, part_bytes: u64) -> Vec<std::ops::Range<u64>> {
    let len = end - offset;
    let part = part_bytes.max(MIN_PART_BYTES);
    let count = len.div_ceil(part).max(1);
    let base = len / count;
    let extra = len % count;
    let mut at = offset;
    (0..count)
        .map(|i| {
            let l = base + u64::from(i < extra);
            let r = at..at + l;
            at += l;
            r
        })
        .collect()
}

/// The store `url` names and the object's path in it, configured from the environment
/// (see [`ObjectSource::open`]) with `config`'s timeouts and retries. `kind` is the URL's
/// ([`remote_kind`]).
pub(crate) fn connect(
    url: &str,
    kind: SourceKind,
    config: &RemoteConfig,
) -> io::Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let invalid =
        |e: object_store::Error| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}"));
    let store_and_location: (Arc<dyn ObjectStore>, ObjectPath) = match kind {
        SourceKind::S3 | SourceKind::Gcs | SourceKind::Azure => {
            let key = crate::store_url::key(url, kind)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let location = ObjectPath::from_url_path(key)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
            // Timeouts go in as configuration keys, not `with_client_options`, which
            // would replace the client settings `from_env` read (`*_ALLOW_HTTP`, …).
            let timeout = humantime(config.request_timeout);
            let connect = humantime(config.connect_timeout);
            let store: Arc<dyn ObjectStore> = match kind {
                SourceKind::S3 => Arc::new(
                    AmazonS3Builder::from_env()
                        .with_url(url)
                        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), timeout)
                        .with_config(
                            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                            connect,
                        )
                        .with_retry(config.retry())
                        .build()
                        .map_err(invalid)?,
                ),
                SourceKind::Gcs => Arc::new(
                    GoogleCloudStorageBuilder::from_env()
                        .with_url(url)
                        .with_config(GoogleConfigKey::Client(ClientConfigKey::Timeout), timeout)
                        .with_config(
                            GoogleConfigKey::Client(ClientConfigKey::ConnectTimeout),
                            connect,
                        )
                        .with_retry(config.retry())
                        .build()
                        .map_err(invalid)?,
                ),
                _ => Arc::new(
                    MicrosoftAzureBuilder::from_env()
                        .with_url(url)
                        .with_config(AzureConfigKey::Client(ClientConfigKey::Timeout), timeout)
                        .with_config(
                            AzureConfigKey::Client(ClientConfigKey::ConnectTimeout),
                            connect,
                        )
                        .with_retry(config.retry())
                        .build()
                        .map_err(invalid)?,
                ),
            };
            (store, location)
        }
        _ => {
            // The store is the directory; the object is the file name in it.
            let (base, name) = url
                .rsplit_once('/')
                .filter(|(base, name)| {
                    !name.is_empty()
                        && base
                            .split_once("://")
                            .is_some_and(|(_, host)| !host.is_empty())
                })
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{url}: an HTTP URL names a file: http://HOST/PATH"),
                    )
                })?;
            let options = ClientOptions::new()
                .with_allow_http(kind == SourceKind::Http && url.starts_with("http:"))
                .with_timeout(config.request_timeout)
                .with_connect_timeout(config.connect_timeout);
            let store = HttpBuilder::new()
                .with_url(base)
                .with_client_options(options)
                .with_retry(config.retry())
                .build()
                .map_err(invalid)?;
            let location = ObjectPath::from_url_path(name)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
            (Arc::new(store), location)
        }
    };
    Ok(store_and_location)
}

fn humantime(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Opens the `.beton` object at `url`: pins it ([`ObjectSource::open`]), then reads and
/// validates its structure by range requests ([`Reader::open_ranges`]). The reader names
/// the URL in every error; its data is read through the returned source.
pub fn open_url(
    url: &str,
    options: &ReaderOptions,
    config: &RemoteConfig,
) -> beton_io::Result<(Reader, Arc<ObjectSource>)> {
    let source = ObjectSource::open(url, config).map_err(|source| beton_io::Error::Io {
        path: url.into(),
        op: "open".into(),
        source,
    })?;
    let mut read = |start: u64, end: u64| source.read_range(start, end);
    let reader = Reader::open_ranges(url, source.len(), &mut read, options)?;
    Ok((reader, Arc::new(source)))
}

#[cfg(test)]
mod tests {
    use super::part_ranges;

    #[test]
    fn parts_tile_the_range_in_nearly_equal_lengths() {
        assert_eq!(part_ranges(10, 20, 8 << 20), vec![10..20]);
        let parts = part_ranges(0, (8 << 20) + 3, 2 << 20);
        assert_eq!(parts.len(), 5);
        assert_eq!(parts[0], 0..1_677_723);
        assert_eq!(parts.last().unwrap().end, (8 << 20) + 3);
        assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
        let lens: Vec<u64> = parts.iter().map(|r| r.end - r.start).collect();
        assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
        // Never below the floor: 1 MiB in 1-byte parts is 16 parts of 64 KiB.
        assert_eq!(part_ranges(0, 1 << 20, 1).len(), 16);
    }
}
