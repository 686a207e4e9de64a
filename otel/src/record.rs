//! A decision as an OTLP `LogRecord`, a request as an OTLP `Span`. A
//! decision's fields are copied on the deciding thread into a compact
//! form ([`capture`]: bytes in the queue, no allocation handed to another
//! thread) that the export encodes as OTLP ([`expand`]); a span, one a
//! request and small, is encoded where the request ends.

use std::cell::RefCell;
use std::time::SystemTime;

use gatehouse::log::DecisionEvent;
use gatehouse::query::Query;

use crate::wire::{
    Cursor, Out as _, Reader, VARINT, Value, any_value, bytes_field, encode, fixed64, key_value,
    nanos, tag, varint,
};

/// Reused buffers of one thread.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The record's encoding, in its first `len` bytes (the rest is left
    /// from earlier records: the buffer is written through a
    /// [`Cursor`], never cleared).
    buf: Vec<u8>,
    len: Option<usize>,
    text: String,
    more: String,
}

impl Scratch {
    /// The last record encoded (`None` if it could not be).
    pub(crate) fn record(&self) -> Option<&[u8]> {
        self.buf.get(..self.len?)
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's buffers (fresh ones if they are in use
/// already, as they would be in a re-entered sink).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// The `LogRecord` of one decision, into `s.record`: [`capture`], then
/// [`expand`] (what the deciding thread and then the export do).
#[cfg(test)]
pub(crate) fn decision(
    s: &mut Scratch,
    e: &DecisionEvent<'_>,
    log_commands: bool,
    extra: &[(&'static str, String)],
) {
    capture(s, e, log_commands, extra);
    let compact = s.record().map(<[u8]>::to_vec).unwrap_or_default();
    s.len = encode(&mut s.buf, |r| {
        let _ = expand(&compact, r);
    });
}

/// Every attribute key of a decision record; the compact form names a key
/// by its place here.
const KEYS: [&str; 25] = [
    "gatehouse.policy",
    "gatehouse.revision",
    "gatehouse.decision",
    "gatehouse.reason",
    "gatehouse.query.kind",
    "gatehouse.rule",
    "gatehouse.tool_decision",
    "gatehouse.decision_source",
    "gatehouse.escalation",
    "server.address",
    "server.port",
    "network.transport",
    "gatehouse.via",
    "dns.question.name",
    "dns.answers",
    "gatehouse.permission",
    "gatehouse.app",
    "gatehouse.mcp.server",
    "gen_ai.tool.name",
    "gatehouse.prompt.category",
    "gatehouse.exec.escalate",
    "process.command_line",
    "file.path",
    "gatehouse.review.action.kind",
    "gatehouse.review.action",
];

/// A key not in [`KEYS`] (a sink's extra attribute) follows this byte.
const NAMED: u8 = 0xff;

/// `k`'s place in [`KEYS`], found when the program is compiled (a key not
/// there does not compile).
#[allow(clippy::indexing_slicing, clippy::panic)] // evaluated only when compiling (`key!`): `i` is below the length, and the panic is a compile error
const fn key_id(k: &str) -> u8 {
    let mut i = 0;
    while i < KEYS.len() {
        let (a, b) = (KEYS[i].as_bytes(), k.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i as u8;
            }
        }
        i += 1;
    }
    panic!("an attribute key missing from KEYS")
}

macro_rules! key {
    ($k:literal) => {{
        const ID: u8 = key_id($k);
        ID
    }};
}

/// The value tags of the compact form.
const S: u8 = 0;
const I: u8 = 1;
const B: u8 = 2;

/// One attribute in the compact form: the key's place (or [`NAMED`] and
/// the key), the value's tag, the value.
#[inline(always)]
fn attr(c: &mut Cursor<'_>, id: u8, v: Value<'_>) {
    c.byte(id);
    attr_value(c, v);
}

/// An attribute's value in the compact form: its tag, then the value.
#[inline(always)]
fn attr_value(c: &mut Cursor<'_>, v: Value<'_>) {
    match v {
        Value::S(s) => {
            c.byte(S);
            varint(c, s.len() as u64);
            c.put(s.as_bytes());
        }
        Value::U(b) => {
            c.byte(S);
            varint(c, b.len() as u64);
            c.put(b);
        }
        Value::I(i) => {
            c.byte(I);
            c.put(&i.to_le_bytes());
        }
        Value::B(b) => {
            c.byte(B);
            c.byte(u8::from(b));
        }
        // No decision attribute is a float; written as its text.
        Value::D(d) => {
            let t = d.to_string();
            c.byte(S);
            varint(c, t.len() as u64);
            c.put(t.as_bytes());
        }
    }
}

/// What the deciding thread does for a decision: its fields, copied into
/// a compact form in `s.record` — the time, the request's span ids, the
/// body, and each attribute as its key's place and its value. The OTLP
/// encoding ([`expand`]) is left to the export, which runs it over
/// thousands of records at once: encoded here, between a request's own
/// work, it cost several times what it costs in a loop (criterion and the
/// load runs in BENCHMARKS.md). Hosts, ports, names and the decision are
/// always sent; command lines, paths and review actions only with
/// `log_commands` (and then as the policy's masks leave them).
pub(crate) fn capture(
    s: &mut Scratch,
    e: &DecisionEvent<'_>,
    log_commands: bool,
    extra: &[(&'static str, String)],
) {
    let now = nanos(SystemTime::now());
    let ids = crate::trace::current();
    let Scratch {
        buf,
        len,
        text,
        more,
    } = s;
    body(text, e);
    *len = encode(buf, |c| {
        c.put(&now.to_le_bytes());
        match &ids {
            Some(ids) => {
                c.byte(1);
                c.put(&ids.trace_id);
                c.put(&ids.span_id);
            }
            None => c.byte(0),
        }
        varint(c, text.len() as u64);
        c.put(text.as_bytes());
        if !crate::leave_out::left_out(crate::leave_out::ATTRS) {
            attrs(c, more, e, log_commands, extra);
        }
    });
}

/// The body: `DECISION KIND [TARGET]: REASON`.
fn body(body: &mut String, e: &DecisionEvent<'_>) {
    let q = e.masked;
    body.clear();
    body.push_str(e.decision);
    body.push(' ');
    body.push_str(q.kind());
    match q {
        Query::Connect { host, port, .. } => {
            body.push(' ');
            body.push_str(host);
            body.push(':');
            if *port < 0 {
                body.push('-');
            }
            push_number(body, port.unsigned_abs());
        }
        Query::Dns { name } => {
            body.push(' ');
            body.push_str(name);
        }
        Query::Resolved { host, .. } => {
            body.push(' ');
            body.push_str(host);
        }
        Query::Mcp { server, tool, .. } => {
            body.push(' ');
            body.push_str(server);
            body.push('/');
            body.push_str(tool);
        }
        _ => {}
    }
    body.push_str(": ");
    body.push_str(e.reason);
}

/// The decision's attributes, in the compact form.
fn attrs(
    c: &mut Cursor<'_>,
    more: &mut String,
    e: &DecisionEvent<'_>,
    log_commands: bool,
    extra: &[(&'static str, String)],
) {
    let q = e.masked;
    attr(c, key!("gatehouse.policy"), Value::S(e.policy));
    attr(c, key!("gatehouse.revision"), Value::S(e.revision));
    attr(c, key!("gatehouse.decision"), Value::S(e.decision));
    attr(c, key!("gatehouse.reason"), Value::S(e.reason));
    attr(c, key!("gatehouse.query.kind"), Value::S(q.kind()));
    if let Some(rule) = &e.rule {
        more.clear();
        more.push_str(rule.file);
        more.push(':');
        push_number(more, u64::try_from(rule.line).unwrap_or(u64::MAX));
        more.push(':');
        push_number(more, u64::try_from(rule.column).unwrap_or(u64::MAX));
        attr(c, key!("gatehouse.rule"), Value::S(more));
    }
    if let Some(t) = &e.tool_decision {
        attr(c, key!("gatehouse.tool_decision"), Value::S(t.decision));
        attr(c, key!("gatehouse.decision_source"), Value::S(t.source));
    }
    match e.decision {
        "ask" => attr(c, key!("gatehouse.escalation"), Value::S("user")),
        "review" => attr(c, key!("gatehouse.escalation"), Value::S("auto_review")),
        _ => {}
    }
    for (k, v) in extra {
        c.byte(NAMED);
        varint(c, k.len() as u64);
        c.put(k.as_bytes());
        attr_value(c, Value::S(v));
    }
    query_attrs(c, more, q, log_commands);
}

/// The OTLP `LogRecord` of a decision captured by [`capture`], into `r`;
/// `None` when `compact` is not such a record (it always is: it was
/// written by this program).
pub(crate) fn expand(compact: &[u8], r: &mut Cursor<'_>) -> Option<()> {
    let mut rd = Reader(compact);
    let now = rd.u64()?;
    let ids = match rd.byte()? {
        0 => None,
        _ => Some((rd.take(16)?, rd.take(8)?)),
    };
    let body = rd.bytes()?;
    fixed64(r, 1, now);
    tag(r, 2, VARINT);
    varint(r, 9); // SEVERITY_NUMBER_INFO
    bytes_field(r, 3, b"INFO");
    any_value(r, 5, Value::U(body));
    while !rd.0.is_empty() {
        let id = rd.byte()?;
        let named;
        let key: &[u8] = if id == NAMED {
            named = rd.bytes()?;
            named
        } else {
            KEYS.get(usize::from(id))?.as_bytes()
        };
        let value = match rd.byte()? {
            S => Value::U(rd.bytes()?),
            I => Value::I(i64::from_le_bytes(rd.take(8)?.try_into().ok()?)),
            B => Value::B(rd.byte()? != 0),
            _ => return None,
        };
        key_value(r, 6, key, value);
    }
    if let Some((trace, span)) = ids {
        bytes_field(r, 9, trace);
        bytes_field(r, 10, span);
    }
    fixed64(r, 11, now);
    bytes_field(r, 12, b"gatehouse.decision");
    Some(())
}

/// `n` in decimal, without the formatting machinery (this runs on the
/// deciding thread for every decision).
fn push_number(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    for &d in digits.get(i..).unwrap_or_default() {
        out.push(char::from(d));
    }
}

/// The query's attributes.
fn query_attrs(c: &mut Cursor<'_>, text: &mut String, q: &Query, log_commands: bool) {
    let mut kv = |id: u8, v: Value<'_>| attr(c, id, v);
    match q {
        Query::Connect { host, port, via } => {
            kv(key!("server.address"), Value::S(host));
            kv(key!("server.port"), Value::I(*port));
            kv(key!("network.transport"), Value::S("tcp"));
            kv(key!("gatehouse.via"), Value::S(via.as_str()));
        }
        Query::Dns { name } => kv(key!("dns.question.name"), Value::S(name)),
        Query::Resolved { host, addrs, port } => {
            kv(key!("dns.question.name"), Value::S(host));
            text.clear();
            for (i, a) in addrs.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(a);
            }
            kv(key!("dns.answers"), Value::S(text));
            if let Some(p) = port {
                kv(key!("server.port"), Value::I(*p));
            }
        }
        Query::Socket { path } => {
            kv(key!("network.transport"), Value::S("unix"));
            kv(key!("server.address"), Value::S(path));
        }
        Query::Listen { addr } => kv(key!("server.address"), Value::S(addr)),
        Query::Tool { permission } => kv(key!("gatehouse.permission"), Value::S(permission)),
        Query::App { program } => kv(key!("gatehouse.app"), Value::S(program)),
        Query::Mcp { server, tool, .. } => {
            kv(key!("gatehouse.mcp.server"), Value::S(server));
            kv(key!("gen_ai.tool.name"), Value::S(tool));
        }
        Query::Prompt { category } => kv(
            key!("gatehouse.prompt.category"),
            Value::S(category.as_str()),
        ),
        Query::Exec { argv, escalate } => {
            kv(key!("gatehouse.exec.escalate"), Value::B(*escalate));
            if log_commands {
                text.clear();
                for (i, a) in argv.iter().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    text.push_str(a);
                }
                kv(key!("process.command_line"), Value::S(text));
            }
        }
        Query::Write { path, .. } | Query::Read { path, .. } => {
            if log_commands {
                kv(key!("file.path"), Value::S(path));
            }
        }
        Query::Review { action, .. } => {
            kv(
                key!("gatehouse.review.action.kind"),
                Value::S(action.kind()),
            );
            if log_commands {
                let json = serde_json::to_string(action).unwrap_or_default();
                kv(key!("gatehouse.review.action"), Value::S(&json));
            }
        }
        Query::Upstream | Query::WebSearch => {}
    }
}

/// The `Span` of a finished request, into `s.record`: kind SERVER, status
/// ERROR when `error`, in the caller's trace under its span when there is
/// a `parent`, else the root of a trace of its own.
pub(crate) fn span(
    s: &mut Scratch,
    name: &str,
    ids: &crate::SpanIds,
    start: SystemTime,
    error: bool,
    attrs: &[(&'static str, &str)],
) {
    let (start, end) = (nanos(start), nanos(SystemTime::now()));
    s.len = encode(&mut s.buf, |r| {
        span_into(r, name, ids, (start, end), error, attrs)
    });
}

fn span_into(
    r: &mut Cursor<'_>,
    name: &str,
    ids: &crate::SpanIds,
    (start, end): (u64, u64),
    error: bool,
    attrs: &[(&'static str, &str)],
) {
    bytes_field(r, 1, &ids.trace_id);
    bytes_field(r, 2, &ids.span_id);
    if let Some(p) = &ids.parent {
        bytes_field(r, 4, p);
    }
    bytes_field(r, 5, name.as_bytes());
    tag(r, 6, VARINT);
    varint(r, 2); // SPAN_KIND_SERVER
    fixed64(r, 7, start);
    fixed64(r, 8, end);
    for (k, v) in attrs {
        key_value(r, 9, k.as_bytes(), Value::S(v));
    }
    // Status { code = 3 }: OK or ERROR.
    tag(r, 15, 2);
    varint(r, 2);
    tag(r, 3, VARINT);
    varint(r, if error { 2 } else { 1 });
}

/// The same text, shared: policy names repeat on every decision, so each
/// thread keeps the few it has seen.
pub(crate) fn interned(s: &str) -> std::sync::Arc<str> {
    use std::sync::Arc;
    thread_local! {
        static SEEN: RefCell<Vec<Arc<str>>> = const { RefCell::new(Vec::new()) };
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

/// For benchmarks (`benches/benches/otel.rs`): what the sink does with `e`
/// on the deciding thread (its compact form, into this thread's buffer)
/// and, with `and_expand`, what the export then does with it (its OTLP
/// `LogRecord`); the length of the last. Not part of the API.
#[doc(hidden)]
pub fn encode_decision_for_bench(e: &DecisionEvent<'_>, and_expand: bool) -> usize {
    with_scratch(|s| {
        capture(s, e, false, &[]);
        let Some(compact) = s.record() else { return 0 };
        if !and_expand {
            return compact.len();
        }
        thread_local! {
            static OUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        OUT.with(|out| {
            let Ok(mut out) = out.try_borrow_mut() else {
                return 0;
            };
            encode(&mut out, |r| {
                let _ = expand(compact, r);
            })
            .unwrap_or(0)
        })
    })
}

/// Decisions in their compact form, as the deciding threads leave them
/// (for `benches/benches/otel.rs`). Not part of the API.
#[doc(hidden)]
pub struct CapturedForBench {
    compact: Vec<Vec<u8>>,
}

/// The compact forms of `events` (for `benches/benches/otel.rs`). Not
/// part of the API.
#[doc(hidden)]
pub fn capture_for_bench(events: &[DecisionEvent<'_>]) -> CapturedForBench {
    with_scratch(|s| CapturedForBench {
        compact: events
            .iter()
            .filter_map(|e| {
                capture(s, e, false, &[]);
                s.record().map(<[u8]>::to_vec)
            })
            .collect(),
    })
}

/// What the export does with `captured`, as one `ExportLogsServiceRequest`
/// (its length): this crate's way ([`expand`] each record, then the
/// request around them), or, with `sdk`, the way of handing them to
/// `opentelemetry-otlp`'s log exporter — each record built as the SDK's
/// `SdkLogRecord`, then grouped and converted by `opentelemetry-proto`
/// and encoded by prost, as the exporter's gRPC and HTTP clients do
/// before they send (BENCHMARKS.md, "OpenTelemetry export"). Not part of
/// the API.
#[doc(hidden)]
pub fn export_for_bench(captured: &CapturedForBench, sdk: bool) -> usize {
    if sdk {
        return sdk_request(captured).unwrap_or(0);
    }
    let (mut records, mut one) = (Vec::new(), Vec::new());
    for c in &captured.compact {
        let n = encode(&mut one, |r| {
            let _ = expand(c, r);
        });
        if let Some(record) = n.and_then(|n| one.get(..n)) {
            crate::wire::bytes_field(&mut records, 2, record);
        }
    }
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("bench")
        .build();
    let mut out = bytes::BytesMut::new();
    crate::wire::Frame::new(&crate::wire::Resource::from_sdk(&resource))
        .request(&records, &mut out, false);
    out.len()
}

/// The SDK's way for [`export_for_bench`].
fn sdk_request(captured: &CapturedForBench) -> Option<usize> {
    use opentelemetry::logs::{
        AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity,
    };
    use opentelemetry::trace::{SpanId, TraceId};
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::logs::tonic::group_logs_by_resource_and_scope;
    use prost::Message as _;
    let provider = opentelemetry_sdk::logs::SdkLoggerProvider::builder().build();
    let logger = provider.logger("gatehouse");
    let scope = opentelemetry::InstrumentationScope::builder("gatehouse")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let text = |b: &[u8]| AnyValue::String(String::from_utf8_lossy(b).into_owned().into());
    let mut records = Vec::with_capacity(captured.compact.len());
    for compact in &captured.compact {
        let mut rd = Reader(compact);
        let now = rd.u64()?;
        let ids = match rd.byte()? {
            0 => None,
            _ => Some((rd.take(16)?, rd.take(8)?)),
        };
        let mut r = logger.create_log_record();
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(now);
        r.set_timestamp(t);
        r.set_observed_timestamp(t);
        r.set_severity_number(Severity::Info);
        r.set_severity_text("INFO");
        r.set_event_name("gatehouse.decision");
        r.set_body(text(rd.bytes()?));
        while !rd.0.is_empty() {
            let id = rd.byte()?;
            let key = if id == NAMED {
                opentelemetry::Key::new(String::from_utf8_lossy(rd.bytes()?).into_owned())
            } else {
                opentelemetry::Key::from_static_str(KEYS.get(usize::from(id))?)
            };
            let value = match rd.byte()? {
                S => text(rd.bytes()?),
                I => AnyValue::Int(i64::from_le_bytes(rd.take(8)?.try_into().ok()?)),
                B => AnyValue::Boolean(rd.byte()? != 0),
                _ => return None,
            };
            r.add_attribute(key, value);
        }
        if let Some((trace, span)) = ids {
            r.set_trace_context(
                TraceId::from_bytes(trace.try_into().ok()?),
                SpanId::from_bytes(span.try_into().ok()?),
                None,
            );
        }
        records.push(r);
    }
    let pairs: Vec<_> = records.iter().map(|r| (r, &scope)).collect();
    let batch = opentelemetry_sdk::logs::LogBatch::new(&pairs);
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("bench")
        .build();
    let request = ExportLogsServiceRequest {
        resource_logs: group_logs_by_resource_and_scope(
            &batch,
            &ResourceAttributesWithSchema::from(&resource),
        ),
    };
    Some(request.encode_to_vec().len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0u64, 7, 10, 443, 65535, u64::from(u32::MAX), u64::MAX] {
            let mut s = String::from("x");
            super::push_number(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }
}
