//! OTLP log export without the per-record copies: an
//! `ExportLogsServiceRequest` encoded straight from the queued events into
//! one buffer (the protocol's protobuf wire format, field numbers from the
//! official definitions, `opentelemetry-proto`), sent over OTLP/HTTP with
//! the exporters' HTTP client or over gRPC with tonic. The SDK's record and
//! transform path copies every attribute twice per record; this writes
//! each once. `tests` decodes the bytes with `opentelemetry-proto`'s own
//! types, and CI's receiver decodes them with the official Python package.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::event::{Attr, Event, SpanEvent};

/// Protobuf wire types.
const LEN: u32 = 2;
const VARINT: u32 = 0;
const I64: u32 = 1;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from((field << 3) | wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, I64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A value as an `AnyValue` message (into `scratch`, returned as a slice).
enum Value<'a> {
    S(&'a str),
    I(i64),
    B(bool),
    D(f64),
}

fn any_value(out: &mut Vec<u8>, v: &Value<'_>) {
    match v {
        Value::S(s) => bytes_field(out, 1, s.as_bytes()),
        Value::B(b) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*b));
        }
        Value::I(i) => {
            tag(out, 3, VARINT);
            varint(out, *i as u64);
        }
        Value::D(d) => {
            tag(out, 4, I64);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
}

/// A `KeyValue` as field `field` of the enclosing message.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, v: &Value<'_>, scratch: &mut Vec<u8>) {
    scratch.clear();
    any_value(scratch, v);
    let inner = 1
        + len_of_varint(key.len() as u64)
        + key.len()
        + 1
        + len_of_varint(scratch.len() as u64)
        + scratch.len();
    tag(out, field, LEN);
    varint(out, inner as u64);
    bytes_field(out, 1, key.as_bytes());
    bytes_field(out, 2, scratch);
}

fn len_of_varint(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The resource's attributes, as the request carries them.
pub(crate) struct Resource(pub(crate) Vec<(String, ResourceValue)>);

/// A resource attribute's value.
pub(crate) enum ResourceValue {
    S(String),
    I(i64),
    B(bool),
    D(f64),
}

impl Resource {
    /// From the SDK's resource (strings, numbers and booleans; arrays are
    /// left out).
    pub(crate) fn from_sdk(r: &opentelemetry_sdk::Resource) -> Self {
        use opentelemetry::Value as V;
        Resource(
            r.iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        V::String(s) => ResourceValue::S(s.to_string()),
                        V::I64(i) => ResourceValue::I(*i),
                        V::Bool(b) => ResourceValue::B(*b),
                        V::F64(d) => ResourceValue::D(*d),
                        _ => return None,
                    };
                    Some((k.to_string(), v))
                })
                .collect(),
        )
    }
}

/// Reused buffers for encoding one request after another.
#[derive(Default)]
pub(crate) struct Encoder {
    records: Vec<u8>,
    record: Vec<u8>,
    scratch: Vec<u8>,
    body: String,
}

impl Encoder {
    /// The `ExportLogsServiceRequest` of `events`, into `out`.
    pub(crate) fn request(&mut self, resource: &Resource, events: &[Event], out: &mut Vec<u8>) {
        use std::fmt::Write as _;
        let now = nanos(SystemTime::now());
        self.records.clear();
        for e in events {
            let r = &mut self.record;
            r.clear();
            fixed64(r, 1, nanos(e.time));
            tag(r, 2, VARINT);
            varint(r, 9); // SEVERITY_NUMBER_INFO
            bytes_field(r, 3, b"INFO");
            self.body.clear();
            e.write_body(&mut self.body);
            self.scratch.clear();
            any_value(&mut self.scratch, &Value::S(&self.body));
            bytes_field(r, 5, &self.scratch);
            let s = &mut self.scratch;
            key_value(r, 6, "gatehouse.policy", &Value::S(&e.policy), s);
            key_value(r, 6, "gatehouse.revision", &Value::S(&e.revision), s);
            key_value(r, 6, "gatehouse.decision", &Value::S(e.decision), s);
            key_value(r, 6, "gatehouse.reason", &Value::S(e.reason), s);
            key_value(r, 6, "gatehouse.query.kind", &Value::S(e.kind), s);
            if let Some((file, line, column)) = &e.rule {
                self.body.clear();
                let _ = write!(self.body, "{file}:{line}:{column}");
                key_value(r, 6, "gatehouse.rule", &Value::S(&self.body), s);
            }
            for (key, v) in &e.attrs {
                let v = match v {
                    Attr::S(x) => Value::S(x),
                    Attr::W(x) => Value::S(x),
                    Attr::I(i) => Value::I(*i),
                    Attr::B(b) => Value::B(*b),
                };
                key_value(r, 6, key, &v, s);
            }
            fixed64(r, 11, now);
            bytes_field(r, 12, b"gatehouse.decision");
            bytes_field(&mut self.records, 2, r);
        }
        // InstrumentationScope { name, version }.
        self.scratch.clear();
        bytes_field(&mut self.scratch, 1, b"gatehouse");
        bytes_field(&mut self.scratch, 2, env!("CARGO_PKG_VERSION").as_bytes());
        // ScopeLogs { scope = 1, log_records = 2 }.
        let mut scope_logs = Vec::with_capacity(self.records.len() + 64);
        bytes_field(&mut scope_logs, 1, &self.scratch);
        scope_logs.extend_from_slice(&self.records);
        // Resource { attributes = 1 }.
        let mut res = Vec::new();
        let mut s2 = Vec::new();
        resource_attrs(resource, &mut res, &mut s2);
        // ResourceLogs { resource = 1, scope_logs = 2 }.
        let mut resource_logs = Vec::with_capacity(scope_logs.len() + res.len() + 16);
        bytes_field(&mut resource_logs, 1, &res);
        bytes_field(&mut resource_logs, 2, &scope_logs);
        // ExportLogsServiceRequest { resource_logs = 1 }.
        out.clear();
        bytes_field(out, 1, &resource_logs);
    }

    /// The `ExportTraceServiceRequest` of `spans`, into `out`: each a root
    /// span of a trace of its own (kind SERVER; status ERROR when refused).
    pub(crate) fn spans(&mut self, resource: &Resource, spans: &[SpanEvent], out: &mut Vec<u8>) {
        self.records.clear();
        for sp in spans {
            let r = &mut self.record;
            r.clear();
            let (trace, span) = ids();
            bytes_field(r, 1, &trace);
            bytes_field(r, 2, &span);
            bytes_field(r, 5, sp.name.as_bytes());
            tag(r, 6, VARINT);
            varint(r, 2); // SPAN_KIND_SERVER
            fixed64(r, 7, nanos(sp.start));
            fixed64(r, 8, nanos(sp.end));
            for (key, v) in &sp.attrs {
                let v = match v {
                    Attr::S(x) => Value::S(x),
                    Attr::W(x) => Value::S(x),
                    Attr::I(i) => Value::I(*i),
                    Attr::B(b) => Value::B(*b),
                };
                key_value(r, 9, key, &v, &mut self.scratch);
            }
            // Status { code = 3 }: OK or ERROR.
            self.scratch.clear();
            tag(&mut self.scratch, 3, VARINT);
            varint(&mut self.scratch, if sp.error { 2 } else { 1 });
            bytes_field(r, 15, &self.scratch);
            bytes_field(&mut self.records, 2, r);
        }
        self.scratch.clear();
        bytes_field(&mut self.scratch, 1, b"gatehouse");
        bytes_field(&mut self.scratch, 2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut scope_spans = Vec::with_capacity(self.records.len() + 64);
        bytes_field(&mut scope_spans, 1, &self.scratch);
        scope_spans.extend_from_slice(&self.records);
        let mut res = Vec::new();
        let mut s2 = Vec::new();
        resource_attrs(resource, &mut res, &mut s2);
        let mut resource_spans = Vec::with_capacity(scope_spans.len() + res.len() + 16);
        bytes_field(&mut resource_spans, 1, &res);
        bytes_field(&mut resource_spans, 2, &scope_spans);
        out.clear();
        bytes_field(out, 1, &resource_spans);
    }
}

fn resource_attrs(resource: &Resource, res: &mut Vec<u8>, s2: &mut Vec<u8>) {
    for (k, v) in &resource.0 {
        let v = match v {
            ResourceValue::S(x) => Value::S(x),
            ResourceValue::I(i) => Value::I(*i),
            ResourceValue::B(b) => Value::B(*b),
            ResourceValue::D(d) => Value::D(*d),
        };
        key_value(res, 1, k, &v, s2);
    }
}

/// A trace id and a span id: random (a xorshift generator seeded once per
/// thread from the clock and the thread), never zero.
fn ids() -> ([u8; 16], [u8; 8]) {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = nanos(SystemTime::now());
            let here = &t as *const u64 as u64;
            (t ^ here.rotate_left(32)) | 1
        });
    }
    let next = || {
        STATE.with(|s| {
            let mut x = s.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.set(x);
            x
        })
    };
    let trace = (u128::from(next()) << 64 | u128::from(next())).to_le_bytes();
    (trace, next().to_le_bytes())
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as PV;
    use prost::Message as _;

    #[test]
    fn the_official_types_read_what_is_written() {
        let e = Event {
            time: SystemTime::now(),
            elapsed: std::time::Duration::from_nanos(300),
            policy: "coding-agent".into(),
            revision: "abc".into(),
            decision: "deny",
            reason: "not_allowed",
            kind: "connect",
            target: (Some(0), Some(1), ':'),
            rule: Some(("p.policy".into(), 11, 5)),
            attrs: vec![
                ("server.address", Attr::S("exfil.attacker.example".into())),
                ("server.port", Attr::I(443)),
                ("network.transport", Attr::W("tcp")),
                ("gatehouse.exec.escalate", Attr::B(true)),
                ("big", Attr::S("x".repeat(300))),
            ],
        };
        let resource = Resource(vec![
            ("service.name".into(), ResourceValue::S("proxy".into())),
            ("n".into(), ResourceValue::I(-3)),
        ]);
        let mut out = Vec::new();
        Encoder::default().request(&resource, &[e.clone(), e], &mut out);
        let req = ExportLogsServiceRequest::decode(out.as_slice()).expect("decodes");
        let rl = &req.resource_logs[0];
        let res = rl.resource.as_ref().expect("resource");
        assert_eq!(res.attributes[0].key, "service.name");
        assert_eq!(
            res.attributes[1]
                .value
                .as_ref()
                .and_then(|v| v.value.clone()),
            Some(PV::IntValue(-3))
        );
        let sl = &rl.scope_logs[0];
        assert_eq!(
            sl.scope.as_ref().map(|s| s.name.as_str()),
            Some("gatehouse")
        );
        assert_eq!(sl.log_records.len(), 2);
        let r = &sl.log_records[0];
        assert_eq!(r.event_name, "gatehouse.decision");
        assert_eq!(r.severity_number, 9);
        assert!(r.time_unix_nano > 0 && r.observed_time_unix_nano >= r.time_unix_nano);
        assert_eq!(
            r.body.as_ref().and_then(|b| b.value.clone()),
            Some(PV::StringValue(
                "deny connect exfil.attacker.example:443: not_allowed".into()
            ))
        );
        let attr = |k: &str| {
            r.attributes
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| a.value.as_ref())
                .and_then(|v| v.value.clone())
        };
        assert_eq!(
            attr("gatehouse.rule"),
            Some(PV::StringValue("p.policy:11:5".into()))
        );
        assert_eq!(attr("server.port"), Some(PV::IntValue(443)));
        assert_eq!(attr("gatehouse.exec.escalate"), Some(PV::BoolValue(true)));
        assert_eq!(attr("big"), Some(PV::StringValue("x".repeat(300))));
        assert_eq!(r.attributes.len(), 11);
    }

    #[test]
    fn spans_read_back_with_the_official_types() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        let start = SystemTime::now();
        let sp = SpanEvent {
            name: "gatehouse.egress.request",
            start,
            end: start + std::time::Duration::from_millis(3),
            error: true,
            attrs: vec![("gatehouse.outcome", Attr::S("refused: not_allowed".into()))],
        };
        let mut out = Vec::new();
        Encoder::default().spans(&Resource(Vec::new()), &[sp.clone(), sp], &mut out);
        let req = ExportTraceServiceRequest::decode(out.as_slice()).expect("decodes");
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans.len(), 2);
        let s = &spans[0];
        assert_eq!(s.name, "gatehouse.egress.request");
        assert_eq!(s.kind, 2);
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 3_000_000);
        assert_eq!(s.status.as_ref().map(|st| st.code), Some(2));
        assert_eq!(s.trace_id.len(), 16);
        assert_eq!(s.span_id.len(), 8);
        assert_ne!(
            s.trace_id, spans[1].trace_id,
            "each span a trace of its own"
        );
        assert_eq!(s.attributes[0].key, "gatehouse.outcome");
    }
}
