//! Counters and gauges, served in the Prometheus text format (version
//! 0.0.4) on `--metrics ADDR` at `GET /metrics`.
//!
//! Every number is an atomic updated on the hot path without a lock;
//! decisions are counted per reason code in a fixed table.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use gatehouse::Reason;

/// A counter (only goes up).
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A gauge (up and down).
#[derive(Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Takes one away.
    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
    /// Sets the value.
    pub fn set(&self, v: i64) {
        self.0.store(v, Ordering::Relaxed);
    }
    /// The value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Every metric of one daemon.
pub struct Metrics {
    /// Requests by kind: HTTP requests (every one on a kept-alive
    /// connection), CONNECT tunnels, SOCKS connections, DNS questions.
    pub http_requests: Counter,
    /// `CONNECT` requests.
    pub connect_requests: Counter,
    /// SOCKS5 requests.
    pub socks_requests: Counter,
    /// DNS questions.
    pub dns_questions: Counter,
    /// Host mode: connections accepted by the transparent listener.
    pub transparent_connections: Counter,
    allow: Vec<Counter>,
    deny: Vec<Counter>,
    refusals: Vec<Counter>,
    /// Client connections open now.
    pub open_connections: Gauge,
    /// Bytes tunnelled from clients.
    pub tunnel_bytes_up: Counter,
    /// Bytes tunnelled to clients.
    pub tunnel_bytes_down: Counter,
    /// Requests sent on a pooled upstream connection.
    pub upstream_reused: Counter,
    /// Upstream connections dialled.
    pub upstream_dialled: Counter,
    /// Idle pooled upstream connections now.
    pub pool_idle: Gauge,
    /// Names in the resolver's vetted-answer cache now.
    pub resolver_cache_entries: Gauge,
    /// Questions waiting on the upstream DNS server now.
    pub dns_upstream_inflight: Gauge,
    /// Policy reloads that took effect.
    pub reloads: Counter,
    /// Policy reloads refused (the old policy stayed).
    pub reload_failures: Counter,
    /// Times accepting paused (descriptors or memory exhausted).
    pub accept_backoffs: Counter,
    /// Connections closed at accept because their client already held its
    /// share of the listener ([`crate::listener::share`]).
    pub client_share_refusals: Counter,
    log: std::sync::OnceLock<Arc<gatehouse::log::BackgroundSink>>,
    telemetry: std::sync::OnceLock<gatehouse_otel::Telemetry>,
    revision: std::sync::Mutex<String>,
    more: std::sync::OnceLock<Renderer>,
}

impl Default for Metrics {
    fn default() -> Self {
        let n = Reason::ALL.len();
        let counters = |n: usize| (0..n).map(|_| Counter::default()).collect();
        Metrics {
            http_requests: Counter::default(),
            connect_requests: Counter::default(),
            socks_requests: Counter::default(),
            dns_questions: Counter::default(),
            transparent_connections: Counter::default(),
            allow: counters(n),
            deny: counters(n),
            refusals: counters(crate::outcome::Refusal::ALL.len()),
            open_connections: Gauge::default(),
            tunnel_bytes_up: Counter::default(),
            tunnel_bytes_down: Counter::default(),
            upstream_reused: Counter::default(),
            upstream_dialled: Counter::default(),
            pool_idle: Gauge::default(),
            resolver_cache_entries: Gauge::default(),
            dns_upstream_inflight: Gauge::default(),
            reloads: Counter::default(),
            reload_failures: Counter::default(),
            accept_backoffs: Counter::default(),
            client_share_refusals: Counter::default(),
            log: std::sync::OnceLock::new(),
            telemetry: std::sync::OnceLock::new(),
            revision: std::sync::Mutex::new(String::new()),
            more: std::sync::OnceLock::new(),
        }
    }
}

impl Metrics {
    /// Counts one engine decision.
    pub fn decision(&self, allowed: bool, reason: Reason) {
        let table = if allowed { &self.allow } else { &self.deny };
        if let Some(c) = Reason::ALL
            .iter()
            .position(|r| *r == reason)
            .and_then(|i| table.get(i))
        {
            c.inc();
        }
    }

    /// Counts one refusal by the proxy itself; the policy's own denials
    /// are counted with the decisions.
    pub fn refusal(&self, refusal: crate::outcome::Refusal) {
        if let Some(c) = refusal.metric().and_then(|i| self.refusals.get(i)) {
            c.inc();
        }
    }

    /// The decision log whose dropped records are reported.
    pub fn watch_log(&self, sink: Arc<gatehouse::log::BackgroundSink>) {
        let _ = self.log.set(sink);
    }

    /// Records the revision of the policy in force.
    pub fn set_revision(&self, rev: &str) {
        if let Ok(mut r) = self.revision.lock() {
            *r = rev.to_string();
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let counter = |o: &mut String, name: &str, help: &str, rows: &[(String, u64)]| {
            let _ = writeln!(o, "# HELP gatehouse_egress_{name} {help}");
            let _ = writeln!(o, "# TYPE gatehouse_egress_{name} counter");
            for (labels, v) in rows {
                let _ = writeln!(o, "gatehouse_egress_{name}{labels} {v}");
            }
        };
        let kinds = [
            ("http", &self.http_requests),
            ("connect", &self.connect_requests),
            ("socks5", &self.socks_requests),
            ("dns", &self.dns_questions),
            ("transparent", &self.transparent_connections),
        ];
        let rows: Vec<(String, u64)> = kinds
            .iter()
            .map(|(k, c)| (format!("{{kind=\"{k}\"}}"), c.get()))
            .collect();
        counter(&mut o, "requests_total", "Requests by kind.", &rows);
        let mut rows = Vec::new();
        for (i, r) in Reason::ALL.iter().enumerate() {
            for (outcome, table) in [("allow", &self.allow), ("deny", &self.deny)] {
                let v = table.get(i).map_or(0, Counter::get);
                if v > 0 {
                    rows.push((
                        format!("{{outcome=\"{outcome}\",reason=\"{}\"}}", r.as_str()),
                        v,
                    ));
                }
            }
        }
        counter(
            &mut o,
            "decisions_total",
            "Engine decisions by outcome and reason code.",
            &rows,
        );
        let rows: Vec<(String, u64)> = crate::outcome::Refusal::ALL
            .iter()
            .zip(&self.refusals)
            .map(|(r, c)| (format!("{{reason=\"{r}\"}}"), c.get()))
            .filter(|(_, v)| *v > 0)
            .collect();
        counter(
            &mut o,
            "proxy_refusals_total",
            "Requests the proxy refused before or beside the engine (framing, agreement of names, upstream failures).",
            &rows,
        );
        counter(
            &mut o,
            "tunnel_bytes_total",
            "Bytes relayed in tunnels and forwarded bodies, by direction.",
            &[
                ("{direction=\"up\"}".into(), self.tunnel_bytes_up.get()),
                ("{direction=\"down\"}".into(), self.tunnel_bytes_down.get()),
            ],
        );
        counter(
            &mut o,
            "upstream_connections_total",
            "Upstream connections used for forwarded requests: dialled, or reused from the pool.",
            &[
                ("{how=\"dialled\"}".into(), self.upstream_dialled.get()),
                ("{how=\"reused\"}".into(), self.upstream_reused.get()),
            ],
        );
        counter(
            &mut o,
            "reloads_total",
            "Policy reloads, by result.",
            &[
                ("{result=\"ok\"}".into(), self.reloads.get()),
                ("{result=\"refused\"}".into(), self.reload_failures.get()),
            ],
        );
        counter(
            &mut o,
            "accept_backoffs_total",
            "Accepts that failed for want of descriptors or memory and were retried after a pause.",
            &[(String::new(), self.accept_backoffs.get())],
        );
        counter(
            &mut o,
            "client_share_refusals_total",
            "Connections closed at accept because their client already held a quarter of the listener's cap.",
            &[(String::new(), self.client_share_refusals.get())],
        );
        counter(
            &mut o,
            "log_dropped_total",
            "Decision-log and access records dropped because the log writer fell behind.",
            &[(String::new(), self.log.get().map_or(0, |l| l.dropped()))],
        );
        counter(
            &mut o,
            "telemetry_dropped_total",
            "OpenTelemetry decision events not delivered: the export queue was full, or an export failed or timed out.",
            &[(
                String::new(),
                self.telemetry.get().map_or(0, |t| t.dropped()),
            )],
        );
        let gauge = |o: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(o, "# HELP gatehouse_egress_{name} {help}");
            let _ = writeln!(o, "# TYPE gatehouse_egress_{name} gauge");
            let _ = writeln!(o, "gatehouse_egress_{name} {v}");
        };
        gauge(
            &mut o,
            "open_connections",
            "Client connections open now (all listeners).",
            self.open_connections.get(),
        );
        gauge(
            &mut o,
            "upstream_pool_idle",
            "Idle upstream connections kept for reuse.",
            self.pool_idle.get(),
        );
        gauge(
            &mut o,
            "resolver_cache_entries",
            "Names in the answer cache.",
            self.resolver_cache_entries.get(),
        );
        gauge(
            &mut o,
            "dns_upstream_inflight",
            "Questions sent upstream and not yet answered.",
            self.dns_upstream_inflight.get(),
        );
        let rev = self.revision.lock().map(|r| r.clone()).unwrap_or_default();
        let _ = writeln!(
            o,
            "# HELP gatehouse_egress_policy_info The policy revision in force."
        );
        let _ = writeln!(o, "# TYPE gatehouse_egress_policy_info gauge");
        let _ = writeln!(o, "gatehouse_egress_policy_info{{revision=\"{rev}\"}} 1");
        if let Some(more) = self.more.get() {
            more(&mut o);
        }
        o
    }

    /// Adds families of an embedder's own to every rendering (host mode's
    /// per-sandbox counters); the first call wins.
    pub fn render_also(&self, more: Renderer) {
        let _ = self.more.set(more);
    }
}

/// Families an embedder adds to `/metrics`.
pub type Renderer = Box<dyn Fn(&mut String) + Send + Sync>;

/// A counter of a [`Tally`], and its family's name and help.
type Family = (&'static str, &'static str, fn(&Tally) -> &Counter);

/// One sandbox's counters in host mode, rendered with its id as the
/// `sandbox` label.
#[derive(Default)]
pub struct Tally {
    /// Engine decisions that allowed.
    pub allowed: Counter,
    /// Engine decisions that did not.
    pub denied: Counter,
    /// Connections the transparent listener accepted from it.
    pub connections: Counter,
    /// DNS questions it asked.
    pub questions: Counter,
}

/// Renders per-sandbox counters, `(id, tally)` pairs, as three families
/// labelled `sandbox`.
pub fn render_tallies(o: &mut String, tallies: &[(&str, &Tally)]) {
    let head = |o: &mut String, name: &str, help: &str| {
        let _ = writeln!(o, "# HELP gatehouse_egress_{name} {help}");
        let _ = writeln!(o, "# TYPE gatehouse_egress_{name} counter");
    };
    let name = "sandbox_decisions_total";
    head(o, name, "Engine decisions per sandbox, by outcome.");
    for (id, t) in tallies {
        for (outcome, c) in [("allow", &t.allowed), ("deny", &t.denied)] {
            let v = c.get();
            let _ = writeln!(
                o,
                "gatehouse_egress_{name}{{sandbox=\"{id}\",outcome=\"{outcome}\"}} {v}"
            );
        }
    }
    let single: [Family; 2] = [
        (
            "sandbox_connections_total",
            "Connections the transparent listener accepted, per sandbox.",
            |t| &t.connections,
        ),
        (
            "sandbox_dns_questions_total",
            "DNS questions, per sandbox.",
            |t| &t.questions,
        ),
    ];
    for (name, help, get) in single {
        head(o, name, help);
        for (id, t) in tallies {
            let v = get(t).get();
            let _ = writeln!(o, "gatehouse_egress_{name}{{sandbox=\"{id}\"}} {v}");
        }
    }
}

/// The decision sink with OpenTelemetry export beside it, when export is
/// on; the daemon's counters are registered with the export (read when
/// metrics are collected, never on a request's path), and its dropped
/// events shown on `/metrics`.
pub fn with_telemetry(
    sink: Option<Arc<dyn gatehouse::log::DecisionSink>>,
    telemetry: &gatehouse_otel::Telemetry,
    metrics: &Arc<Metrics>,
) -> Option<Arc<dyn gatehouse::log::DecisionSink>> {
    let kv = |k: &'static str, v: &str| -> gatehouse_otel::Attribute { (k, v.to_string()) };
    if !telemetry.is_on() {
        return sink;
    }
    let _ = metrics.telemetry.set(telemetry.clone());
    let m = metrics.clone();
    telemetry.observe_counter(
        "gatehouse.egress.requests",
        "Requests, by kind: HTTP, CONNECT, SOCKS5, DNS, transparent",
        "{request}",
        move || {
            [
                ("http", &m.http_requests),
                ("connect", &m.connect_requests),
                ("socks5", &m.socks_requests),
                ("dns", &m.dns_questions),
                ("transparent", &m.transparent_connections),
            ]
            .iter()
            .map(|(k, c)| (c.get(), vec![kv("gatehouse.request.kind", k)]))
            .collect()
        },
    );
    let m = metrics.clone();
    telemetry.observe_counter(
        "gatehouse.egress.refusals",
        "Requests the proxy itself refused, by kind",
        "{request}",
        move || {
            crate::outcome::Refusal::ALL
                .iter()
                .filter_map(|r| {
                    let i = r.metric()?;
                    let c = m.refusals.get(i)?;
                    Some((c.get(), vec![kv("error.type", r.as_str())]))
                })
                .collect()
        },
    );
    let m = metrics.clone();
    telemetry.observe_counter(
        "gatehouse.egress.tunnel.bytes",
        "Bytes tunnelled, by direction",
        "By",
        move || {
            vec![
                (
                    m.tunnel_bytes_up.get(),
                    vec![kv("network.io.direction", "transmit")],
                ),
                (
                    m.tunnel_bytes_down.get(),
                    vec![kv("network.io.direction", "receive")],
                ),
            ]
        },
    );
    let m = metrics.clone();
    telemetry.observe_counter(
        "gatehouse.egress.reloads",
        "Policy reloads, by result",
        "{reload}",
        move || {
            vec![
                (m.reloads.get(), vec![kv("gatehouse.reload.result", "ok")]),
                (
                    m.reload_failures.get(),
                    vec![kv("gatehouse.reload.result", "refused")],
                ),
            ]
        },
    );
    let m = metrics.clone();
    telemetry.observe_gauge(
        "gatehouse.egress.connections.open",
        "Client connections open now",
        "{connection}",
        move || vec![(m.open_connections.get(), Vec::new())],
    );
    with_decisions(sink, telemetry)
}

/// The decision sink with OpenTelemetry's beside it, when export is on
/// (an adapter's: its decisions, without the daemon's counters).
pub fn with_decisions(
    sink: Option<Arc<dyn gatehouse::log::DecisionSink>>,
    telemetry: &gatehouse_otel::Telemetry,
) -> Option<Arc<dyn gatehouse::log::DecisionSink>> {
    if !telemetry.is_on() {
        return sink;
    }
    let t: Arc<dyn gatehouse::log::DecisionSink> = telemetry.sink();
    Some(match sink {
        None => t,
        Some(s) => Arc::new(gatehouse::log::Tee(vec![s, t])),
    })
}
