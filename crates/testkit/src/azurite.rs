//! Azurite, the Azure Storage emulator (a Node.js program), on loopback for the Azure
//! tests: started if it is installed, with uploads signed by the emulator's public shared
//! key.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::spawned::{Spawned, exchange};

/// How long a request waits on its socket before giving up.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(10);

/// Azurite's blob service (the Azure Storage emulator, a Node.js program) on loopback,
/// in memory; stopped (killed and reaped) on drop.
pub struct Azurite {
    _server: Spawned,
    /// `http://127.0.0.1:PORT/devstoreaccount1`, what `AZURITE_BLOB_STORAGE_URL` names
    /// without the account.
    pub endpoint: String,
    /// The port.
    pub addr: SocketAddr,
}

/// The emulator's well-known account and key (public, the same in every Azurite).
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where an `azurite-blob` executable may be: `FFCV_AZURITE`, the CI's npm prefix under
/// `target/`, then `PATH`.
fn azurite_candidates() -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os("FFCV_AZURITE") {
        c.push(PathBuf::from(p));
    }
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    c.push(root.join("target/azurite/node_modules/.bin/azurite-blob"));
    if let Some(path) = std::env::var_os("PATH") {
        c.extend(std::env::split_paths(&path).map(|d| d.join("azurite-blob")));
    }
    c
}

/// `Tue, 01 Dec 2026 12:00:00 GMT` for `secs` after the epoch (the `x-ms-date` form).
pub fn http_date(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Azurite {
    /// Starts the blob service on a free loopback port and waits (at most 30 s) until it
    /// answers; `Err` says why it could not (the caller skips its test with that message).
    pub fn start() -> Result<Azurite, String> {
        let server = Spawned::start(
            azurite_candidates(),
            "azurite-blob not found (set FFCV_AZURITE, or npm install --prefix target/azurite azurite)",
            |port| {
                let mut args = vec!["--blobHost".into(), "127.0.0.1".into(), "--blobPort".into()];
                args.push(port.to_string());
                args.extend(
                    [
                        "--inMemoryPersistence",
                        "--silent",
                        "--skipApiVersionCheck",
                        "--loose",
                        "--disableTelemetry",
                    ]
                    .map(String::from),
                );
                args
            },
        )?;
        let addr = server.addr;
        Ok(Azurite {
            _server: server,
            endpoint: format!("http://{addr}"),
            addr,
        })
    }

    /// Creates `container` (if new) and uploads `bytes` as the block blob `name`.
    pub fn put(&self, container: &str, name: &str, bytes: &[u8]) {
        let (code, body) = self
            .request("PUT", container, "?restype=container", &[], b"")
            .unwrap_or_else(|e| panic!("create container {container}: {e}"));
        assert!(
            code == 201 || code == 409,
            "create container: {code} {body}"
        );
        let (code, body) = self
            .request(
                "PUT",
                &format!("{container}/{name}"),
                "",
                &[("x-ms-blob-type", "BlockBlob")],
                bytes,
            )
            .unwrap_or_else(|e| panic!("upload {container}/{name}: {e}"));
        assert_eq!(code, 201, "upload {container}/{name}: {body}");
    }

    /// One request signed with the emulator's shared key (Azure's `SharedKey` scheme:
    /// an HMAC-SHA256 of the verb, the standard headers, the `x-ms-*` headers and the
    /// resource). `query` is `""` or `?restype=container`.
    fn request(
        &self,
        verb: &str,
        path: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<(u16, String)> {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let date = http_date(now);
        let version = "2021-08-06";
        let mut ms: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ms.push(("x-ms-date".into(), date));
        ms.push(("x-ms-version".into(), version.into()));
        ms.sort();
        let length = if body.is_empty() {
            String::new()
        } else {
            body.len().to_string()
        };
        let mut to_sign = format!("{verb}\n\n\n{length}\n\n\n\n\n\n\n\n\n");
        for (k, v) in &ms {
            to_sign.push_str(&format!("{k}:{v}\n"));
        }
        // The emulator's resource names the account twice: once as Azure would (the
        // signing account), once from its path-style URL.
        to_sign.push_str(&format!("/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{path}"));
        if let Some(q) = query.strip_prefix('?') {
            let (k, v) = q.split_once('=').unwrap_or((q, ""));
            to_sign.push_str(&format!("\n{k}:{v}"));
        }
        let key = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            &engine.decode(AZURITE_KEY).unwrap(),
        );
        let signature = engine.encode(ring::hmac::sign(&key, to_sign.as_bytes()).as_ref());
        let mut head = format!(
            "{verb} /{AZURITE_ACCOUNT}/{path}{query} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\
             Connection: close\r\nAuthorization: SharedKey {AZURITE_ACCOUNT}:{signature}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in &ms {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        exchange(&self.addr, SOCKET_TIMEOUT, &head, body)
    }
}
