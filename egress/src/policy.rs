//! The policy in force: a gatehouse store that readers load without locks,
//! reloaded when the file changes or on SIGHUP; and the decision log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use gatehouse::log::{DecisionEvent, DecisionSink};
use gatehouse::query::Query;
use gatehouse::source::SourceMap;
use gatehouse::store::PolicyStore;
use gatehouse::{Decision, Policy, PolicySet};

/// The policy file, which policy of it to use, and the store.
pub struct Policies {
    pub path: PathBuf,
    pub name: Option<String>,
    pub store: PolicyStore,
    pub sink: Arc<dyn DecisionSink>,
    /// Set by `--no-policy` (load tests only): every decision is an allow
    /// and nothing is logged, to show what the engine costs.
    pub bypass: bool,
    requests: AtomicU64,
    /// Every request's access record, when kept (tests).
    pub records: Option<std::sync::Mutex<Vec<serde_json::Value>>>,
}

/// Reads and compiles the policy file; the error is what a person should
/// read (every diagnostic, rendered).
pub fn load(path: &Path, name: Option<&str>) -> Result<PolicySet, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut sources = SourceMap::new();
    sources.add(path.display().to_string(), text);
    let set = PolicySet::from_sources(sources).map_err(|e| e.to_string())?;
    pick(&set, name)?;
    Ok(set)
}

fn pick<'a>(set: &'a PolicySet, name: Option<&str>) -> Result<&'a Policy, String> {
    match name {
        Some(n) => set
            .policy(n)
            .ok_or_else(|| format!("no policy `{n}` in the file")),
        None => set.single().ok_or_else(|| {
            let names: Vec<&str> = set.policies().map(|p| p.name()).collect();
            format!(
                "the file holds several policies; pick one with --policy-name ({})",
                names.join(", ")
            )
        }),
    }
}

impl Policies {
    pub fn new(
        path: PathBuf,
        name: Option<String>,
        sink: Arc<dyn DecisionSink>,
        bypass: bool,
        keep_records: bool,
    ) -> Result<Self, String> {
        let set = load(&path, name.as_deref())?;
        Ok(Policies {
            path,
            name,
            store: PolicyStore::new(set),
            sink,
            bypass,
            requests: AtomicU64::new(0),
            records: keep_records.then(Default::default),
        })
    }

    /// Recompiles the file and swaps it in; a bad file is refused, logged,
    /// and the old policy stays.
    pub fn reload(&self) -> bool {
        match load(&self.path, self.name.as_deref()) {
            Ok(set) => {
                let rev = set.revision().to_string();
                self.store.replace(set);
                eprintln!(
                    "gatehouse-egress: policy reloaded (revision {})",
                    short(&rev)
                );
                true
            }
            Err(e) => {
                eprintln!(
                    "gatehouse-egress: policy reload refused, the old policy stays in force:\n{e}"
                );
                false
            }
        }
    }

    /// One request's view: the set loaded once, so that every decision of
    /// the request comes from the same policy, even across a swap.
    pub fn request(&self) -> Request<'_> {
        Request {
            set: Arc::clone(&*self.store.load()),
            policies: self,
            id: self.requests.fetch_add(1, Ordering::Relaxed),
            revisions: Vec::new(),
        }
    }
}

pub fn short(rev: &str) -> &str {
    rev.get(..12).unwrap_or(rev)
}

/// The decisions of one request.
pub struct Request<'a> {
    set: Arc<PolicySet>,
    policies: &'a Policies,
    pub id: u64,
    /// The revision of every decision made (all equal: the test of that is
    /// the point of keeping them).
    pub revisions: Vec<String>,
}

impl Request<'_> {
    /// Decides and logs `q`; a set without the chosen policy (impossible
    /// after `load`) is a deny.
    pub fn decide(&mut self, q: &Query) -> Decision {
        if self.policies.bypass {
            return gatehouse::Decision::allow(gatehouse::Reason::Unrestricted, None);
        }
        let Ok(p) = pick(&self.set, self.policies.name.as_deref()) else {
            return Decision::deny(gatehouse::Reason::NotAllowed, None);
        };
        let d = self
            .set
            .decide_logged(p, q, None, self.policies.sink.as_ref());
        self.revisions.push(self.set.revision().to_string());
        d
    }

    pub fn revision(&self) -> &str {
        self.set.revision()
    }

    /// The request's access record: what was asked, the outcome, and the
    /// revisions its decisions came from. Written to stderr for refusals.
    pub fn finish(&self, what: &str, outcome: &str) {
        let line = serde_json::json!({
            "request": self.id,
            "what": what,
            "outcome": outcome,
            "revisions": self.revisions,
        });
        if let Some(records) = &self.policies.records {
            if let Ok(mut r) = records.lock() {
                r.push(line);
            }
        } else if !self.policies.bypass
            && (outcome.starts_with("refused") || outcome.starts_with("dropped"))
        {
            // Refusals are logged on stderr; every decision, allowed or not,
            // goes to the decision log (`--log`).
            eprintln!("{line}");
        }
    }
}

/// Watches the policy file (polling its modification time) and reloads on a
/// change or on SIGHUP, until the runtime ends.
pub fn watch(policies: Arc<Policies>) {
    let p = policies.clone();
    tokio::spawn(async move {
        let mut last = mtime(&p.path);
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = mtime(&p.path);
            if now != last {
                last = now;
                p.reload();
            }
        }
    });
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            policies.reload();
        }
    });
}

fn mtime(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// A sink that drops everything (no `--log`).
pub struct Discard;
impl DecisionSink for Discard {
    fn record(&self, _: &DecisionEvent<'_>) {}
}
