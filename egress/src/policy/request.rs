//! One request's decisions: the set loaded once for all of them, its
//! verdicts, its span, and its access record.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use gatehouse::query::QueryRef;
use gatehouse::{Decision, PolicySet};

use super::{Policies, pick, refusal_line};
use crate::outcome::Outcome;

impl Policies {
    /// One request's view: the set loaded once, so that every decision of
    /// the request comes from the same policy, even across a swap.
    pub fn request(&self) -> Request<'_> {
        Request {
            set: self.store.load_full(),
            policies: self,
            id: self.requests.fetch_add(1, Ordering::Relaxed),
            decisions: 0,
            started: self.spans.as_ref().map(|_| std::time::SystemTime::now()),
            ids: self.spans.as_ref().and_then(|t| t.span_ids(None)),
        }
    }
}

/// The proxy's verdict on one step of a request: the engine's decision, or
/// a refusal should the chosen policy be missing from a set (impossible
/// after `load`; fail closed).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Verdict {
    allow: bool,
    /// Why.
    pub reason: gatehouse::Reason,
}

impl Verdict {
    const REFUSED: Verdict = Verdict {
        allow: false,
        reason: gatehouse::Reason::NotAllowed,
    };

    /// Whether the request may go ahead.
    pub fn is_allow(&self) -> bool {
        self.allow
    }
}

impl From<Decision> for Verdict {
    fn from(d: Decision) -> Self {
        Verdict {
            allow: d.is_allow(),
            reason: d.reason,
        }
    }
}

/// The decisions of one request.
pub struct Request<'a> {
    set: Arc<PolicySet>,
    policies: &'a Policies,
    /// The request's number in the decision log.
    pub id: u64,
    /// Decisions made, every one with `set` (loaded once per request, so
    /// that a swap never mixes two policies in one request).
    pub decisions: usize,
    /// When the request began, when spans are exported.
    started: Option<std::time::SystemTime>,
    /// The request's span, when spans are exported: in the caller's trace
    /// when its `traceparent` (W3C Trace Context) gave one; none when the
    /// caller does not sample it.
    ids: Option<gatehouse_otel::SpanIds>,
}

impl Request<'_> {
    /// The request's `traceparent` header: its span goes in the caller's
    /// trace, recorded as the sampler says (by default, when the caller
    /// samples it). Read only when spans are exported; a malformed value is
    /// ignored (the span is then a trace of its own). The header is
    /// forwarded as the client sent it.
    pub fn traced_by(&mut self, traceparent: Option<&str>) {
        if let Some(t) = &self.policies.spans
            && let Some(parent) = traceparent.and_then(gatehouse_otel::TraceParent::parse)
        {
            self.ids = t.span_ids(Some(&parent));
        }
    }

    /// Decides and logs `q`; a set without the chosen policy (impossible
    /// after `load`) is a deny.
    pub fn decide(&mut self, q: QueryRef<'_>) -> Verdict {
        if self.policies.bypass {
            return self
                .policies
                .unrestricted
                .as_ref()
                .and_then(|set| set.single())
                .map_or(Verdict::REFUSED, |p| p.decide_ref(q).into());
        }
        let Ok(p) = pick(&self.set, self.policies.name.as_deref()) else {
            return Verdict::REFUSED;
        };
        // Inside the request's span: its decision records carry its ids.
        let d = gatehouse_otel::in_span(self.ids.as_ref(), || {
            self.set
                .decide_ref_logged(p, q, self.policies.sink.as_ref())
        });
        self.decisions += 1;
        self.policies.metrics.decision(d.is_allow(), d.reason);
        if let Some(t) = &self.policies.tally {
            match d.is_allow() {
                true => t.allowed.inc(),
                false => t.denied.inc(),
            }
        }
        d.into()
    }

    /// The revision of the set that decides this request.
    pub fn revision(&self) -> &str {
        self.set.revision()
    }

    /// The request's access record: what was asked, the outcome, and the
    /// revisions its decisions came from. It goes to the decision log
    /// (`--log`, as `{"access": ...}` lines beside the decisions), and for
    /// refusals to stderr, at most [`STDERR_REFUSALS_PER_SECOND`](super::STDERR_REFUSALS_PER_SECOND) a second.
    pub fn finish(&self, what: &(dyn std::fmt::Display + Sync), outcome: Outcome<'_>) {
        let refused = outcome.is_refusal();
        let p = self.policies;
        if let (Some(t), Some(start), Some(ids)) = (&p.spans, self.started, &self.ids)
            && t.span_wanted()
        {
            // The outcome is the proxy's word (`forwarded`, `refused:
            // not_allowed`); the request line (a URL may hold a secret) only
            // with the command-line setting.
            let revision = self.set.revision();
            let request = t.log_commands().then(|| what.to_string());
            let outcome = outcome.to_string();
            let mut attrs: [(&'static str, &str); 4] = [
                ("gatehouse.outcome", &outcome),
                ("gatehouse.policy.revision", revision),
                ("", ""),
                ("", ""),
            ];
            let mut n = 2;
            for (k, v) in [
                ("gatehouse.sandbox", p.sandbox.as_deref()),
                ("gatehouse.request", request.as_deref()),
            ] {
                if let (Some(v), Some(slot)) = (v, attrs.get_mut(n)) {
                    *slot = (k, v);
                    n += 1;
                }
            }
            t.span(
                "gatehouse.egress.request",
                ids,
                start,
                refused,
                attrs.get(..n).unwrap_or_default(),
            );
        }
        if p.bypass || !(p.access_log || p.records.is_some() || refused) {
            return;
        }
        let mut line = serde_json::json!({
            "time": gatehouse::log::now_rfc3339(),
            "request": self.id,
            "what": what.to_string(),
            "outcome": outcome.to_string(),
            "revisions": vec![self.set.revision(); self.decisions],
        });
        // Host mode: whose request it was (the decision log's sink tags
        // its own records; the stderr line and the access record are
        // written here).
        if let (Some(id), Some(o)) = (&p.sandbox, line.as_object_mut()) {
            o.insert("sandbox".into(), serde_json::Value::from(&**id));
        }
        if p.access_log {
            p.sink.record_other(&serde_json::json!({ "access": &line }));
        }
        if let Some(records) = &p.records {
            if let Ok(mut r) = records.lock() {
                r.push(line);
            }
        } else if refused {
            refusal_line(line.to_string());
        }
    }
}
