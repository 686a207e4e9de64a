//! Decision logs: every decision reported to a sink the embedder provides.
//!
//! [`crate::Policy::decide`] builds no event at all; only
//! [`PolicySet::decide_logged`] does, so there is no cost without a sink.
//! Fields named in the policy's `log { mask ... }` keep their shape (an argv
//! keeps its program and its length) but not their content. A sink that
//! panics cannot change or lose the decision.

use std::io::Write;
use std::sync::Mutex;

use serde::Serialize;

use crate::compile::{Policy, PolicySet};
use crate::decision::{Decision, Outcome, RuleRef};
use crate::eval::Workspace;
use crate::query::{Query, QueryRef};
use crate::syntax::ast::LogField;

const MASK: &str = "***";

/// One logged decision.
#[derive(Clone, Debug, Serialize)]
pub struct DecisionEvent<'a> {
    /// RFC 3339, UTC.
    pub time: String,
    /// The policy that decided.
    pub policy: &'a str,
    /// The compiled set's revision ([`PolicySet::revision`]).
    pub revision: &'a str,
    /// The query, with masked fields.
    pub query: serde_json::Value,
    /// The outcome's word.
    pub decision: &'static str,
    /// The reason code.
    pub reason: &'static str,
    /// The deciding rule, or `null` for a default.
    pub rule: Option<RuleRef<'a>>,
    /// For agent actions, what the seed's `tool_decision` telemetry names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_decision: Option<ToolDecision>,
    /// How long the decision took (for latency metrics; not written to a
    /// JSON log).
    #[serde(skip)]
    pub elapsed: std::time::Duration,
    /// The query with the policy's masks applied, typed (for sinks that
    /// want fields rather than JSON; not written to a JSON log).
    #[serde(skip)]
    pub masked: &'a Query,
}

/// `approved`/`denied`/`pending`, and who decided.
#[derive(Clone, Copy, Debug, Eq, PartialEq, Serialize)]
pub struct ToolDecision {
    /// `approved`, `denied` or `pending`.
    pub decision: &'static str,
    /// `configuration` (the policy decided), `user` or `auto_review` (a
    /// prompt went to them).
    pub source: &'static str,
}

/// Where decisions go.
///
/// ```
/// use gatehouse::log::JsonLinesSink;
/// use gatehouse::{PolicySet, Query};
///
/// let set = PolicySet::from_source("p.policy", "policy p {\n  network {\n    allow domain github.com\n  }\n}\n")?;
/// let p = set.policy("p").expect("compiled");
/// let sink = JsonLinesSink::new(Vec::new());
/// let q = Query::parse("connect github.com:443").expect("parses");
/// assert!(set.decide_logged(p, &q, None, &sink).is_allow());
/// let line = String::from_utf8(sink.into_inner()).expect("utf-8");
/// assert!(line.contains(r#""decision":"allow""#) && line.contains(r#""revision":""#));
/// # Ok::<(), gatehouse::Error>(())
/// ```
pub trait DecisionSink: Send + Sync {
    /// Records one decision. Called on the deciding thread: keep it short
    /// (see [`BackgroundSink`]).
    fn record(&self, event: &DecisionEvent<'_>);

    /// Whether the sink records anything. A sink that drops everything
    /// says `false`, and no event is built for it (no clock read, no
    /// query copied): the decision costs what an unlogged one does.
    fn enabled(&self) -> bool {
        true
    }

    /// Whether the sink reads the event's JSON (`query` and `time`). A sink
    /// that reads only the typed fields ([`DecisionEvent::masked`]) says
    /// `false`, and the JSON is not built for it.
    fn wants_json(&self) -> bool {
        true
    }

    /// An embedder's own record beside the decisions (a proxy's access
    /// record of a request: what was asked and how it ended), written as
    /// one JSON line in the same stream. The default drops it.
    fn record_other(&self, _record: &serde_json::Value) {}
}

/// Several sinks as one: a JSON decision log and an OpenTelemetry export
/// side by side. Enabled when any of them is; each gets every event.
pub struct Tee(pub Vec<std::sync::Arc<dyn DecisionSink>>);

impl DecisionSink for Tee {
    fn record(&self, event: &DecisionEvent<'_>) {
        for s in self.0.iter().filter(|s| s.enabled()) {
            s.record(event);
        }
    }
    fn enabled(&self) -> bool {
        self.0.iter().any(|s| s.enabled())
    }
    fn wants_json(&self) -> bool {
        self.0.iter().any(|s| s.enabled() && s.wants_json())
    }
    fn record_other(&self, record: &serde_json::Value) {
        for s in self.0.iter().filter(|s| s.enabled()) {
            s.record_other(record);
        }
    }
}

/// A sink writing JSON lines to any writer (a file for `policyc eval --log`).
pub struct JsonLinesSink<W: Write + Send> {
    out: Mutex<W>,
}

impl<W: Write + Send> JsonLinesSink<W> {
    /// A sink writing to `out`, one line a decision.
    pub fn new(out: W) -> Self {
        JsonLinesSink {
            out: Mutex::new(out),
        }
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        match self.out.into_inner() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

impl<W: Write + Send> DecisionSink for JsonLinesSink<W> {
    fn record(&self, event: &DecisionEvent<'_>) {
        if let (Ok(line), Ok(mut out)) = (serde_json::to_string(event), self.out.lock()) {
            let _ = writeln!(out, "{line}");
        }
    }
    fn record_other(&self, record: &serde_json::Value) {
        if let Ok(mut out) = self.out.lock() {
            let _ = writeln!(out, "{record}");
        }
    }
}

/// A sink that never holds up a decision: each event is serialised to a JSON
/// line and handed to a bounded queue that a background thread writes out.
/// When the writer is slow or stuck and the queue is full, the event is
/// dropped and counted ([`BackgroundSink::dropped`]) — the decision is
/// returned either way. A writer that panics ends the thread; later events
/// are dropped and counted too.
pub struct BackgroundSink {
    tx: std::sync::mpsc::SyncSender<String>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl BackgroundSink {
    /// Writes to `out` from a background thread, holding at most `capacity`
    /// events in between.
    pub fn new<W: Write + Send + 'static>(mut out: W, capacity: usize) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(capacity);
        std::thread::Builder::new()
            .name("gatehouse-log".into())
            .spawn(move || {
                for line in rx {
                    if writeln!(out, "{line}").is_err() {
                        break;
                    }
                }
                let _ = out.flush();
            })?;
        Ok(BackgroundSink {
            tx,
            dropped: Default::default(),
        })
    }

    /// Events dropped because the queue was full or the writer gone.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl DecisionSink for BackgroundSink {
    fn record(&self, event: &DecisionEvent<'_>) {
        let sent = serde_json::to_string(event)
            .ok()
            .is_some_and(|line| self.tx.try_send(line).is_ok());
        if !sent {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    fn record_other(&self, record: &serde_json::Value) {
        if self.tx.try_send(record.to_string()).is_err() {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl PolicySet {
    /// Decides and reports the decision to `sink`. The decision is the same
    /// as [`Policy::decide_in`]'s, whatever the sink does.
    pub fn decide_logged(
        &self,
        policy: &Policy,
        query: &Query,
        workspace: Option<&Workspace>,
        sink: &dyn DecisionSink,
    ) -> Decision {
        let start = sink.enabled().then(std::time::Instant::now);
        let d = policy.decide_in(query, workspace);
        let elapsed = start.map(|s| s.elapsed()).unwrap_or_default();
        self.report_to(policy, query, &d, elapsed, sink);
        d
    }

    /// [`PolicySet::decide_logged`] for a borrowed query: the query is
    /// copied only when `sink` records ([`DecisionSink::enabled`]).
    pub fn decide_ref_logged(
        &self,
        policy: &Policy,
        query: QueryRef<'_>,
        sink: &dyn DecisionSink,
    ) -> Decision {
        let start = sink.enabled().then(std::time::Instant::now);
        let d = policy.decide_ref(query);
        if let Some(start) = start {
            let elapsed = start.elapsed();
            let owned = match query {
                QueryRef::Owned(q) => std::borrow::Cow::Borrowed(q),
                other => std::borrow::Cow::Owned(other.to_owned_query()),
            };
            self.report_to(policy, &owned, &d, elapsed, sink);
        }
        d
    }

    fn report_to(
        &self,
        policy: &Policy,
        query: &Query,
        d: &Decision,
        elapsed: std::time::Duration,
        sink: &dyn DecisionSink,
    ) {
        if !sink.enabled() {
            return;
        }
        let masked = masked_query(query, &policy.log_masks);
        let json = sink.wants_json();
        let event = DecisionEvent {
            time: if json { now_rfc3339() } else { String::new() },
            policy: policy.name(),
            revision: self.revision(),
            query: if json {
                serde_json::to_value(&*masked).unwrap_or(serde_json::Value::Null)
            } else {
                serde_json::Value::Null
            },
            masked: &masked,
            decision: d.outcome.as_str(),
            reason: d.reason.as_str(),
            rule: d.rule.and_then(|r| self.rule(r)),
            tool_decision: tool_decision(query, d),
            elapsed,
        };
        // A sink that panics must not take the decision with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.record(&event)));
    }
}

fn tool_decision(q: &Query, d: &Decision) -> Option<ToolDecision> {
    if !matches!(
        q,
        Query::Exec { .. }
            | Query::Write { .. }
            | Query::Read { .. }
            | Query::Mcp { .. }
            | Query::Prompt { .. }
    ) {
        return None;
    }
    Some(match d.outcome {
        Outcome::Allow => ToolDecision {
            decision: "approved",
            source: "configuration",
        },
        Outcome::Ask => ToolDecision {
            decision: "pending",
            source: "user",
        },
        Outcome::Review => ToolDecision {
            decision: "pending",
            source: "auto_review",
        },
        _ => ToolDecision {
            decision: "denied",
            source: "configuration",
        },
    })
}

/// The query with the masked fields replaced, shape kept; borrowed when
/// nothing is masked.
fn masked_query<'q>(q: &'q Query, masks: &[LogField]) -> std::borrow::Cow<'q, Query> {
    if masks.is_empty() {
        return std::borrow::Cow::Borrowed(q);
    }
    let on = |f: LogField| masks.contains(&f);
    let mut q = q.clone();
    mask_query(&mut q, &on, false);
    std::borrow::Cow::Owned(q)
}

fn mask_argv(argv: &mut [String]) {
    for w in argv.iter_mut().skip(1) {
        *w = MASK.to_string();
    }
}

/// Masks in place; `all` masks every field (a masked review action).
fn mask_query(q: &mut Query, on: &dyn Fn(LogField) -> bool, all: bool) {
    let m = |f: LogField| all || on(f);
    match q {
        Query::Connect { host, .. } if m(LogField::ConnectHost) => *host = MASK.into(),
        Query::Dns { name } if m(LogField::DnsName) => *name = MASK.into(),
        Query::Resolved { host, addrs, .. } => {
            if m(LogField::ResolvedName) {
                *host = MASK.into();
            }
            if m(LogField::ResolvedAddrs) {
                addrs.iter_mut().for_each(|a| *a = MASK.into());
            }
        }
        Query::Socket { path } if m(LogField::SocketPath) => *path = MASK.into(),
        Query::App { program } if m(LogField::AppProgram) => *program = MASK.into(),
        Query::Write {
            path,
            workspace,
            home,
        } if m(LogField::WritePath) => {
            *path = MASK.into();
            if all {
                *workspace = workspace.as_ref().map(|_| MASK.into());
                *home = home.as_ref().map(|_| MASK.into());
            }
        }
        Query::Read {
            path,
            workspace,
            home,
        } if m(LogField::ReadPath) => {
            *path = MASK.into();
            if all {
                *workspace = workspace.as_ref().map(|_| MASK.into());
                *home = home.as_ref().map(|_| MASK.into());
            }
        }
        Query::Exec { argv, .. } if m(LogField::ExecArgv) => mask_argv(argv),
        Query::Mcp { tool, .. } if m(LogField::McpTool) => *tool = MASK.into(),
        Query::Review { action, .. } => {
            let whole = on(LogField::ReviewAction);
            mask_query(action, on, all || whole);
        }
        _ => {}
    }
}

/// The current time as RFC 3339 UTC (`2026-11-29T19:30:00Z`).
/// The time now, RFC 3339 in UTC to the second (the `time` of every record).
pub fn now_rfc3339() -> String {
    thread_local! {
        // The last second formatted on this thread: a busy logger formats
        // each second once.
        static LAST: std::cell::RefCell<(u64, String)> = const {
            std::cell::RefCell::new((u64::MAX, String::new()))
        };
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LAST.with(|last| match last.try_borrow_mut() {
        Ok(l) if l.0 == secs => l.1.clone(),
        Ok(mut l) => {
            let text = rfc3339(secs);
            *l = (secs, text.clone());
            text
        }
        Err(_) => rfc3339(secs),
    })
}

fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_formats_as_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }

    fn masked(q: &Query, masks: &[LogField]) -> serde_json::Value {
        serde_json::to_value(&*masked_query(q, masks)).unwrap_or(serde_json::Value::Null)
    }

    #[test]
    fn masks_keep_the_shape() {
        let q = Query::Exec {
            argv: vec!["curl".into(), "-d".into(), "@secret".into()],
            escalate: false,
        };
        let v = masked(&q, &[LogField::ExecArgv]);
        assert_eq!(v["argv"], serde_json::json!(["curl", "***", "***"]));
        let r = Query::Review {
            action: Box::new(q.clone()),
            assessment: Default::default(),
        };
        let v = masked(&r, &[LogField::ReviewAction]);
        assert_eq!(
            v["action"]["argv"],
            serde_json::json!(["curl", "***", "***"])
        );
        let v = masked(&r, &[]);
        assert_eq!(v["action"]["argv"][2], "@secret");
    }
}
