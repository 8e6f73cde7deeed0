//! `ffcv-bench --remote`: the same `.beton` read from the local file and from stores
//! 20 ms away, with the process cache and QuasiRandom, on 128 KiB samples: JPEG
//! photographs decoded as in training, and raw bytes copied out. Not part of `--small`
//! and not in CI (it needs moto, and its epochs wait on the delay).
//!
//! The stores are the test kit's servers on loopback: the moto S3 server, and an HTTP file
//! server of the files on disk with keep-alive, a store that costs nothing per request
//! beyond the bytes, so that its rows measure ffcv's remote path and the added latency,
//! not the server. Each is behind a fault proxy that holds every byte the client sends
//! for the latency ([`Fault::Latency`]): each request arrives that much later, while the
//! answers stream back at loopback speed.
//!
//! The parent process writes the data sets, starts moto and the proxy, uploads the files
//! and runs one child process per data set (`--remote-measure`) whose environment holds
//! the `AWS_*` configuration: the loader reads it the way a user's would, and the parent
//! never edits its own environment. The child alternates local and remote epochs (one
//! warm-up epoch each) and prints its figures as one JSON line.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use beton_io::ReaderOptions;
use ffcv::{Loader, LoaderBuilder, Order};
use ffcv_testkit::servers::{Fault, FaultProxy, FileBody, HttpFileServer, Moto};
use page_cache::PageSource;
use page_cache::remote::{RemoteConfig, RemoteStats, open_url};
use serde_json::{Value, json};

use crate::datasets::{self, Dataset};
use crate::loader_matrix::{self, ImageSet};
use crate::report::Row;

/// Samples per batch: 64 x 128 KiB = 8 MiB, one page of the files.
const BATCH: usize = 64;
/// The bucket the files are uploaded to.
const BUCKET: &str = "ffcv-bench";
/// JPEG photographs in the photo data set (about 128 KiB each, 2 x 256 MiB for both sets).
const PHOTO_SAMPLES: u64 = 2048;
/// Side range and quality of the photographs: about 128 KiB per JPEG.
const PHOTO_SIDES: (u32, u32) = (500, 560);
const PHOTO_QUALITY: u8 = 97;

/// What the parent asks a child to measure.
#[derive(Debug, Clone)]
pub struct MeasureArgs {
    /// The local `.beton`.
    pub local: PathBuf,
    /// The same file in the stores (`s3://BUCKET/KEY`, `http://…`).
    pub urls: Vec<String>,
    /// A decoder for `image` (photographs), or none (raw bytes, the default decoder).
    pub decoder: Option<String>,
    /// The loaders' `prefetch_ahead` (batches).
    pub prefetch_ahead: usize,
    /// Range requests in flight (the remote source's concurrency).
    pub concurrency: usize,
    /// Largest range of one request (a page read is split into parts this long).
    pub part_bytes: u64,
    /// Timed epochs of each loader.
    pub epochs: usize,
}

/// Options of `--remote`.
#[derive(Debug, Clone)]
pub struct RemoteBench {
    /// Delay the proxy adds to each request.
    pub latency: Duration,
    /// `prefetch_ahead` values to measure (one row pair each).
    pub prefetch_ahead: Vec<usize>,
    /// Requests in flight.
    pub concurrency: usize,
    /// Largest range of one request.
    pub part_bytes: u64,
    /// Timed epochs per loader.
    pub epochs: usize,
    /// Whether to measure through moto (S3) too. It is slow: moto copies the whole object
    /// for every range request (about 0.2 s per GET on a 270 MB object, which caps it near
    /// 25 MB/s), hence the HTTP rows beside it.
    pub s3: bool,
}

/// The photograph data set: `PHOTO_SAMPLES` JPEGs of about 128 KiB.
fn ensure_photos(dir: &Path, progress: &dyn Fn(&str)) -> Result<Dataset, String> {
    let (lo, hi) = PHOTO_SIDES;
    let set = ImageSet {
        label: "photos-128k",
        samples: PHOTO_SAMPLES,
        params: format!(
            "revision 1\nffcv_cli::photos::photo_jpeg seed 17, {PHOTO_SAMPLES} images of {lo}..={hi} px, quality {PHOTO_QUALITY}, label = index % 10\n"
        ),
        sample_description: format!("JPEG photographs {lo}-{hi} px, quality {PHOTO_QUALITY}"),
    };
    loader_matrix::ensure_images(dir, &set, progress, &|i| {
        ffcv_cli::photos::photo_jpeg(17, i, (lo, hi), PHOTO_QUALITY)
    })
}

/// Runs the benchmark: rows `remote/DATA/local` and `remote/DATA/s3-20ms/aheadN`, or no
/// rows and a `SKIPPED` message when moto is not installed.
pub fn rows(
    out_dir: &Path,
    bench: &RemoteBench,
    progress: &dyn Fn(&str),
) -> Result<Vec<Row>, String> {
    if let Err(why) = Moto::executable() {
        progress(&format!("SKIPPED remote benchmark: {why}"));
        return Ok(Vec::new());
    }
    let raw = datasets::ensure(out_dir, &datasets::small()[0], progress)?;
    let photos = ensure_photos(out_dir, progress)?;
    let sets = [(&photos, Some(loader_matrix::PHOTOS_DECODER)), (&raw, None)];
    let key = |d: &Dataset| format!("{}.beton", d.label);
    let moto = if bench.s3 {
        let moto = Moto::start()?;
        progress(&format!("moto on {}", moto.addr));
        moto.create_bucket(BUCKET)?;
        Some(moto)
    } else {
        None
    };
    let http = sets
        .iter()
        .fold(HttpFileServer::builder().keep_alive(true), |b, (d, _)| {
            b.file(&key(d), FileBody::Disk(d.path.clone()))
        })
        .start()
        .map_err(|e| format!("cannot start the HTTP file server: {e}"))?;
    let delayed = |upstream| {
        FaultProxy::start_with(upstream, Fault::Latency(bench.latency))
            .map_err(|e| format!("cannot start the delaying proxy: {e}"))
    };
    let s3_proxy = moto.as_ref().map(|m| delayed(m.addr)).transpose()?;
    let http_proxy = delayed(http.addr())?;
    let ms = bench.latency.as_millis();
    let mut rows = Vec::new();
    for (dataset, decoder) in sets {
        let mut urls = vec![http.url_of_via(&key(dataset), http_proxy.addr())];
        if let Some(moto) = &moto {
            let bytes = std::fs::read(&dataset.path)
                .map_err(|e| format!("cannot read {}: {e}", dataset.path.display()))?;
            progress(&format!(
                "uploading {} to moto ({} bytes)",
                key(dataset),
                bytes.len()
            ));
            moto.try_put(BUCKET, &key(dataset), &bytes)?;
            urls.push(format!("s3://{BUCKET}/{}", key(dataset)));
        }
        for &ahead in &bench.prefetch_ahead {
            let args = MeasureArgs {
                local: dataset.path.clone(),
                urls: urls.clone(),
                decoder: decoder.map(str::to_owned),
                prefetch_ahead: ahead,
                concurrency: bench.concurrency,
                part_bytes: bench.part_bytes,
                epochs: bench.epochs,
            };
            progress(&format!(
                "measuring remote/{}: local, {} at {ms} ms, prefetch_ahead {ahead}",
                dataset.label,
                urls.join(" and ")
            ));
            let figures = run_child(&args, s3_proxy.as_ref().map(FaultProxy::addr))?;
            rows.extend(figures_rows(dataset, &args, ms, &figures));
        }
    }
    progress(&format!(
        "proxies: {} HTTP requests over {} connections and {} S3 requests forwarded",
        http_proxy.requests(),
        http_proxy.connections(),
        s3_proxy.as_ref().map_or(0, FaultProxy::requests)
    ));
    Ok(rows)
}

/// Starts `ffcv-bench --remote-measure …` with the store's configuration in its
/// environment and returns the JSON line it prints.
fn run_child(args: &MeasureArgs, s3_proxy: Option<SocketAddr>) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find ffcv-bench itself: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--remote-measure")
        .arg(args.local.as_os_str())
        .args(&args.urls)
        .args(["--prefetch-ahead", &args.prefetch_ahead.to_string()])
        .args(["--concurrency", &args.concurrency.to_string()])
        .args(["--part-bytes", &args.part_bytes.to_string()])
        .args(["--epochs", &args.epochs.to_string()]);
    if let Some(d) = &args.decoder {
        cmd.args(["--decoder", d]);
    }
    // The store's configuration, as a user gives it; no other AWS setting may leak in.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(key);
        }
    }
    if let Some(proxy) = s3_proxy {
        cmd.env("AWS_ENDPOINT_URL", format!("http://{proxy}"));
    }
    cmd.env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run the measuring child: {e}"))?;
    if !out.status.success() {
        return Err(format!("the measuring child failed: {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("the measuring child printed {line:?}: {e}"))
}

fn figures_rows(dataset: &Dataset, args: &MeasureArgs, ms: u128, f: &Value) -> Vec<Row> {
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let local = &f["local"];
    let local_sps = num(local, "samples_per_sec");
    let what = match &args.decoder {
        Some(d) => format!("{}, {d}", dataset.sample_description),
        None => format!("{}, copied", dataset.sample_description),
    };
    let config = format!(
        "{what}; process cache (pages not retained), QuasiRandom, batch {BATCH}, prefetch_ahead {}",
        args.prefetch_ahead
    );
    let mut local_extra = BTreeMap::new();
    local_extra.insert("epoch_seconds".into(), local["epoch_seconds"].clone());
    let mut rows = vec![Row {
        name: format!(
            "remote/{}/local/ahead{}",
            dataset.label, args.prefetch_ahead
        ),
        config: format!("{config}; local file (in the OS page cache)"),
        samples_per_sec: local_sps,
        bytes_per_sec: num(local, "bytes_per_sec"),
        ratio: None,
        ratio_to: None,
        extra: local_extra,
    }];
    let remotes = f["remotes"].as_array().cloned().unwrap_or_default();
    for (url, remote) in args.urls.iter().zip(&remotes) {
        let (kind, server) = if url.starts_with("s3://") {
            ("s3", "moto S3 server")
        } else {
            ("http", "loopback range server")
        };
        let mut extra = BTreeMap::new();
        for key in [
            "epoch_seconds",
            "read_amplification",
            "requests_per_page",
            "mean_requests_in_flight",
            "peak_requests_in_flight",
            "mean_request_seconds",
            "requests_per_epoch",
            "bytes_fetched_per_epoch",
            "payload_bytes_per_epoch",
            "pages_per_epoch",
            "page_size",
        ] {
            extra.insert(key.into(), remote[key].clone());
        }
        extra.insert("latency_ms".into(), json!(ms as u64));
        extra.insert("concurrency".into(), json!(args.concurrency));
        extra.insert("part_bytes".into(), json!(args.part_bytes));
        let sps = num(remote, "samples_per_sec");
        rows.push(Row {
            name: format!(
                "remote/{}/{kind}-{ms}ms/ahead{}",
                dataset.label, args.prefetch_ahead
            ),
            config: format!(
                "{config}; {server} behind a {ms} ms proxy, {} requests in flight at most, parts of {} bytes",
                args.concurrency, args.part_bytes
            ),
            samples_per_sec: sps,
            bytes_per_sec: num(remote, "bytes_per_sec"),
            ratio: (local_sps > 0.0).then(|| sps / local_sps),
            ratio_to: Some("local file".into()),
            extra,
        });
    }
    rows
}

/// The loader of one side: process cache, QuasiRandom, seed 0, all cores, no page kept
/// from one epoch to the next.
fn builder(base: LoaderBuilder, args: &MeasureArgs) -> Result<LoaderBuilder, String> {
    let b = base
        .batch_size(BATCH)
        .num_workers(-1)
        .os_cache(false)
        .order(Order::QuasiRandom)
        .seed(0)
        .prefetch_ahead(args.prefetch_ahead)
        // Every page read every epoch, as for a data set larger than the slots (FFCV's
        // behaviour): otherwise these 256 MiB files stay in the slots after the warm-up
        // epoch and the timed epochs would read nothing from either source.
        .retain_pages(false);
    Ok(match &args.decoder {
        Some(d) => b.decoder("image", d.parse().map_err(|e| format!("decoder {d}: {e}"))?),
        None => b,
    })
}

fn epoch(loader: &mut Loader) -> Result<f64, String> {
    let t0 = Instant::now();
    for batch in loader.iter() {
        let batch = batch.map_err(|e| e.to_string())?;
        black_box(batch.len());
    }
    Ok(t0.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

/// The figures of one remote loader over its timed epochs.
fn remote_figures(
    times: &[f64],
    before: (ffcv::LoaderStats, RemoteStats),
    after: (ffcv::LoaderStats, RemoteStats),
    page_size: u64,
) -> Value {
    let n = times.len().max(1) as f64;
    let (r0, s0) = before;
    let (r1, s1) = after;
    let mut out = side(
        times,
        r1.samples - r0.samples,
        r1.payload_bytes - r0.payload_bytes,
    );
    let requests = s1.requests - s0.requests;
    let reads = s1.reads - s0.reads;
    let fetched = s1.bytes - s0.bytes;
    let payload = r1.payload_bytes - r0.payload_bytes;
    let wall: f64 = times.iter().sum();
    let busy = s1.busy.saturating_sub(s0.busy).as_secs_f64();
    let extra = json!({
        "read_amplification": if payload > 0 { fetched as f64 / payload as f64 } else { 0.0 },
        "requests_per_page": if reads > 0 { requests as f64 / reads as f64 } else { 0.0 },
        // Little's law: the requests' summed durations over the epochs' wall time.
        "mean_requests_in_flight": if wall > 0.0 { busy / wall } else { 0.0 },
        "peak_requests_in_flight": s1.peak_in_flight,
        "mean_request_seconds": if requests > 0 { busy / requests as f64 } else { 0.0 },
        "requests_per_epoch": requests as f64 / n,
        "bytes_fetched_per_epoch": fetched as f64 / n,
        "payload_bytes_per_epoch": payload as f64 / n,
        "pages_per_epoch": reads as f64 / n,
        "page_size": page_size,
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut out, extra) {
        m.extend(e);
    }
    out
}

/// Throughput of `samples` and `payload` bytes over the timed epochs `times` (median).
fn side(times: &[f64], samples: u64, payload: u64) -> Value {
    let n = times.len().max(1) as f64;
    let sec = median(times);
    json!({
        "epoch_seconds": times,
        "samples_per_sec": if sec > 0.0 { samples as f64 / n / sec } else { 0.0 },
        "bytes_per_sec": if sec > 0.0 { payload as f64 / n / sec } else { 0.0 },
    })
}

/// One remote loader of the child, with its source kept for the request counters.
struct RemoteRun {
    loader: Loader,
    source: Arc<page_cache::remote::ObjectSource>,
    page_size: u64,
    times: Vec<f64>,
}

/// The child's side: the local loader and one per URL, epochs alternating between them
/// (one warm-up epoch each); the figures as one JSON object.
pub fn measure(args: &MeasureArgs) -> Result<Value, String> {
    let mut local = builder(Loader::builder(&args.local), args)?
        .build()
        .map_err(|e| e.to_string())?;
    let config = RemoteConfig {
        concurrency: args.concurrency,
        part_bytes: args.part_bytes,
        ..RemoteConfig::default()
    };
    let mut remotes = Vec::new();
    for url in &args.urls {
        let (reader, source) =
            open_url(url, &ReaderOptions::default(), &config).map_err(|e| e.to_string())?;
        let page_size = reader.page_size();
        let dataset = ffcv::Dataset {
            reader: Arc::new(reader),
            source: Some(Arc::clone(&source) as Arc<dyn PageSource>),
            shards: Vec::new(),
        };
        let loader = builder(Loader::builder(url).dataset(dataset), args)?
            .remote_config(config.clone())
            .build()
            .map_err(|e| e.to_string())?;
        remotes.push(RemoteRun {
            loader,
            source,
            page_size,
            times: Vec::new(),
        });
    }
    epoch(&mut local)?;
    for r in &mut remotes {
        epoch(&mut r.loader)?;
    }
    let l0 = local.stats();
    let before: Vec<_> = remotes
        .iter()
        .map(|r| (r.loader.stats(), r.source.stats()))
        .collect();
    let mut local_times = Vec::new();
    for _ in 0..args.epochs {
        local_times.push(epoch(&mut local)?);
        for r in &mut remotes {
            let t = epoch(&mut r.loader)?;
            r.times.push(t);
        }
    }
    let l1 = local.stats();
    let remote_json: Vec<Value> = remotes
        .iter()
        .zip(before)
        .map(|(r, b)| {
            remote_figures(
                &r.times,
                b,
                (r.loader.stats(), r.source.stats()),
                r.page_size,
            )
        })
        .collect();
    Ok(json!({
        "local": side(&local_times, l1.samples - l0.samples, l1.payload_bytes - l0.payload_bytes),
        "remotes": remote_json,
    }))
}
