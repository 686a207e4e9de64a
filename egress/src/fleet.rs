//! Policies for a fleet: signed bundles polled from a plain HTTP(S) URL
//! (any static file server, object store or CDN), and decision records
//! shipped in batches to an HTTP endpoint (docs/bundles.md).
//!
//! The bundle at `--bundle-url` is fetched with `If-None-Match`, verified
//! with the trusted keys, and only then written (atomically) to the
//! `--policy` file, which the policy watcher swaps in: the file is always
//! the last good bundle, so a restart while the server is away starts from
//! it, and a bundle that does not verify never replaces it. Errors back off
//! exponentially, from the poll interval to five minutes.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gatehouse::bundle::PublicKey;
use gatehouse::log::{DecisionEvent, DecisionSink};

/// Why the fleet options or a bundle could not be used: what a person
/// should read (the URL or file, and what went wrong).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FleetError(String);

impl From<String> for FleetError {
    fn from(s: String) -> Self {
        FleetError(s)
    }
}
use crate::policy::{load_bytes, stderr_line};

/// The largest bundle fetched.
pub const MAX_BUNDLE_BYTES: u64 = 64 * 1024 * 1024;
/// The longest wait between two tries after errors.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Where the bundles come from.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// The bundle's URL (`http://` or `https://`).
    pub url: String,
    /// How often to ask whether it changed.
    pub interval: Duration,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// What one poll found.
enum Fetched {
    NotModified,
    New {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
}

fn fetch(agent: &ureq::Agent, url: &str, etag: Option<&str>) -> Result<Fetched, FleetError> {
    let mut req = agent.get(url);
    if let Some(e) = etag {
        req = req.header("If-None-Match", e);
    }
    let resp = req.call().map_err(|e| e.to_string())?;
    match resp.status().as_u16() {
        304 => Ok(Fetched::NotModified),
        200 => {
            let etag = resp
                .headers()
                .get("etag")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let mut bytes = Vec::new();
            resp.into_body()
                .into_reader()
                .take(MAX_BUNDLE_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| e.to_string())?;
            if bytes.len() as u64 > MAX_BUNDLE_BYTES {
                return Err(FleetError::from(format!(
                    "the bundle is larger than {MAX_BUNDLE_BYTES} bytes"
                )));
            }
            Ok(Fetched::New { bytes, etag })
        }
        s => Err(FleetError::from(format!("HTTP {s}"))),
    }
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, then
/// a rename), so the watcher never reads half a bundle.
fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The poller's state: what it verifies with and where it keeps the last
/// good bundle.
struct Poller {
    fleet: Fleet,
    cache: PathBuf,
    name: Option<String>,
    trusted: Vec<PublicKey>,
    etag: Option<String>,
    agent: ureq::Agent,
}

impl Poller {
    /// One poll: `Ok(true)` when a new verified bundle was stored.
    fn poll(&mut self) -> Result<bool, FleetError> {
        match fetch(&self.agent, &self.fleet.url, self.etag.as_deref())? {
            Fetched::NotModified => Ok(false),
            Fetched::New { bytes, etag } => {
                // The same bytes again (a server without ETags): nothing to do.
                if std::fs::read(&self.cache).is_ok_and(|old| old == bytes) {
                    self.etag = etag;
                    return Ok(false);
                }
                // Never older than the last good bundle on disk: a server
                // that need not be trusted cannot roll the fleet back.
                let on_disk = std::fs::read(&self.cache)
                    .ok()
                    .and_then(|b| gatehouse::bundle::serial(&b))
                    .unwrap_or(0);
                let checked = gatehouse::bundle::not_older(&bytes, on_disk)
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        load_bytes(
                            &self.cache,
                            bytes.clone(),
                            self.name.as_deref(),
                            &self.trusted,
                        )
                        .map_err(|e| e.to_string())
                    });
                // A refused bundle's ETag is kept too: the same bytes are
                // not fetched again, and a new bundle has a new ETag.
                self.etag = etag;
                let set = checked.map_err(|e| {
                    format!("bundle refused, the last good policy stays in force: {e}")
                })?;
                store(&self.cache, &bytes).map_err(|e| format!("{}: {e}", self.cache.display()))?;
                stderr_line(format!(
                    "gatehouse-egress: new bundle from {} (revision {})",
                    self.fleet.url,
                    set.revision()
                ));
                Ok(true)
            }
        }
    }
}

/// Fetches the bundle once before serving. A verified bundle replaces the
/// `cache` file; when the fetch fails, a `cache` file that verifies is used
/// (the last good bundle); with neither, the error.
pub fn prime(
    fleet: &Fleet,
    cache: &Path,
    name: Option<&str>,
    trusted: &[PublicKey],
) -> Result<(), FleetError> {
    let mut p = Poller {
        fleet: fleet.clone(),
        cache: cache.to_path_buf(),
        name: name.map(String::from),
        trusted: trusted.to_vec(),
        etag: None,
        agent: agent(),
    };
    match p.poll() {
        Ok(_) => Ok(()),
        Err(e) => {
            let last = std::fs::read(cache)
                .map_err(|r| format!("{}: {r}", cache.display()))
                .and_then(|b| load_bytes(cache, b, name, trusted).map_err(|e| e.to_string()));
            match last {
                Ok(set) => {
                    stderr_line(format!(
                        "gatehouse-egress: {}: {e}; starting from the last good bundle {} (revision {})",
                        fleet.url,
                        cache.display(),
                        set.revision()
                    ));
                    Ok(())
                }
                Err(last) => Err(FleetError::from(format!(
                    "no policy: {}: {e}; and no last good bundle: {last}",
                    fleet.url
                ))),
            }
        }
    }
}

/// Polls for new bundles on a thread of its own until the process ends.
pub fn spawn(fleet: Fleet, cache: PathBuf, name: Option<String>, trusted: Vec<PublicKey>) {
    let mut p = Poller {
        etag: None,
        agent: agent(),
        fleet,
        cache,
        name,
        trusted,
    };
    let _ = std::thread::Builder::new()
        .name("gatehouse-bundle".into())
        .spawn(move || {
            // The first poll sends no ETag: `prime` stored the bytes, and
            // an unchanged bundle is recognised by them.
            let mut wait = p.fleet.interval;
            loop {
                std::thread::sleep(wait);
                match p.poll() {
                    Ok(_) => wait = p.fleet.interval,
                    Err(e) => {
                        wait =
                            (wait * 2).clamp(p.fleet.interval, MAX_BACKOFF.max(p.fleet.interval));
                        stderr_line(format!(
                            "gatehouse-egress: {}: {e} (next try in {:.1} s)",
                            p.fleet.url,
                            wait.as_secs_f64()
                        ));
                    }
                }
            }
        });
}

/// Decision records shipped as JSON lines to an HTTP endpoint, `POST`ed in
/// batches (at most [`BATCH_LINES`] lines, or what one second gathered),
/// from a thread of its own; each record carries the revision of the policy
/// that made it. A batch the endpoint does not take (after three tries) is
/// dropped and counted, as are records the full queue cannot hold: the
/// decisions never wait for the endpoint.
pub struct HttpSink {
    tx: std::sync::mpsc::SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

/// The most lines in one batch.
pub const BATCH_LINES: usize = 1000;

impl HttpSink {
    /// Ships to `url`, holding at most `capacity` records in between.
    pub fn new(url: String, capacity: usize) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        std::thread::Builder::new()
            .name("gatehouse-ship".into())
            .spawn(move || {
                let agent = agent();
                loop {
                    let Ok(first) = rx.recv() else { return };
                    let mut batch = vec![first];
                    let until = Instant::now() + Duration::from_secs(1);
                    while batch.len() < BATCH_LINES {
                        let left = until.saturating_duration_since(Instant::now());
                        match rx.recv_timeout(left) {
                            Ok(line) => batch.push(line),
                            Err(_) => break,
                        }
                    }
                    let mut body = batch.join("\n");
                    body.push('\n');
                    let mut sent = false;
                    for attempt in 0..3u32 {
                        let r = agent
                            .post(&url)
                            .header("Content-Type", "application/x-ndjson")
                            .send(body.as_bytes());
                        if r.is_ok_and(|r| r.status().is_success()) {
                            sent = true;
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(250 << attempt));
                    }
                    if !sent {
                        counted.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        stderr_line(format!(
                            "gatehouse-egress: {url} did not take {} decision records; dropped",
                            batch.len()
                        ));
                    }
                }
            })?;
        Ok(HttpSink { tx, dropped })
    }

    /// Records dropped (queue full, or the endpoint refused them).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl DecisionSink for HttpSink {
    fn record(&self, event: &DecisionEvent<'_>) {
        let sent = serde_json::to_string(event)
            .ok()
            .is_some_and(|line| self.tx.try_send(line).is_ok());
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn record_other(&self, record: &serde_json::Value) {
        if self.tx.try_send(record.to_string()).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Every record to each of several sinks (`--log` and `--log-url`).
pub struct Tee(pub Vec<Arc<dyn DecisionSink>>);

impl DecisionSink for Tee {
    fn record(&self, event: &DecisionEvent<'_>) {
        for s in &self.0 {
            s.record(event);
        }
    }
    fn record_other(&self, record: &serde_json::Value) {
        for s in &self.0 {
            s.record_other(record);
        }
    }
}

/// The fleet flags every mode of gatehouse-egress takes.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--trusted-key FILE`, repeatable: only bundles one of them signed.
    pub trusted_keys: Vec<PathBuf>,
    /// `--bundle-url URL`: poll for bundles (needs a trusted key).
    pub bundle_url: Option<String>,
    /// `--poll-interval SECS` (default 30).
    pub poll_interval: Option<Duration>,
    /// `--log-url URL`: ship decision records there.
    pub log_url: Option<String>,
}

impl Options {
    /// The trusted keys, read.
    pub fn keys(&self) -> Result<Vec<PublicKey>, FleetError> {
        self.trusted_keys
            .iter()
            .map(|p| {
                let text =
                    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                PublicKey::parse(&text).map_err(|e| format!("{}: {e}", p.display()))
            })
            .collect::<Result<_, String>>()
            .map_err(FleetError)
    }

    /// Before serving: checks the flags together and, with a bundle URL,
    /// fetches the first bundle into `policy` (or falls back to the last
    /// good one there). Returns the trusted keys.
    pub fn prepare(&self, policy: &Path, name: Option<&str>) -> Result<Vec<PublicKey>, FleetError> {
        let keys = self.keys()?;
        if let Some(url) = &self.bundle_url {
            if keys.is_empty() {
                return Err(FleetError::from(String::from(
                    "--bundle-url needs --trusted-key: a fleet must accept only the bundles its owner signed",
                )));
            }
            prime(
                &Fleet {
                    url: url.clone(),
                    interval: self.interval(),
                },
                policy,
                name,
                &keys,
            )?;
        }
        Ok(keys)
    }

    fn interval(&self) -> Duration {
        self.poll_interval.unwrap_or(Duration::from_secs(30))
    }

    /// Once serving: starts the bundle poller, if a URL was given.
    pub fn start_polling(&self, policy: &Path, name: Option<String>, keys: Vec<PublicKey>) {
        if let Some(url) = &self.bundle_url {
            spawn(
                Fleet {
                    url: url.clone(),
                    interval: self.interval(),
                },
                policy.to_path_buf(),
                name,
                keys,
            );
        }
    }

    /// The decision sink: the file (`--log`), the endpoint (`--log-url`),
    /// both, or none.
    pub fn sink(
        &self,
        log: Option<&Path>,
        metrics: &crate::metrics::Metrics,
    ) -> Result<Option<Arc<dyn DecisionSink>>, FleetError> {
        let mut sinks: Vec<Arc<dyn DecisionSink>> = Vec::new();
        if let Some(path) = log {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let file = Arc::new(
                gatehouse::log::BackgroundSink::new(f, 65_536).map_err(|e| e.to_string())?,
            );
            metrics.watch_log(file.clone());
            sinks.push(file);
        }
        if let Some(url) = &self.log_url {
            sinks.push(Arc::new(
                HttpSink::new(url.clone(), 65_536).map_err(|e| e.to_string())?,
            ));
        }
        Ok(match sinks.len() {
            0 => None,
            1 => sinks.pop(),
            _ => Some(Arc::new(Tee(sinks))),
        })
    }
}
