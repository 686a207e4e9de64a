//! One decision as a log record, and the background loop that exports them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use gatehouse::log::DecisionEvent;
use gatehouse::query::Query;
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::metrics::Histogram;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::logs::{LogBatch, LogExporter as _, SdkLoggerProvider};

use crate::Counts;

/// The most records one export carries.
const BATCH: usize = 512;
/// How often the queue is drained when it is not filling up.
const TICK: Duration = Duration::from_millis(100);

/// What the queue carries.
// `Stop` comes once; boxing `Event` would cost an allocation per decision.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Msg {
    /// A decision to export.
    Event(Event),
    /// A span to export.
    Span(SpanEvent),
    /// Export what came before, then end.
    Stop,
}

/// A finished span: a proxied request, a DNS answer.
#[derive(Debug, Clone)]
pub(crate) struct SpanEvent {
    pub(crate) name: &'static str,
    pub(crate) start: SystemTime,
    pub(crate) end: SystemTime,
    pub(crate) error: bool,
    pub(crate) attrs: Vec<(&'static str, Attr)>,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attr {
    S(String),
    W(&'static str),
    I(i64),
    B(bool),
}

/// A decision, owned, with what may be sent of it: built on the deciding
/// thread with as little work as can be (a few copies, no formatting); the
/// body and the rule's text are made by the export.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) time: SystemTime,
    pub(crate) elapsed: Duration,
    pub(crate) policy: Arc<str>,
    pub(crate) revision: Arc<str>,
    pub(crate) decision: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) kind: &'static str,
    /// The body's target, as the attributes that spell it (`HOST:PORT`,
    /// a name, `SERVER/TOOL`): two indexes into `attrs` and the separator.
    pub(crate) target: (Option<u8>, Option<u8>, char),
    pub(crate) rule: Option<(Arc<str>, usize, usize)>,
    pub(crate) attrs: Vec<(&'static str, Attr)>,
}

impl Event {
    /// The event of one decision. Hosts, ports, names and the decision are
    /// always sent; command lines, paths and review actions only with
    /// `log_commands` (and then as the policy's masks leave them).
    pub(crate) fn from_decision(
        e: &DecisionEvent<'_>,
        log_commands: bool,
        extra: &[(&'static str, String)],
    ) -> Self {
        let q = e.masked;
        let mut a: Vec<(&'static str, Attr)> = Vec::with_capacity(10);
        if let Some(t) = &e.tool_decision {
            a.push(("gatehouse.tool_decision", Attr::W(t.decision)));
            a.push(("gatehouse.decision_source", Attr::W(t.source)));
        }
        match e.decision {
            "ask" => a.push(("gatehouse.escalation", Attr::W("user"))),
            "review" => a.push(("gatehouse.escalation", Attr::W("auto_review"))),
            _ => {}
        }
        for (k, v) in extra {
            a.push((k, Attr::S(v.clone())));
        }
        let target = query_attrs(q, log_commands, &mut a);
        Event {
            time: SystemTime::now(),
            elapsed: e.elapsed,
            policy: interned(e.policy),
            revision: interned(e.revision),
            decision: e.decision,
            reason: e.reason,
            kind: q.kind(),
            target,
            rule: e
                .rule
                .as_ref()
                .map(|r| (interned(r.file), r.line, r.column)),
            attrs: a,
        }
    }

    /// `DECISION KIND [TARGET]: REASON`, into `out`.
    pub(crate) fn write_body(&self, out: &mut String) {
        use std::fmt::Write as _;
        let part = |i: Option<u8>| {
            i.and_then(|i| self.attrs.get(usize::from(i)))
                .map(|(_, v)| v)
        };
        let _ = write!(out, "{} {}", self.decision, self.kind);
        let (first, second, sep) = self.target;
        for (n, v) in [part(first), part(second)].into_iter().enumerate() {
            let _ = match (n, v) {
                (_, None) => Ok(()),
                (0, Some(v)) => write!(out, " {v}"),
                (_, Some(v)) => write!(out, "{sep}{v}"),
            };
        }
        let _ = write!(out, ": {}", self.reason);
    }

    fn body(&self) -> String {
        let mut s = String::new();
        self.write_body(&mut s);
        s
    }
}

impl std::fmt::Display for Attr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attr::S(s) => f.write_str(s),
            Attr::W(s) => f.write_str(s),
            Attr::I(i) => write!(f, "{i}"),
            Attr::B(b) => write!(f, "{b}"),
        }
    }
}

/// The same text, shared: policy names, revisions and rule files repeat
/// on every decision, so each thread keeps the few it has seen.
fn interned(s: &str) -> Arc<str> {
    thread_local! {
        static SEEN: std::cell::RefCell<Vec<Arc<str>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SEEN.with(|seen| {
        let Ok(mut seen) = seen.try_borrow_mut() else {
            return Arc::from(s);
        };
        if let Some(a) = seen.iter().find(|a| ***a == *s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        if seen.len() >= 16 {
            seen.remove(0);
        }
        seen.push(a.clone());
        a
    })
}

/// The query's attributes; returns the body's target.
fn query_attrs(
    q: &Query,
    log_commands: bool,
    a: &mut Vec<(&'static str, Attr)>,
) -> (Option<u8>, Option<u8>, char) {
    let s = |v: &String| Attr::S(v.clone());
    let at = |a: &Vec<(&'static str, Attr)>| u8::try_from(a.len()).ok();
    let none = (None, None, ' ');
    match q {
        Query::Connect { host, port, via } => {
            let h = at(a);
            a.push(("server.address", s(host)));
            let p = at(a);
            a.push(("server.port", Attr::I(*port)));
            a.push(("network.transport", Attr::W("tcp")));
            a.push(("gatehouse.via", Attr::W(via.as_str())));
            (h, p, ':')
        }
        Query::Dns { name } => {
            let n = at(a);
            a.push(("dns.question.name", s(name)));
            (n, None, ' ')
        }
        Query::Resolved { host, addrs, port } => {
            let n = at(a);
            a.push(("dns.question.name", s(host)));
            a.push(("dns.answers", Attr::S(addrs.join(","))));
            if let Some(p) = port {
                a.push(("server.port", Attr::I(*p)));
            }
            (n, None, ' ')
        }
        Query::Socket { path } => {
            a.push(("network.transport", Attr::W("unix")));
            a.push(("server.address", s(path)));
            none
        }
        Query::Listen { addr } => {
            a.push(("server.address", s(addr)));
            none
        }
        Query::Tool { permission } => {
            a.push(("gatehouse.permission", s(permission)));
            none
        }
        Query::App { program } => {
            a.push(("gatehouse.app", s(program)));
            none
        }
        Query::Mcp { server, tool, .. } => {
            let sv = at(a);
            a.push(("gatehouse.mcp.server", s(server)));
            let t = at(a);
            a.push(("gen_ai.tool.name", s(tool)));
            (sv, t, '/')
        }
        Query::Prompt { category } => {
            a.push(("gatehouse.prompt.category", Attr::W(category.as_str())));
            none
        }
        Query::Exec { argv, escalate } => {
            a.push(("gatehouse.exec.escalate", Attr::B(*escalate)));
            if log_commands {
                a.push(("process.command_line", Attr::S(argv.join(" "))));
            }
            none
        }
        Query::Write { path, .. } | Query::Read { path, .. } => {
            if log_commands {
                a.push(("file.path", s(path)));
            }
            none
        }
        Query::Review { action, .. } => {
            a.push(("gatehouse.review.action.kind", Attr::W(action.kind())));
            if log_commands {
                let text = serde_json::to_string(action).unwrap_or_default();
                a.push(("gatehouse.review.action", Attr::S(text)));
            }
            none
        }
        Query::Upstream | Query::WebSearch => none,
    }
}

/// How the records leave.
pub(crate) enum Logs {
    /// Encoded straight to the wire ([`crate::wire`]): OTLP/HTTP protobuf
    /// and gRPC.
    Wire {
        sender: crate::send::Sender,
        resource: crate::wire::Resource,
    },
    /// Through the SDK's exporter: OTLP/HTTP JSON.
    Sdk(Box<opentelemetry_otlp::LogExporter>),
}

/// Every TICK (or sooner, when the queue fills) drains the queue and
/// exports it in batches; each record is counted sent, or failed when its
/// export fails or times out. After a failure the next try waits (1 s,
/// doubling to 10 s): meanwhile the queue fills and new events are dropped
/// and counted on the deciding side, with no work here; shutdown tries
/// once more whatever the wait.
pub(crate) async fn export_loop(
    mut rx: tokio::sync::mpsc::Receiver<Msg>,
    wake: Arc<tokio::sync::Notify>,
    logs: Logs,
    counts: Arc<Counts>,
    timeout: Duration,
    latency: Histogram<f64>,
) {
    let mut out = Out {
        logs,
        latency,
        timeout,
        encoder: crate::wire::Encoder::default(),
        buf: Vec::new(),
    };
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut spans: Vec<SpanEvent> = Vec::new();
    let mut stop = false;
    let mut backoff = Duration::ZERO;
    let mut retry_at = tokio::time::Instant::now();
    while !stop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = wake.notified() => {}
        }
        counts.woken.store(false, Ordering::Relaxed);
        let stopping = counts.stopping.load(Ordering::Relaxed);
        if !stopping && tokio::time::Instant::now() < retry_at {
            continue;
        }
        loop {
            match rx.try_recv() {
                Ok(Msg::Event(e)) => batch.push(e),
                Ok(Msg::Span(s)) => spans.push(s),
                Ok(Msg::Stop) | Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    stop = true;
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
            }
            let drained = stop || rx.is_empty();
            if spans.len() >= BATCH || (drained && !spans.is_empty()) {
                let n = spans.len() as u64;
                let ok = out.export_spans(&spans).await;
                spans.clear();
                let counter = if ok { &counts.sent } else { &counts.failed };
                counter.fetch_add(n, Ordering::Relaxed);
                counts.healthy.store(ok, Ordering::Relaxed);
            }
            if batch.len() >= BATCH || (drained && !batch.is_empty()) {
                let n = batch.len() as u64;
                let ok = out.export(&mut batch).await;
                batch.clear();
                let counter = if ok { &counts.sent } else { &counts.failed };
                counter.fetch_add(n, Ordering::Relaxed);
                counts.healthy.store(ok, Ordering::Relaxed);
                if ok {
                    backoff = Duration::ZERO;
                } else if !stopping {
                    backoff = (backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(10));
                    retry_at = tokio::time::Instant::now() + backoff;
                    break;
                }
            }
            if drained {
                break;
            }
        }
    }
    if let Logs::Sdk(e) = &out.logs {
        let _ = e.shutdown_with_timeout(Duration::from_millis(200));
    }
}

struct Out {
    logs: Logs,
    latency: Histogram<f64>,
    timeout: Duration,
    encoder: crate::wire::Encoder,
    buf: Vec<u8>,
}

impl Out {
    /// Exports finished spans; whether they arrived. Over OTLP/HTTP JSON
    /// (the SDK's path) spans are not sent, and count as not delivered.
    async fn export_spans(&mut self, spans: &[SpanEvent]) -> bool {
        match &self.logs {
            Logs::Wire { sender, resource } => {
                self.encoder.spans(resource, spans, &mut self.buf);
                let body = std::mem::take(&mut self.buf);
                sender
                    .send(crate::send::Signal::Traces, body, self.timeout)
                    .await
                    .is_ok()
            }
            Logs::Sdk(_) => false,
        }
    }

    /// Exports `batch`; whether it arrived.
    async fn export(&mut self, batch: &mut [Event]) -> bool {
        for e in batch.iter() {
            self.latency.record(
                e.elapsed.as_secs_f64(),
                &[
                    KeyValue::new("gatehouse.policy", e.policy.to_string()),
                    KeyValue::new("gatehouse.query.kind", e.kind),
                ],
            );
        }
        match &self.logs {
            Logs::Wire { sender, resource } => {
                self.encoder.request(resource, batch, &mut self.buf);
                let body = std::mem::take(&mut self.buf);
                sender
                    .send(crate::send::Signal::Logs, body, self.timeout)
                    .await
                    .is_ok()
            }
            Logs::Sdk(exporter) => {
                let provider = SdkLoggerProvider::builder().build();
                let logger = provider.logger("gatehouse");
                let scope = InstrumentationScope::builder("gatehouse")
                    .with_version(env!("CARGO_PKG_VERSION"))
                    .build();
                let records: Vec<_> = batch.iter().map(|e| sdk_record(&logger, e)).collect();
                let refs: Vec<_> = records.iter().map(|r| (r, &scope)).collect();
                let sent =
                    tokio::time::timeout(self.timeout, exporter.export(LogBatch::new(&refs))).await;
                matches!(sent, Ok(Ok(())))
            }
        }
    }
}

fn sdk_record(
    logger: &opentelemetry_sdk::logs::SdkLogger,
    e: &Event,
) -> opentelemetry_sdk::logs::SdkLogRecord {
    let mut r = logger.create_log_record();
    r.set_event_name("gatehouse.decision");
    r.set_timestamp(e.time);
    r.set_observed_timestamp(SystemTime::now());
    r.set_severity_number(Severity::Info);
    r.set_severity_text("INFO");
    r.set_body(AnyValue::from(e.body()));
    r.add_attribute("gatehouse.policy", e.policy.to_string());
    r.add_attribute("gatehouse.revision", e.revision.to_string());
    r.add_attribute("gatehouse.decision", e.decision);
    r.add_attribute("gatehouse.reason", e.reason);
    r.add_attribute("gatehouse.query.kind", e.kind);
    if let Some((file, line, column)) = &e.rule {
        r.add_attribute("gatehouse.rule", format!("{file}:{line}:{column}"));
    }
    for (k, v) in &e.attrs {
        match v {
            Attr::S(s) => r.add_attribute(*k, s.clone()),
            Attr::W(w) => r.add_attribute(*k, *w),
            Attr::I(i) => r.add_attribute(*k, *i),
            Attr::B(b) => r.add_attribute(*k, *b),
        }
    }
    r
}
