//! The policy in force: a gatehouse store that readers load without locks,
//! reloaded when the file's content changes or on SIGHUP; the decision log;
//! and the daemon's own lines on stderr, which never block a request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gatehouse::bundle::PublicKey;
use gatehouse::log::{DecisionEvent, DecisionSink};
use gatehouse::store::PolicyStore;
use gatehouse::{Policy, PolicySet};

pub use request::{Request, Verdict};

mod read;
mod request;
mod trusted;
pub(crate) use read::read_policy;
pub use trusted::Untrusted;
pub(crate) use trusted::check as trusted_check;

/// The policy file, which policy of it to use, and the store.
pub struct Policies {
    /// The policy file.
    pub path: PathBuf,
    /// The keys a policy must be signed by (none: any policy file).
    pub trusted: Vec<PublicKey>,
    /// The policy of the set to enforce (`None`: the only one).
    pub name: Option<String>,
    /// The compiled set in force, swapped on reload.
    pub store: PolicyStore,
    /// Where decisions are recorded.
    pub sink: Arc<dyn DecisionSink>,
    /// Whether access records go to the sink (a decision log was given).
    access_log: bool,
    /// OpenTelemetry spans of requests, when export is on; with the
    /// sandbox's id in host mode.
    spans: Option<gatehouse_otel::Telemetry>,
    /// Host mode: the sandbox whose policy this is (on its spans and its
    /// refusal lines on stderr).
    sandbox: Option<Box<str>>,
    /// Set by `--no-policy` (load tests only): every decision is an allow
    /// and nothing is logged, to show what the engine costs.
    pub bypass: bool,
    requests: AtomicU64,
    /// The newest bundle serial put in force (0: none yet); a bundle with a
    /// smaller one is refused (docs/bundles.md, rollback).
    newest: AtomicU64,
    /// Every request's access record, when kept (tests).
    pub records: Option<std::sync::Mutex<Vec<serde_json::Value>>>,
    /// What decides under `--no-policy`: a compiled policy of `network
    /// unrestricted` (only the engine makes decisions); built only then.
    unrestricted: Option<PolicySet>,
    /// The daemon's counters.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// This policy's own counters, when it has them (host mode).
    pub tally: Option<Arc<crate::metrics::Tally>>,
    /// Compiled sets shared with other policies ([`SetCache`]).
    sets: Option<Arc<SetCache>>,
    /// Bumped at every swap, so that long-lived tunnels can be decided
    /// again ([`Policies::swaps`]).
    /// Made at the first subscription: a policy nothing listens to (most
    /// of host mode's sandboxes, most of the time) holds no channel.
    swaps: std::sync::OnceLock<tokio::sync::watch::Sender<u64>>,
    /// What the file was when this last read it: its `stat` key taken
    /// before the read and the digest of what was read. The watcher starts
    /// from it, never from a read of its own: a write landing between the
    /// open and the watcher's first look would otherwise be taken as
    /// already in force and never reloaded.
    seen: std::sync::Mutex<Seen>,
}

/// A policy file as last read: its `stat` key (taken before the read) and
/// the digest of the bytes (or of the error).
#[derive(Clone, Default)]
pub(crate) struct Seen {
    pub(crate) key: Option<[i128; 5]>,
    pub(crate) digest: String,
}

impl Seen {
    /// `stat`s the path, then reads it: the key never claims a newer file
    /// than the bytes.
    pub(crate) fn read(path: &Path) -> (Seen, Result<Vec<u8>, PolicyError>) {
        let key = stat_key(path);
        let bytes = read_policy(path);
        let digest = match &bytes {
            Ok(b) => gatehouse::artifact::sha256_hex(b),
            Err(e) => format!("error: {e}"),
        };
        (Seen { key, digest }, bytes)
    }
}

/// Why a policy file could not be put in force. Every variant names the
/// file; [`PolicyError::Compile`] holds every diagnostic, rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        source: std::io::Error,
    },
    /// A FIFO, a device or a directory at the path: never waited on.
    #[error("{path}: not a regular file")]
    NotRegularFile {
        /// The path.
        path: PathBuf,
    },
    /// Larger than the engine's source limit.
    #[error("{path}: larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Neither UTF-8 text nor a compiled artifact or bundle.
    #[error("{path}: neither policy text (UTF-8) nor a compiled artifact")]
    NotPolicy {
        /// The file.
        path: PathBuf,
    },
    /// A compiled artifact or bundle refused (tampered, foreign, unsigned
    /// where a key is trusted, another format version).
    #[error("{path}: {source}")]
    Bundle {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        source: gatehouse::bundle::BundleError,
    },
    /// Another user than root and the daemon's could change the file
    /// (`StrictModes`: docs/host.md, "Files the daemon trusts").
    #[error(transparent)]
    Untrusted(Box<Untrusted>),
    /// The policy text does not build: every diagnostic, rendered.
    #[error("{0}")]
    Compile(String),
    /// `--policy-name` names no policy of the set, or the set holds
    /// several and none is named.
    #[error("{0}; pick one with --policy-name")]
    Select(gatehouse::SelectError),
}

/// Reads and compiles the policy file; the error is what a person should
/// read (every diagnostic, rendered).
pub fn load(path: &Path, name: Option<&str>) -> Result<PolicySet, PolicyError> {
    let bytes = read_policy(path)?;
    load_bytes(path, bytes, name, &[])
}

/// A policy from a file's bytes: policy text, a compiled artifact, or a
/// signed bundle (`policyc compile [--sign KEY]`). With trusted keys only a
/// bundle one of them signed is accepted (docs/bundles.md).
pub fn load_bytes(
    path: &Path,
    bytes: Vec<u8>,
    name: Option<&str>,
    trusted: &[PublicKey],
) -> Result<PolicySet, PolicyError> {
    use gatehouse::bundle::OpenError;
    let set = gatehouse::bundle::open(&path.display().to_string(), bytes, trusted).map_err(
        |e| match e {
            OpenError::NotPolicy => PolicyError::NotPolicy {
                path: path.to_path_buf(),
            },
            OpenError::Bundle(source) => PolicyError::Bundle {
                path: path.to_path_buf(),
                source,
            },
            other => PolicyError::Compile(other.to_string()),
        },
    )?;
    pick(&set, name)?;
    Ok(set)
}

fn pick<'a>(set: &'a PolicySet, name: Option<&str>) -> Result<&'a Policy, PolicyError> {
    set.select(name).map_err(PolicyError::Select)
}

/// What to open a policy file with (an options struct: new fields do not
/// break callers).
#[derive(Clone, Default)]
pub struct PolicyOptions {
    /// The policy file: text, a compiled artifact or a signed bundle.
    pub path: PathBuf,
    /// Which policy of the file; none: the file's only one.
    pub name: Option<String>,
    /// The decision log; none: decisions are not written.
    pub log: Option<Arc<dyn DecisionSink>>,
    /// `--no-policy` (load tests only): every decision is an allow and
    /// nothing is logged.
    pub bypass: bool,
    /// Keep every request's access record in memory (tests).
    pub keep_records: bool,
    /// Accept only bundles signed by one of these keys (when it holds
    /// any), at start and at every reload.
    pub trusted: Vec<PublicKey>,
    /// Counters of this policy's own (host mode's per-sandbox decisions).
    pub tally: Option<Arc<crate::metrics::Tally>>,
    /// OpenTelemetry export: a span per request (docs/telemetry.md).
    pub telemetry: gatehouse_otel::Telemetry,
    /// Host mode: the sandbox whose policy this is (on its spans and
    /// stderr refusal lines).
    pub sandbox: Option<String>,
    /// Compiled sets shared with every other policy opened with the same
    /// cache from the same file, bytes and name (host mode: the sandboxes
    /// naming one policy file hold one compiled set).
    pub sets: Option<Arc<SetCache>>,
}

/// Compiled sets by (file, policy name, SHA-256 of the bytes): a policy
/// opened or reloaded with bytes a live set was compiled from shares it
/// instead of compiling its own. The file is part of the key because a
/// decision record names the rule's file. Entries are weak: a set lives as
/// long as a policy has it in force.
#[derive(Default)]
pub struct SetCache {
    sets: std::sync::Mutex<HashMap<SetKey, std::sync::Weak<PolicySet>>>,
}

type SetKey = (PathBuf, Option<String>, String);

impl SetCache {
    /// The set compiled from `bytes` of `path`, shared when a live one
    /// was; `digest`: the bytes' SHA-256.
    fn load(
        &self,
        path: &Path,
        digest: String,
        bytes: Vec<u8>,
        name: Option<&str>,
        trusted: &[PublicKey],
    ) -> Result<Arc<PolicySet>, PolicyError> {
        let key = (path.to_path_buf(), name.map(str::to_string), digest);
        if let Some(set) = self
            .sets
            .lock()
            .ok()
            .and_then(|m| m.get(&key).and_then(std::sync::Weak::upgrade))
        {
            return Ok(set);
        }
        let set = Arc::new(load_bytes(path, bytes, name, trusted)?);
        if let Ok(mut m) = self.sets.lock() {
            // Dead entries go when the map has doubled since the last sweep.
            if m.len() >= 64 && m.len().is_power_of_two() {
                m.retain(|_, w| w.strong_count() > 0);
            }
            m.insert(key, Arc::downgrade(&set));
        }
        Ok(set)
    }
}

impl PolicyOptions {
    /// The options for `path`, every other one at its default.
    pub fn new(path: PathBuf) -> Self {
        PolicyOptions {
            path,
            ..PolicyOptions::default()
        }
    }
}

impl Policies {
    /// Opens the policy file and puts it in force.
    pub fn open(
        options: PolicyOptions,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Self, PolicyError> {
        let PolicyOptions {
            path,
            name,
            log,
            bypass,
            keep_records,
            trusted,
            tally,
            telemetry,
            sandbox,
            sets,
        } = options;
        let (seen, bytes) = Seen::read(&path);
        let bytes = bytes?;
        let newest = gatehouse::bundle::serial(&bytes).unwrap_or(0);
        let set = match &sets {
            Some(c) => c.load(&path, seen.digest.clone(), bytes, name.as_deref(), &trusted)?,
            None => Arc::new(load_bytes(&path, bytes, name.as_deref(), &trusted)?),
        };
        metrics.set_revision(set.revision());
        let unrestricted = match bypass {
            true => Some(
                PolicySet::from_source("<built-in>", "policy bypass { network unrestricted }")
                    .map_err(|e| PolicyError::Compile(format!("built-in policy: {e}")))?,
            ),
            false => None,
        };
        Ok(Policies {
            tally,
            unrestricted,
            metrics,
            path,
            trusted,
            name,
            store: PolicyStore::shared(set),
            sets,
            access_log: log.as_ref().is_some_and(|l| l.wants_json()),
            spans: (telemetry.is_on() && !bypass).then_some(telemetry),
            sandbox: sandbox.map(String::into_boxed_str),
            sink: log.unwrap_or_else(|| Arc::new(Discard)),
            bypass,
            requests: AtomicU64::new(0),
            newest: AtomicU64::new(newest),
            records: keep_records.then(Default::default),
            swaps: std::sync::OnceLock::new(),
            seen: std::sync::Mutex::new(seen),
        })
    }

    /// What the file was when this last read it.
    pub(crate) fn seen(&self) -> Seen {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Records what the file was when read (by the watcher or a reload).
    pub(crate) fn set_seen(&self, seen: Seen) {
        if let Ok(mut s) = self.seen.lock() {
            *s = seen;
        }
    }

    /// The newest bundle serial put in force (0: no bundle yet).
    pub fn newest_serial(&self) -> u64 {
        self.newest.load(Ordering::Relaxed)
    }

    /// Wakes whoever listens for swaps.
    fn swapped(&self) {
        if let Some(s) = self.swaps.get() {
            s.send_modify(|g| *g += 1);
        }
    }

    /// A receiver that sees every swap of the policy in force.
    pub fn swaps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swaps
            .get_or_init(|| tokio::sync::watch::Sender::new(0))
            .subscribe()
    }

    /// Recompiles the file and swaps it in; a bad file is refused, logged,
    /// and the old policy stays. Blocking: call it off the runtime.
    pub fn reload(&self) -> bool {
        let (seen, text) = Seen::read(&self.path);
        self.set_seen(seen);
        self.reload_text(text)
    }

    pub(crate) fn reload_text(&self, bytes: Result<Vec<u8>, PolicyError>) -> bool {
        self.reload_said(bytes, true)
    }

    /// [`Policies::reload_text`] of bytes another sandbox's reload of the
    /// same file just read and said (its line is the one the journal gets).
    pub(crate) fn reload_quiet(&self, bytes: Vec<u8>) -> bool {
        self.reload_said(Ok(bytes), false)
    }

    fn reload_said(&self, bytes: Result<Vec<u8>, PolicyError>, say: bool) -> bool {
        let newest = self.newest.load(Ordering::Relaxed);
        let mut serial = 0;
        let loaded = bytes.and_then(|b| {
            gatehouse::bundle::not_older(&b, newest).map_err(|source| PolicyError::Bundle {
                path: self.path.clone(),
                source,
            })?;
            serial = gatehouse::bundle::serial(&b).unwrap_or(0);
            match &self.sets {
                Some(c) => {
                    let digest = gatehouse::artifact::sha256_hex(&b);
                    c.load(&self.path, digest, b, self.name.as_deref(), &self.trusted)
                }
                None => Ok(Arc::new(load_bytes(
                    &self.path,
                    b,
                    self.name.as_deref(),
                    &self.trusted,
                )?)),
            }
        });
        match loaded {
            Ok(set) => {
                self.newest.fetch_max(serial, Ordering::Relaxed);
                let rev = set.revision().to_string();
                self.store.replace_shared(set);
                self.swapped();
                self.metrics.reloads.inc();
                self.metrics.set_revision(&rev);
                if say {
                    stderr_line(format!(
                        "gatehouse-egress: policy reloaded (revision {})",
                        &rev
                    ));
                }
                true
            }
            Err(e) => {
                self.metrics.reload_failures.inc();
                if say {
                    stderr_line(format!(
                        "gatehouse-egress: policy reload refused, the old policy stays in force:\n{e}"
                    ));
                }
                false
            }
        }
    }

    /// Puts a policy that denies everything in force and wakes every open
    /// tunnel to decide again, so that each one closes (a sandbox removed
    /// from host mode's table). Nothing reloads the file afterwards unless
    /// the caller does.
    pub fn retire(&self) {
        let Ok(set) = PolicySet::from_source("<retired>", "policy retired {\n  network off\n}\n")
        else {
            return;
        };
        self.store.replace(set);
        self.swapped();
    }

    /// Decides one query of any kind (a tool call, a command) with the
    /// policy in force, logged like every decision: the HTTP status a
    /// control API answers it with (403 when refused: deny, denied, timed
    /// out, aborted, disabled; 200 otherwise, an `ask` included) and its
    /// JSON report, as `policyc eval` prints it (docs/cli.md).
    pub fn decide_query(&self, query: &gatehouse::Query) -> (u16, serde_json::Value) {
        use gatehouse::Outcome;
        let set = self.store.load_full();
        let Ok(p) = pick(&set, self.name.as_deref()) else {
            let refused = serde_json::json!({
                "decision": "deny",
                "reason": "not_allowed",
                "policy": self.name,
                "rule": null,
            });
            return (403, refused);
        };
        let d = set.decide_logged(p, query, None, self.sink.as_ref());
        self.metrics.decision(d.is_allow(), d.reason);
        if let Some(t) = &self.tally {
            match d.is_allow() {
                true => t.allowed.inc(),
                false => t.denied.inc(),
            }
        }
        let refused = matches!(
            d.outcome,
            Outcome::Deny
                | Outcome::Denied
                | Outcome::TimedOut
                | Outcome::Aborted
                | Outcome::Disabled
        );
        let report = serde_json::to_value(set.report(p, &d)).unwrap_or_default();
        (if refused { 403 } else { 200 }, report)
    }
}

/// Lines for stderr, written by a thread of their own through a bounded
/// queue: when stderr is a pipe nobody reads, lines are dropped (and
/// counted, and the count written when stderr moves again), never waited
/// for.
struct StderrLines {
    tx: std::sync::mpsc::SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

fn stderr_lines() -> Option<&'static StderrLines> {
    static LINES: std::sync::OnceLock<Option<StderrLines>> = std::sync::OnceLock::new();
    LINES
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<String>(4096);
            let dropped = Arc::new(AtomicU64::new(0));
            let counted = dropped.clone();
            std::thread::Builder::new()
                .name("gatehouse-stderr".into())
                .spawn(move || {
                    use std::io::Write as _;
                    for line in rx {
                        let mut err = std::io::stderr().lock();
                        let _ = writeln!(err, "{line}");
                        let n = counted.swap(0, Ordering::Relaxed);
                        if n > 0 {
                            let _ = writeln!(err, "{{\"dropped_stderr_lines\":{n}}}");
                        }
                    }
                })
                .ok()?;
            Some(StderrLines { tx, dropped })
        })
        .as_ref()
}

/// Queues a line for stderr; never blocks.
pub fn stderr_line(line: String) {
    if let Some(l) = stderr_lines()
        && l.tx.try_send(line).is_err()
    {
        l.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Refusal lines written to stderr per second at most; the rest are
/// counted, and the count written with the next line let through.
pub const STDERR_REFUSALS_PER_SECOND: u64 = 100;

/// Queues a refusal line for stderr, rate-limited.
fn refusal_line(line: String) {
    static WINDOW: std::sync::Mutex<(u64, u64, u64)> = std::sync::Mutex::new((0, 0, 0));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let Ok(mut w) = WINDOW.lock() else { return };
    let (second, sent, suppressed) = &mut *w;
    if *second != now {
        *second = now;
        *sent = 0;
    }
    if *sent >= STDERR_REFUSALS_PER_SECOND {
        *suppressed += 1;
        return;
    }
    *sent += 1;
    if *suppressed > 0 {
        stderr_line(format!("{{\"suppressed_refusal_lines\":{suppressed}}}"));
        *suppressed = 0;
    }
    stderr_line(line);
}

/// A sink that drops everything (no `--log`).
pub struct Discard;
impl DecisionSink for Discard {
    fn record(&self, _: &DecisionEvent<'_>) {}
    fn enabled(&self) -> bool {
        false
    }
}

/// What tells the watcher (crate::watch) a file may have changed: device, inode, size,
/// modification and change times (`stat`, which never opens the path).
pub(crate) fn stat_key(path: &Path) -> Option<[i128; 5]> {
    Some(metadata_key(&std::fs::metadata(path).ok()?))
}

/// [`stat_key`] of a file's metadata as already read (of an open file).
pub(crate) fn metadata_key(m: &std::fs::Metadata) -> [i128; 5] {
    use std::os::unix::fs::MetadataExt as _;
    [
        i128::from(m.dev()),
        i128::from(m.ino()),
        i128::from(m.size()),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    ]
}
