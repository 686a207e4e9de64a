//! One decision as a log record, and the background loop that exports them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use gatehouse::log::DecisionEvent;
use opentelemetry::InstrumentationScope;
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry_sdk::logs::{LogBatch, LogExporter as _, SdkLoggerProvider};
use serde_json::Value;

use crate::Counts;

/// The most records one export carries.
const BATCH: usize = 512;
/// How long a batch waits for more records before it is sent.
const LINGER: Duration = Duration::from_millis(200);

/// What the queue carries.
pub(crate) enum Msg {
    /// A decision to export.
    Event(Event),
    /// Export what came before, then end.
    Stop,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attr {
    S(String),
    I(i64),
    B(bool),
}

/// A decision, owned, with what may be sent of it.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) time: SystemTime,
    pub(crate) body: String,
    pub(crate) attrs: Vec<(&'static str, Attr)>,
}

/// The query kinds, as static words (metric attributes without an
/// allocation); anything else is `other`.
pub(crate) fn kind_word(kind: &str) -> &'static str {
    const KINDS: &[&str] = &[
        "connect",
        "dns",
        "resolved",
        "socket",
        "listen",
        "upstream",
        "tool",
        "app",
        "write",
        "read",
        "exec",
        "mcp",
        "prompt",
        "review",
        "web_search",
    ];
    KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .unwrap_or("other")
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(|x| x.as_str()).map(str::to_string)
}

impl Event {
    /// The event of one decision. Hosts, ports, names and the decision are
    /// always sent; command lines, paths and review actions only with
    /// `log_commands` (and then as the policy's masks leave them).
    pub(crate) fn from_decision(
        e: &DecisionEvent<'_>,
        kind: &'static str,
        log_commands: bool,
        extra: &[(&'static str, String)],
    ) -> Self {
        let mut a: Vec<(&'static str, Attr)> = vec![
            ("gatehouse.policy", Attr::S(e.policy.to_string())),
            ("gatehouse.revision", Attr::S(e.revision.to_string())),
            ("gatehouse.decision", Attr::S(e.decision.to_string())),
            ("gatehouse.reason", Attr::S(e.reason.to_string())),
            ("gatehouse.query.kind", Attr::S(kind.to_string())),
        ];
        if let Some(r) = &e.rule {
            a.push((
                "gatehouse.rule",
                Attr::S(format!("{}:{}:{}", r.file, r.line, r.column)),
            ));
        }
        if let Some(t) = &e.tool_decision {
            a.push(("gatehouse.tool_decision", Attr::S(t.decision.to_string())));
            a.push(("gatehouse.decision_source", Attr::S(t.source.to_string())));
        }
        if matches!(e.decision, "ask" | "review") {
            let to = if e.decision == "ask" {
                "user"
            } else {
                "auto_review"
            };
            a.push(("gatehouse.escalation", Attr::S(to.to_string())));
        }
        for (k, v) in extra {
            a.push((k, Attr::S(v.clone())));
        }
        query_attrs(&e.query, kind, log_commands, &mut a);
        let target = match kind {
            "connect" => e.query.get("host").and_then(|h| h.as_str()).map(|h| {
                let port = e.query.get("port").and_then(|p| p.as_u64()).unwrap_or(0);
                format!("{h}:{port}")
            }),
            "dns" | "resolved" => text(&e.query, "name").or_else(|| text(&e.query, "host")),
            "mcp" => match (text(&e.query, "server"), text(&e.query, "tool")) {
                (Some(s), Some(t)) => Some(format!("{s}/{t}")),
                _ => None,
            },
            _ => None,
        };
        let body = match target {
            Some(t) => format!("{} {kind} {t}: {}", e.decision, e.reason),
            None => format!("{} {kind}: {}", e.decision, e.reason),
        };
        Event {
            time: SystemTime::now(),
            body,
            attrs: a,
        }
    }
}

fn query_attrs(q: &Value, kind: &str, log_commands: bool, a: &mut Vec<(&'static str, Attr)>) {
    fn put(a: &mut Vec<(&'static str, Attr)>, key: &'static str, v: Option<String>) {
        if let Some(v) = v {
            a.push((key, Attr::S(v)));
        }
    }
    match kind {
        "connect" => {
            put(a, "server.address", text(q, "host"));
            put(a, "network.transport", Some("tcp".into()));
            put(a, "gatehouse.via", text(q, "via"));
            if let Some(p) = q.get("port").and_then(|p| p.as_i64()) {
                a.push(("server.port", Attr::I(p)));
            }
        }
        "dns" => put(a, "dns.question.name", text(q, "name")),
        "resolved" => {
            put(
                a,
                "dns.question.name",
                text(q, "host").or_else(|| text(q, "name")),
            );
            let addrs = q.get("addrs").and_then(|v| v.as_array()).map(|l| {
                l.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            });
            put(a, "dns.answers", addrs);
            if let Some(p) = q.get("port").and_then(|p| p.as_i64()) {
                a.push(("server.port", Attr::I(p)));
            }
        }
        "socket" => {
            put(a, "network.transport", Some("unix".into()));
            put(a, "server.address", text(q, "path"));
        }
        "listen" => {
            put(
                a,
                "server.address",
                text(q, "addr").or_else(|| text(q, "host")),
            );
            if let Some(p) = q.get("port").and_then(|p| p.as_i64()) {
                a.push(("server.port", Attr::I(p)));
            }
        }
        "tool" => put(a, "gatehouse.permission", text(q, "permission")),
        "app" => put(a, "gatehouse.app", text(q, "program")),
        "mcp" => {
            put(a, "gatehouse.mcp.server", text(q, "server"));
            put(a, "gen_ai.tool.name", text(q, "tool"));
        }
        "prompt" => put(a, "gatehouse.prompt.category", text(q, "category")),
        "exec" => {
            if let Some(b) = q.get("escalate").and_then(|b| b.as_bool()) {
                a.push(("gatehouse.exec.escalate", Attr::B(b)));
            }
            if log_commands {
                let line = q.get("argv").and_then(|v| v.as_array()).map(|l| {
                    l.iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                });
                put(a, "process.command_line", line);
            }
        }
        "write" | "read" if log_commands => put(a, "file.path", text(q, "path")),
        "review" => {
            let action = q.get("action");
            put(
                a,
                "gatehouse.review.action.kind",
                action.and_then(|x| text(x, "kind")),
            );
            if log_commands {
                put(a, "gatehouse.review.action", action.map(|x| x.to_string()));
            }
        }
        _ => {}
    }
}

/// Batches what the queue brings and exports it; each record is counted
/// sent, or failed when its export fails or times out.
pub(crate) async fn export_loop(
    mut rx: tokio::sync::mpsc::Receiver<Msg>,
    exporter: opentelemetry_otlp::LogExporter,
    counts: Arc<Counts>,
    timeout: Duration,
) {
    let provider = SdkLoggerProvider::builder().build();
    let logger = provider.logger("gatehouse");
    let scope = InstrumentationScope::builder("gatehouse")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut stop = false;
    while !stop {
        match rx.recv().await {
            None | Some(Msg::Stop) => stop = true,
            Some(Msg::Event(e)) => batch.push(e),
        }
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        while !stop && batch.len() < BATCH {
            tokio::select! {
                m = rx.recv() => match m {
                    None | Some(Msg::Stop) => stop = true,
                    Some(Msg::Event(e)) => batch.push(e),
                },
                _ = &mut linger => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let n = batch.len() as u64;
        let records: Vec<_> = batch
            .drain(..)
            .map(|e| {
                let mut r = logger.create_log_record();
                r.set_event_name("gatehouse.decision");
                r.set_timestamp(e.time);
                r.set_observed_timestamp(SystemTime::now());
                r.set_severity_number(Severity::Info);
                r.set_severity_text("INFO");
                r.set_body(AnyValue::from(e.body));
                for (k, v) in e.attrs {
                    match v {
                        Attr::S(s) => r.add_attribute(k, s),
                        Attr::I(i) => r.add_attribute(k, i),
                        Attr::B(b) => r.add_attribute(k, b),
                    }
                }
                r
            })
            .collect();
        let refs: Vec<_> = records.iter().map(|r| (r, &scope)).collect();
        let sent = tokio::time::timeout(timeout, exporter.export(LogBatch::new(&refs))).await;
        let counter = match sent {
            Ok(Ok(())) => &counts.sent,
            _ => &counts.failed,
        };
        counter.fetch_add(n, Ordering::Relaxed);
    }
    let _ = exporter.shutdown_with_timeout(Duration::from_millis(200));
}
