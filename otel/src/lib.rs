//! OpenTelemetry export for gatehouse's programs: every decision as an OTLP
//! log record (`gatehouse.decision`), decision counts and latencies as OTLP
//! metrics, and whatever counters the program registers (the daemon's
//! connections, refusals, bytes, reloads), over OTLP/HTTP or OTLP/gRPC.
//!
//! Never on the hot path: a decision copies its fields into a compact
//! form, appends it to a bounded queue and returns; a background runtime
//! takes the queue, encodes each record as OTLP protobuf, frames and
//! exports them.
//! When the queue is full (a slow, hanging or refusing collector), nothing
//! is encoded: the event is dropped and counted, and so is every record of
//! an export that failed or timed out: [`Telemetry::dropped`] says what was
//! lost, and is itself exported (`gatehouse.telemetry.dropped`).
//! [`Telemetry::shutdown`] sends what is queued within a bounded time. A
//! daemon's request spans ([`Telemetry::span`]) join a caller's trace
//! ([`TraceParent`]), and the decisions made inside one carry its ids
//! ([`in_span`]).
//!
//! ```no_run
//! use gatehouse_otel::{Settings, Telemetry};
//! let settings = Settings::from_env();
//! let telemetry = Telemetry::start(&settings, "my-proxy")?;
//! let sink = telemetry.sink(); // a gatehouse::log::DecisionSink
//! // ... set.decide_logged(policy, &query, None, sink.as_ref()) ...
//! telemetry.shutdown(std::time::Duration::from_secs(5));
//! # Ok::<(), gatehouse_otel::OtelError>(())
//! ```

mod export;
mod leave_out;
mod queue;
mod record;
mod send;
mod settings;
mod tally;
mod trace;
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gatehouse::log::{DecisionEvent, DecisionSink};
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

#[doc(hidden)]
pub use record::{
    CapturedForBench, capture_for_bench, encode_decision_for_bench, export_for_bench,
};
pub use settings::{Encoding, Exporter, Flags, Settings, SettingsError};
pub use trace::{Sampler, SpanIds, TraceParent, in_span};

/// Telemetry that could not be started.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The settings are not usable.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// An exporter could not be built (a malformed endpoint or header).
    #[error("telemetry: the {signal} exporter: {message}")]
    Exporter {
        /// `logs` or `metrics`.
        signal: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The background runtime could not be started.
    #[error("telemetry: the export runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Counts kept by the export side.
#[derive(Default)]
struct Counts {
    /// Events that reached the collector.
    sent: AtomicU64,
    /// Events dropped at a full queue.
    queue_full: AtomicU64,
    /// Events of an export that failed or timed out, or still queued or in
    /// flight when shutdown's bound ran out.
    failed: AtomicU64,
    /// Events handed to the queue.
    queued: AtomicU64,
    /// The last export arrived (a waiting sink waits only then).
    healthy: std::sync::atomic::AtomicBool,
    /// Shutdown has begun: the export tries once more, whatever its wait.
    stopping: std::sync::atomic::AtomicBool,
    /// A decision has woken the export early since it last drained (one
    /// wake-up per fill, not one per decision).
    woken: std::sync::atomic::AtomicBool,
}

struct Live {
    queue: Arc<queue::Queue>,
    /// Wakes the export early when the queue fills (it otherwise wakes on
    /// a tick: no wake-up, no system call, per decision).
    wake: Arc<tokio::sync::Notify>,
    counts: Arc<Counts>,
    decisions: Arc<tally::Tally>,
    meters: SdkMeterProvider,
    worker: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    runtime: std::sync::Mutex<Option<tokio::runtime::Runtime>>,
    log_commands: bool,
    sampler: Sampler,
}

impl Live {
    /// Counts a record queued or dropped; wakes the export once the queue
    /// is half full (once per fill, not once per record).
    fn queued(&self, ok: bool) {
        let counter = if ok {
            &self.counts.queued
        } else {
            &self.counts.queue_full
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if self.queue.len() >= self.queue.capacity() / 2
            && self.counts.healthy.load(Ordering::Relaxed)
            && !self.counts.woken.swap(true, Ordering::Relaxed)
        {
            self.wake.notify_one();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // Dropped without `shutdown` (perhaps on a thread of another
        // runtime, where blocking on this one would panic): the export's
        // runtime ends in the background.
        if let Some(rt) = self.runtime.lock().ok().and_then(|mut r| r.take()) {
            rt.shutdown_background();
        }
    }
}

/// One attribute of an observed metric value: its key and its value.
/// gatehouse-otel's own type, so that no OpenTelemetry type is part of its
/// public API (the SDK's can change without a change here).
pub type Attribute = (&'static str, String);

fn key_values(attrs: Vec<Attribute>) -> Vec<KeyValue> {
    attrs
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v))
        .collect()
}

/// The telemetry of one program; cheap to clone.
#[derive(Clone)]
pub struct Telemetry {
    live: Option<Arc<Live>>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::off()
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.is_on())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Telemetry {
    /// Telemetry that sends nothing (`exporter = "none"`).
    pub fn off() -> Self {
        Telemetry { live: None }
    }

    /// Starts export by `settings`; `program` is the `service.name` unless
    /// the settings or `OTEL_SERVICE_NAME` name one. With `exporter =
    /// "none"` nothing is started and nothing is sent.
    pub fn start(settings: &Settings, program: &str) -> Result<Self, OtelError> {
        settings.validate()?;
        if settings.exporter == Exporter::None {
            return Ok(Telemetry::off());
        }
        let sampler = settings.sampler()?;
        // The export has a runtime of its own, built and entered here: from
        // inside another runtime that would panic, so it is refused.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(OtelError::Runtime(std::io::Error::other(
                "start telemetry outside an async runtime (it runs its own)",
            )));
        }
        let headers = settings.resolved_headers(|k| std::env::var(k).ok())?;
        let resource = resource(settings, program);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gatehouse-otel")
            .enable_all()
            .build()?;
        // The exporters are built inside the runtime: gRPC's channel and
        // the HTTP client live on it.
        let client = OnRuntime {
            client: reqwest::Client::builder()
                .timeout(settings.export_timeout())
                .build()
                .map_err(|e| OtelError::Exporter {
                    signal: "logs",
                    message: e.to_string(),
                })?,
            handle: runtime.handle().clone(),
        };
        let (sender, metrics) = runtime.block_on(async {
            (
                send::Sender::new(settings, &headers, &client),
                metric_exporter(settings, &headers, client.clone()),
            )
        });
        let sender = sender?;
        let metrics = metrics?;
        let frame = wire::Frame::new(&wire::Resource::from_sdk(&resource));
        let reader = PeriodicReader::builder(metrics)
            .with_interval(settings.metric_interval())
            .build();
        let meters = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .build();
        let meter = meters.meter("gatehouse");
        // Counted on the deciding thread in a table of atomics, read when
        // metrics are collected: exact even when events are dropped, and
        // no SDK work per decision.
        let decisions = Arc::new(tally::Tally::default());
        let t = decisions.clone();
        let _decisions = meter
            .u64_observable_counter("gatehouse.decisions")
            .with_description("Decisions, by policy, outcome, reason and query kind")
            .with_unit("{decision}")
            .with_callback(move |o| {
                t.each(|policy, decision, reason, kind, n| {
                    o.observe(
                        n,
                        &[
                            KeyValue::new("gatehouse.policy", policy.to_string()),
                            KeyValue::new("gatehouse.decision", decision),
                            KeyValue::new("gatehouse.reason", reason),
                            KeyValue::new("gatehouse.query.kind", kind),
                        ],
                    );
                });
            })
            .build();
        let latency = meter
            .f64_histogram("gatehouse.decision.duration")
            .with_description("How long a decision took")
            .with_unit("s")
            .with_boundaries(vec![
                1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 1e-3, 1e-2,
            ])
            .build();
        let counts = Arc::new(Counts {
            healthy: std::sync::atomic::AtomicBool::new(true),
            ..Counts::default()
        });
        let c = counts.clone();
        let _dropped = meter
            .u64_observable_counter("gatehouse.telemetry.dropped")
            .with_description("Decision events not delivered: queue full, or export failed")
            .with_unit("{event}")
            .with_callback(move |o| {
                o.observe(
                    c.queue_full.load(Ordering::Relaxed),
                    &[KeyValue::new("error.type", "queue_full")],
                );
                o.observe(
                    c.failed.load(Ordering::Relaxed),
                    &[KeyValue::new("error.type", "export_failed")],
                );
            })
            .build();
        let queue = Arc::new(queue::Queue::new(settings.queue_capacity()));
        let wake = Arc::new(tokio::sync::Notify::new());
        let worker = runtime.spawn(export::export_loop(export::Export {
            queue: queue.clone(),
            wake: wake.clone(),
            sender,
            frame,
            counts: counts.clone(),
            timeout: settings.export_timeout(),
            latency,
        }));
        Ok(Telemetry {
            live: Some(Arc::new(Live {
                queue,
                wake,
                counts,
                decisions,
                meters,
                worker: std::sync::Mutex::new(Some(worker)),
                runtime: std::sync::Mutex::new(Some(runtime)),
                log_commands: settings.log_commands,
                sampler,
            })),
        })
    }

    /// Whether anything is sent.
    pub fn is_on(&self) -> bool {
        self.live.is_some()
    }

    /// The decision sink: each decision becomes a log record and a count.
    pub fn sink(&self) -> Arc<OtelSink> {
        Arc::new(OtelSink {
            live: self.live.clone(),
            extra: Vec::new(),
            wait_when_full: false,
        })
    }

    /// The sink of a batch program (`policyc eval`): when the queue is full
    /// a decision waits for the export instead of dropping its event, so
    /// the whole stream arrives. Never for a daemon, and never from inside
    /// an async runtime (it blocks the thread).
    pub fn sink_waiting(&self) -> Arc<OtelSink> {
        Arc::new(OtelSink {
            live: self.live.clone(),
            extra: Vec::new(),
            wait_when_full: true,
        })
    }

    /// A sink whose events carry one more attribute (host mode's
    /// `gatehouse.sandbox`).
    pub fn sink_with(&self, key: &'static str, value: &str) -> Arc<OtelSink> {
        Arc::new(OtelSink {
            live: self.live.clone(),
            extra: vec![(key, value.to_string())],
            wait_when_full: false,
        })
    }

    /// Whether command lines, paths and request lines may be sent.
    pub fn log_commands(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.log_commands)
    }

    /// The ids of a request's span under the configured sampler
    /// (`OTEL_TRACES_SAMPLER`): in `parent`'s trace when a caller's
    /// `traceparent` gave one, else a trace of its own; `None` when export
    /// is off or the sampler does not record this request.
    pub fn span_ids(&self, parent: Option<&TraceParent>) -> Option<SpanIds> {
        self.live.as_ref()?.sampler.span_ids(parent)
    }

    /// Whether a span would be queued now: false when export is off, or
    /// when the queue is full (then the span is counted as dropped here,
    /// and the caller builds nothing).
    pub fn span_wanted(&self) -> bool {
        let Some(l) = &self.live else { return false };
        if leave_out::left_out(leave_out::SPANS) {
            return false;
        }
        if l.queue.is_full() {
            l.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Records a finished span (a proxied request, a DNS answer) with its
    /// `ids` ([`SpanIds::new`]: a child of the caller's span when its
    /// `traceparent` gave one, else the root of a trace of its own), kind
    /// SERVER, status ERROR when `error`. Never waits: with the queue full
    /// it is dropped and counted.
    pub fn span(
        &self,
        name: &'static str,
        ids: &SpanIds,
        start: std::time::SystemTime,
        error: bool,
        attrs: &[(&'static str, &str)],
    ) {
        let Some(l) = &self.live else { return };
        let queued = record::with_scratch(|s| {
            record::span(s, name, ids, start, error, attrs);
            match s.record() {
                Some(r) => l.queue.push(queue::Kind::Span, r, None, || false),
                None => Err(queue::Refused::Full),
            }
        });
        l.queued(queued.is_ok());
    }

    /// Events not delivered: dropped at a full queue, or in a failed export.
    pub fn dropped(&self) -> u64 {
        self.live.as_ref().map_or(0, |l| {
            l.counts.queue_full.load(Ordering::Relaxed) + l.counts.failed.load(Ordering::Relaxed)
        })
    }

    /// Events that reached the collector.
    pub fn sent(&self) -> u64 {
        self.live
            .as_ref()
            .map_or(0, |l| l.counts.sent.load(Ordering::Relaxed))
    }

    /// Registers a counter read when metrics are collected (never on a
    /// hot path): `read` returns each value with its attributes.
    pub fn observe_counter(
        &self,
        name: &'static str,
        description: &'static str,
        unit: &'static str,
        read: impl Fn() -> Vec<(u64, Vec<Attribute>)> + Send + Sync + 'static,
    ) {
        if let Some(l) = &self.live {
            let _ = l
                .meters
                .meter("gatehouse")
                .u64_observable_counter(name)
                .with_description(description)
                .with_unit(unit)
                .with_callback(move |o| {
                    for (v, attrs) in read() {
                        o.observe(v, &key_values(attrs));
                    }
                })
                .build();
        }
    }

    /// Registers a gauge read when metrics are collected.
    pub fn observe_gauge(
        &self,
        name: &'static str,
        description: &'static str,
        unit: &'static str,
        read: impl Fn() -> Vec<(i64, Vec<Attribute>)> + Send + Sync + 'static,
    ) {
        if let Some(l) = &self.live {
            let _ = l
                .meters
                .meter("gatehouse")
                .i64_observable_gauge(name)
                .with_description(description)
                .with_unit(unit)
                .with_callback(move |o| {
                    for (v, attrs) in read() {
                        o.observe(v, &key_values(attrs));
                    }
                })
                .build();
        }
    }

    /// Sends what is queued and the metrics' last values, waiting at most
    /// `within`; then stops. Later events are dropped and counted.
    pub fn shutdown(&self, within: Duration) {
        let Some(l) = &self.live else { return };
        let deadline = std::time::Instant::now() + within;
        let worker = l.worker.lock().ok().and_then(|mut w| w.take());
        let runtime = l.runtime.lock().ok().and_then(|mut r| r.take());
        let Some(runtime) = runtime else { return };
        // The worker exports everything queued before the marker, then ends.
        l.counts.stopping.store(true, Ordering::Relaxed);
        runtime.block_on(async {
            l.wake.notify_one();
            if let Some(w) = worker {
                let _ = tokio::time::timeout_at(deadline.into(), w).await;
            }
        });
        // What the bound left behind (queued, or in an export that did not
        // finish) is lost: counted with the failed.
        let c = &l.counts;
        let done = c.sent.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed);
        let left_behind = c.queued.load(Ordering::Relaxed).saturating_sub(done);
        c.failed.fetch_add(left_behind, Ordering::Relaxed);
        // The metrics' last values, in what is left of the bound: the
        // SDK's reader may wait on a hanging collector past the timeout it
        // is given, so it is waited for on a thread of its own.
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let meters = l.meters.clone();
        let (done, wait) = std::sync::mpsc::channel();
        let flushed = std::thread::Builder::new()
            .name("gatehouse-otel-flush".into())
            .spawn(move || {
                let _ = meters.shutdown_with_timeout(left);
                let _ = done.send(());
            });
        if flushed.is_ok() {
            let _ = wait.recv_timeout(left);
        }
        runtime.shutdown_background();
    }
}

/// The [`DecisionSink`] of a [`Telemetry`].
pub struct OtelSink {
    live: Option<Arc<Live>>,
    extra: Vec<(&'static str, String)>,
    wait_when_full: bool,
}

impl DecisionSink for OtelSink {
    fn record(&self, e: &DecisionEvent<'_>) {
        let Some(l) = &self.live else { return };
        if !leave_out::left_out(leave_out::TALLY) {
            l.decisions
                .add(e.policy, e.decision, e.reason, e.masked.kind());
        }
        if leave_out::left_out(leave_out::LOGS) {
            return;
        }
        // A batch program (`policyc eval`) exports the whole stream: a
        // full queue waits for the export while the collector takes it.
        let wait = || self.wait_when_full && l.counts.healthy.load(Ordering::Relaxed);
        if l.queue.is_full() && !wait() {
            // Full (a slow, hanging or refusing collector): counted, and
            // nothing encoded that would only be dropped.
            l.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let latency = (
            e.elapsed.as_secs_f64(),
            record::interned(e.policy),
            e.masked.kind(),
        );
        let queued = record::with_scratch(|s| {
            record::capture(s, e, l.log_commands, &self.extra);
            match s.record() {
                Some(r) if leave_out::left_out(leave_out::QUEUE) => {
                    std::hint::black_box(r);
                    Ok(())
                }
                Some(r) => l.queue.push(queue::Kind::Log, r, Some(latency), wait),
                None => Err(queue::Refused::Full),
            }
        });
        l.queued(queued.is_ok());
    }

    fn enabled(&self) -> bool {
        self.live.is_some()
    }

    fn wants_json(&self) -> bool {
        false
    }
}

fn resource(settings: &Settings, program: &str) -> Resource {
    let mut b = Resource::builder();
    let from_env = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.is_empty());
    let name = settings
        .service_name
        .clone()
        .or(from_env)
        .unwrap_or_else(|| program.to_string());
    b = b.with_service_name(name);
    b = b.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if let Some(env) = &settings.environment {
        b = b.with_attribute(KeyValue::new("deployment.environment.name", env.clone()));
    }
    b.build()
}

fn metric_exporter(
    s: &Settings,
    headers: &[(String, String)],
    client: OnRuntime,
) -> Result<opentelemetry_otlp::MetricExporter, OtelError> {
    let err = |e: opentelemetry_otlp::ExporterBuildError| OtelError::Exporter {
        signal: "metrics",
        message: e.to_string(),
    };
    let b = opentelemetry_otlp::MetricExporter::builder();
    match s.exporter {
        Exporter::OtlpGrpc => {
            let mut b = b
                .with_tonic()
                .with_timeout(s.export_timeout())
                .with_metadata(metadata(headers)?);
            if let Some(e) = s.signal_endpoint("metrics") {
                b = grpc_tls(b.with_endpoint(e.clone()), &e);
            }
            b.build().map_err(err)
        }
        _ => {
            let mut b = b
                .with_http()
                .with_http_client(client)
                .with_protocol(http_protocol(s))
                .with_timeout(s.export_timeout());
            if !headers.is_empty() {
                b = b.with_headers(headers.iter().cloned().collect());
            }
            if let Some(e) = s.signal_endpoint("metrics") {
                b = b.with_endpoint(e);
            }
            b.build().map_err(err)
        }
    }
}

fn http_protocol(s: &Settings) -> opentelemetry_otlp::Protocol {
    match s.protocol {
        Encoding::Binary => opentelemetry_otlp::Protocol::HttpBinary,
        Encoding::Json => opentelemetry_otlp::Protocol::HttpJson,
    }
}

fn grpc_tls<B: opentelemetry_otlp::WithTonicConfig>(b: B, endpoint: &str) -> B {
    if endpoint.starts_with("https://") {
        b.with_tls_config(
            opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_webpki_roots(),
        )
    } else {
        b
    }
}

fn metadata(
    headers: &[(String, String)],
) -> Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap, OtelError> {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let bad = |what: &str| OtelError::Exporter {
            signal: "logs",
            message: format!("header `{k}`: not a valid {what}"),
        };
        let name = http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes())
            .map_err(|_| bad("name"))?;
        let value = http::HeaderValue::from_str(v).map_err(|_| bad("value"))?;
        map.insert(name, value);
    }
    Ok(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map))
}

/// The HTTP client of the exporters: each request runs on the export
/// runtime, whichever thread asks (the SDK's metric reader asks from a
/// thread of its own, with no runtime).
#[derive(Clone, Debug)]
pub(crate) struct OnRuntime {
    client: reqwest::Client,
    handle: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let client = self.client.clone();
        self.handle
            .spawn(async move { client.send_bytes(request).await })
            .await
            .map_err(|e| Box::new(e) as opentelemetry_http::HttpError)?
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
#[path = "lib_tests.rs"]
mod tests;
