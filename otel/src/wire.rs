//! The OTLP protobuf wire format, written by hand: a decision's
//! `LogRecord` and a request's `Span` are encoded once, on the deciding
//! thread, straight into the bytes the collector gets ([`crate::record`]);
//! the export only frames them (`ExportLogsServiceRequest` /
//! `ExportTraceServiceRequest` around the records) and sends. Field numbers
//! are the official definitions' (`opentelemetry-proto`); `tests` decodes
//! the bytes with `opentelemetry-proto`'s own types, and CI's receiver
//! decodes them with the official Python package.

use std::time::{SystemTime, UNIX_EPOCH};

/// Protobuf wire types.
const LEN: u32 = 2;
pub(crate) const VARINT: u32 = 0;
const I64: u32 = 1;

/// Where encoded bytes go: a `Vec` (growing), or a [`Cursor`] over a
/// buffer sized beforehand.
pub(crate) trait Out {
    fn byte(&mut self, b: u8);
    fn put(&mut self, b: &[u8]);
}

impl Out for Vec<u8> {
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Writes into a slice, its position held apart from the bytes: a `Vec`
/// pushed a byte at a time stores and reloads its length around every
/// byte (the byte, written through a `u8` pointer, may alias it), which
/// was most of a record's encoding time. Past the end it writes nothing
/// and says so ([`Cursor::overflowed`]); the caller grows the buffer and
/// encodes again.
pub(crate) struct Cursor<'a> {
    buf: &'a mut [u8],
    /// The bytes written, or that would have been had they fitted.
    n: usize,
    overflowed: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Cursor {
            buf,
            n: 0,
            overflowed: false,
        }
    }

    /// The bytes written; `Err` with the size the buffer needs when they
    /// did not fit.
    pub(crate) fn written(&self) -> Result<usize, usize> {
        if self.overflowed {
            Err(self.n)
        } else {
            Ok(self.n)
        }
    }
}

impl Out for Cursor<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.n) {
            Some(slot) => *slot = b,
            None => self.overflowed = true,
        }
        self.n += 1;
    }
    #[inline]
    fn put(&mut self, b: &[u8]) {
        match self.buf.get_mut(self.n..self.n + b.len()) {
            Some(dst) => dst.copy_from_slice(b),
            None => self.overflowed = true,
        }
        self.n += b.len();
    }
}

/// Encodes with `f` into `buf` (grown as needed, never shrunk); the
/// encoding's length. `f` must write the same bytes each time it is
/// called: a first pass that did not fit says the size, the second fits.
pub(crate) fn encode(buf: &mut Vec<u8>, mut f: impl FnMut(&mut Cursor<'_>)) -> Option<usize> {
    if buf.len() < 1024 {
        buf.resize(1024, 0);
    }
    for _ in 0..3 {
        let mut c = Cursor::new(buf);
        f(&mut c);
        match c.written() {
            Ok(n) => return Some(n),
            Err(needed) => buf.resize(needed, 0),
        }
    }
    None
}

#[inline(always)]
pub(crate) fn varint<O: Out + ?Sized>(out: &mut O, mut v: u64) {
    while v >= 0x80 {
        out.byte((v as u8) | 0x80);
        v >>= 7;
    }
    out.byte(v as u8);
}

#[inline(always)]
pub(crate) fn tag<O: Out + ?Sized>(out: &mut O, field: u32, wire: u32) {
    varint(out, u64::from((field << 3) | wire));
}

/// A length-delimited field: a string, bytes, or a message's encoding.
#[inline(always)]
pub(crate) fn bytes_field<O: Out + ?Sized>(out: &mut O, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.put(b);
}

/// The content of a length-delimited field 2 (how the queue holds each
/// record); `None` if `field` is not one.
pub(crate) fn field_2_content(field: &[u8]) -> Option<&[u8]> {
    let (&tag, mut rest) = field.split_first()?;
    if u32::from(tag) != (2 << 3 | LEN) {
        return None;
    }
    let mut len = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, r) = rest.split_first()?;
        rest = r;
        len |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return (usize::try_from(len).ok()? == rest.len()).then_some(rest);
        }
    }
    None
}

#[inline(always)]
pub(crate) fn fixed64<O: Out + ?Sized>(out: &mut O, field: u32, v: u64) {
    tag(out, field, I64);
    out.put(&v.to_le_bytes());
}

pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// A length-delimited field's size: tag (field numbers here are < 16),
/// length, content.
fn field_len(content: usize) -> usize {
    1 + varint_len(content as u64) + content
}

/// An attribute's value.
#[derive(Clone, Copy)]
pub(crate) enum Value<'a> {
    S(&'a str),
    /// A string's bytes, written as a string (they came from a `&str`).
    U(&'a [u8]),
    I(i64),
    B(bool),
    D(f64),
}

impl Value<'_> {
    /// The `AnyValue` message's size.
    #[inline(always)]
    fn any_len(&self) -> usize {
        match self {
            Value::S(s) => field_len(s.len()),
            Value::U(b) => field_len(b.len()),
            Value::B(_) => 2,
            Value::I(i) => 1 + varint_len(*i as u64),
            Value::D(_) => 9,
        }
    }

    /// The `AnyValue` message, without a tag of its own.
    #[inline(always)]
    fn write_any<O: Out + ?Sized>(&self, out: &mut O) {
        match self {
            Value::S(s) => bytes_field(out, 1, s.as_bytes()),
            Value::U(b) => bytes_field(out, 1, b),
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
                out.put(&d.to_le_bytes());
            }
        }
    }
}

/// An `AnyValue` as field `field` of the enclosing message.
#[inline(always)]
pub(crate) fn any_value<O: Out + ?Sized>(out: &mut O, field: u32, v: Value<'_>) {
    tag(out, field, LEN);
    varint(out, v.any_len() as u64);
    v.write_any(out);
}

/// A `KeyValue { key = 1, value = 2 }` as field `field` of the enclosing
/// message, its sizes counted rather than encoded twice.
#[inline(always)]
pub(crate) fn key_value<O: Out + ?Sized>(out: &mut O, field: u32, key: &[u8], v: Value<'_>) {
    let any = v.any_len();
    tag(out, field, LEN);
    varint(out, (field_len(key.len()) + field_len(any)) as u64);
    bytes_field(out, 1, key);
    tag(out, 2, LEN);
    varint(out, any as u64);
    v.write_any(out);
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
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

/// The part of every request that does not change: the resource and the
/// instrumentation scope, encoded once.
pub(crate) struct Frame {
    /// `Resource { attributes = 1 }`, as field 1 of `ResourceLogs` /
    /// `ResourceSpans`.
    resource: Vec<u8>,
    /// `InstrumentationScope { name, version }`, as field 1 of `ScopeLogs`
    /// / `ScopeSpans`.
    scope: Vec<u8>,
}

impl Frame {
    pub(crate) fn new(resource: &Resource) -> Self {
        let mut res = Vec::new();
        for (k, v) in &resource.0 {
            let v = match v {
                ResourceValue::S(x) => Value::S(x),
                ResourceValue::I(i) => Value::I(*i),
                ResourceValue::B(b) => Value::B(*b),
                ResourceValue::D(d) => Value::D(*d),
            };
            key_value(&mut res, 1, k.as_bytes(), v);
        }
        let mut resource = Vec::with_capacity(res.len() + 8);
        bytes_field(&mut resource, 1, &res);
        let mut sc = Vec::new();
        bytes_field(&mut sc, 1, b"gatehouse");
        bytes_field(&mut sc, 2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut scope = Vec::with_capacity(sc.len() + 8);
        bytes_field(&mut scope, 1, &sc);
        Frame { resource, scope }
    }

    /// The request (`ExportLogsServiceRequest` or
    /// `ExportTraceServiceRequest`: the same shape, resource → scope →
    /// field 2) around `records`, each already a field 2 of the scope's
    /// message; into `out` (cleared first), one copy of the records. With
    /// `grpc`, behind gRPC's message prefix (not compressed, the length as
    /// four bytes, big-endian): the request body as it goes on the wire.
    pub(crate) fn request(&self, records: &[u8], out: &mut bytes::BytesMut, grpc: bool) {
        use bytes::BufMut as _;
        let scoped = self.scope.len() + records.len();
        let resourced = self.resource.len() + field_len(scoped);
        let len = field_len(resourced);
        let mut head = Vec::with_capacity(16);
        tag(&mut head, 1, LEN);
        varint(&mut head, resourced as u64);
        let mut mid = Vec::with_capacity(16);
        tag(&mut mid, 2, LEN);
        varint(&mut mid, scoped as u64);
        out.clear();
        out.reserve(len + 5);
        if grpc {
            out.put_u8(0);
            out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        }
        out.extend_from_slice(&head);
        out.extend_from_slice(&self.resource);
        out.extend_from_slice(&mid);
        out.extend_from_slice(&self.scope);
        out.extend_from_slice(records);
    }
}

/// A trace id and a span id: random (a xorshift generator seeded once per
/// thread from the clock and the thread), never zero.
pub(crate) fn ids() -> ([u8; 16], [u8; 8]) {
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
    use crate::record;
    use gatehouse::RuleRef;
    use gatehouse::log::{DecisionEvent, ToolDecision};
    use gatehouse::query::{Query, Via};
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as PV;
    use prost::Message as _;

    fn framed(records: &[Vec<u8>]) -> Vec<u8> {
        let resource = Resource(vec![
            ("service.name".into(), ResourceValue::S("proxy".into())),
            ("n".into(), ResourceValue::I(-3)),
            ("b".into(), ResourceValue::B(true)),
            ("d".into(), ResourceValue::D(0.5)),
        ]);
        let mut all = Vec::new();
        for r in records {
            bytes_field(&mut all, 2, r);
        }
        let mut out = bytes::BytesMut::new();
        Frame::new(&resource).request(&all, &mut out, false);
        let mut grpc = bytes::BytesMut::new();
        Frame::new(&resource).request(&all, &mut grpc, true);
        // gRPC's prefix: not compressed, then the message's length.
        assert_eq!(grpc[0], 0);
        assert_eq!(
            u32::from_be_bytes([grpc[1], grpc[2], grpc[3], grpc[4]]) as usize,
            out.len()
        );
        assert_eq!(&grpc[5..], &out[..]);
        out.to_vec()
    }

    #[test]
    fn the_cursor_writes_what_a_vec_would_and_grows_when_short() {
        let long = "x".repeat(3000);
        let write = |o: &mut dyn FnMut(&str, Value<'_>)| {
            o("server.address", Value::S("api.github.com"));
            o("server.port", Value::I(443));
            o("gatehouse.exec.escalate", Value::B(true));
            o("ratio", Value::D(0.25));
            o("process.command_line", Value::S(&long));
        };
        let mut want = Vec::new();
        write(&mut |k, v| key_value(&mut want, 6, k.as_bytes(), v));
        // A buffer too small at first (1 024 bytes): one pass says the
        // size, the next writes it.
        let mut buf = Vec::new();
        let mut passes = 0;
        let n = encode(&mut buf, |c| {
            passes += 1;
            write(&mut |k, v| key_value(c, 6, k.as_bytes(), v));
        });
        assert_eq!(n, Some(want.len()));
        assert_eq!(passes, 2);
        assert_eq!(buf.get(..want.len()), Some(&want[..]));
        // Now large enough: one pass, the old bytes past the end left.
        let mut passes = 0;
        let n = encode(&mut buf, |c| {
            passes += 1;
            key_value(c, 6, b"k", Value::S("v"));
        });
        assert_eq!((n, passes), (Some(10), 1));
        // A writer that never fits gives up rather than looping.
        let mut grow = 0usize;
        let n = encode(&mut Vec::new(), |c| {
            grow += 4096;
            c.put(&vec![0; grow]);
        });
        assert_eq!(n, None);
    }

    #[test]
    fn a_sinks_own_attribute_survives_the_compact_form_and_garbage_is_refused() {
        let q = Query::Connect {
            host: "api.github.com".into(),
            port: 443,
            via: Via::Https,
        };
        let e = DecisionEvent {
            time: String::new(),
            policy: "p",
            revision: "r",
            query: serde_json::Value::Null,
            decision: "allow",
            reason: "allowed_by_rule",
            rule: None,
            tool_decision: None,
            elapsed: std::time::Duration::ZERO,
            masked: &q,
        };
        let mut s = record::Scratch::default();
        let extra = [("gatehouse.sandbox", "sb-1".to_string())];
        record::decision(&mut s, &e, false, &extra);
        let out = framed(&[s.record().expect("encoded").to_vec()]);
        let req = ExportLogsServiceRequest::decode(out.as_slice()).expect("decodes");
        let r = &req.resource_logs[0].scope_logs[0].log_records[0];
        let sandbox = r
            .attributes
            .iter()
            .find(|a| a.key == "gatehouse.sandbox")
            .and_then(|a| a.value.as_ref())
            .and_then(|v| v.value.clone());
        assert_eq!(sandbox, Some(PV::StringValue("sb-1".into())));
        assert_eq!(r.attributes.len(), 10);
        // Every cut of a compact record, and every byte of it changed, is
        // read or refused: never a panic.
        record::capture(&mut s, &e, false, &extra);
        let compact = s.record().expect("captured").to_vec();
        let mut buf = Vec::new();
        for n in 0..compact.len() {
            let _ = encode(&mut buf, |c| {
                let _ = record::expand(&compact[..n], c);
            });
            let mut changed = compact.clone();
            changed[n] ^= 0xa5;
            let _ = encode(&mut buf, |c| {
                let _ = record::expand(&changed, c);
            });
        }
        assert_eq!(field_2_content(b"\x12\x02ab"), Some(&b"ab"[..]));
        assert_eq!(field_2_content(b"\x12\x03ab"), None);
        assert_eq!(field_2_content(b"\x0a\x02ab"), None);
    }

    #[test]
    fn a_request_buffer_is_reused_once_the_sent_bytes_are_dropped() {
        // The export relies on this: one allocation for every request of a
        // steady stream, not fresh pages each time.
        let frame = Frame::new(&Resource(vec![]));
        let records = vec![7u8; 300_000];
        let mut body = bytes::BytesMut::new();
        frame.request(&records, &mut body, true);
        let (first, len) = (body.as_ptr(), body.len());
        let sent = body.split().freeze();
        assert!(body.is_empty());
        drop(sent);
        frame.request(&records, &mut body, true);
        assert_eq!(body.as_ptr(), first);
        // Still held by the transport: a new buffer, the old one untouched.
        let held = body.split().freeze();
        frame.request(&records[..10], &mut body, true);
        assert_ne!(body.as_ptr(), first);
        assert_eq!((held.as_ptr(), held.len()), (first, len));
    }

    #[test]
    fn the_official_types_read_what_is_written() {
        let q = Query::Connect {
            host: "exfil.attacker.example".into(),
            port: 443,
            via: Via::Https,
        };
        let e = DecisionEvent {
            time: String::new(),
            policy: "coding-agent",
            revision: "abc",
            query: serde_json::Value::Null,
            decision: "ask",
            reason: "not_allowed",
            rule: Some(RuleRef {
                file: "p.policy",
                line: 11,
                column: 5,
                source: "ask domain x",
                because: None,
            }),
            tool_decision: Some(ToolDecision {
                decision: "pending",
                source: "user",
            }),
            elapsed: std::time::Duration::from_nanos(300),
            masked: &q,
        };
        let mut s = record::Scratch::default();
        let big = "x".repeat(300);
        record::decision(&mut s, &e, false, &[("gatehouse.sandbox", big.clone())]);
        let one = s.record().expect("encoded").to_vec();
        let ids = crate::SpanIds::new(None).expect("a root");
        crate::in_span(Some(&ids), || {
            record::decision(&mut s, &e, false, &[("gatehouse.sandbox", big.clone())]);
        });
        let out = framed(&[one, s.record().expect("encoded").to_vec()]);
        let req = ExportLogsServiceRequest::decode(out.as_slice()).expect("decodes");
        let rl = &req.resource_logs[0];
        let res = rl.resource.as_ref().expect("resource");
        assert_eq!(res.attributes[0].key, "service.name");
        let rv = |i: usize| {
            res.attributes[i]
                .value
                .as_ref()
                .and_then(|v| v.value.clone())
        };
        assert_eq!(rv(1), Some(PV::IntValue(-3)));
        assert_eq!(rv(2), Some(PV::BoolValue(true)));
        assert_eq!(rv(3), Some(PV::DoubleValue(0.5)));
        let sl = &rl.scope_logs[0];
        let scope = sl.scope.as_ref().expect("scope");
        assert_eq!(scope.name, "gatehouse");
        assert_eq!(scope.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(sl.log_records.len(), 2);
        let r = &sl.log_records[0];
        assert_eq!(r.event_name, "gatehouse.decision");
        assert_eq!(r.severity_number, 9);
        assert_eq!(r.severity_text, "INFO");
        assert!(r.time_unix_nano > 0 && r.observed_time_unix_nano >= r.time_unix_nano);
        assert_eq!(
            r.body.as_ref().and_then(|b| b.value.clone()),
            Some(PV::StringValue(
                "ask connect exfil.attacker.example:443: not_allowed".into()
            ))
        );
        let attr = |k: &str| {
            r.attributes
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| a.value.as_ref())
                .and_then(|v| v.value.clone())
        };
        let s = |v: &str| Some(PV::StringValue(v.into()));
        assert_eq!(attr("gatehouse.rule"), s("p.policy:11:5"));
        assert_eq!(attr("gatehouse.policy"), s("coding-agent"));
        assert_eq!(attr("gatehouse.revision"), s("abc"));
        assert_eq!(attr("gatehouse.decision"), s("ask"));
        assert_eq!(attr("gatehouse.reason"), s("not_allowed"));
        assert_eq!(attr("gatehouse.query.kind"), s("connect"));
        assert_eq!(attr("gatehouse.escalation"), s("user"));
        assert_eq!(attr("gatehouse.tool_decision"), s("pending"));
        assert_eq!(attr("gatehouse.decision_source"), s("user"));
        assert_eq!(attr("gatehouse.sandbox"), s(&big));
        assert_eq!(attr("server.address"), s("exfil.attacker.example"));
        assert_eq!(attr("server.port"), Some(PV::IntValue(443)));
        assert_eq!(attr("network.transport"), s("tcp"));
        assert_eq!(attr("gatehouse.via"), s("https"));
        assert_eq!(r.attributes.len(), 14);
        assert!(
            r.trace_id.is_empty() && r.span_id.is_empty(),
            "outside a span"
        );
        let r2 = &sl.log_records[1];
        assert_eq!(r2.trace_id, ids.trace_id);
        assert_eq!(r2.span_id, ids.span_id);
        assert_eq!(r2.attributes.len(), 14);
    }

    #[test]
    fn commands_are_sent_only_when_asked() {
        let q = Query::Exec {
            argv: vec!["git".into(), "push".into()],
            escalate: true,
        };
        let e = DecisionEvent {
            time: String::new(),
            policy: "p",
            revision: "r",
            query: serde_json::Value::Null,
            decision: "deny",
            reason: "denied",
            rule: None,
            tool_decision: None,
            elapsed: std::time::Duration::ZERO,
            masked: &q,
        };
        for (log_commands, want) in [(false, None), (true, Some("git push"))] {
            let mut s = record::Scratch::default();
            record::decision(&mut s, &e, log_commands, &[]);
            let out = framed(&[s.record().expect("encoded").to_vec()]);
            let req = ExportLogsServiceRequest::decode(out.as_slice()).expect("decodes");
            let r = &req.resource_logs[0].scope_logs[0].log_records[0];
            let line = r
                .attributes
                .iter()
                .find(|a| a.key == "process.command_line")
                .and_then(|a| a.value.as_ref())
                .and_then(|v| v.value.clone());
            assert_eq!(line, want.map(|w| PV::StringValue(w.into())));
            let esc = r
                .attributes
                .iter()
                .find(|a| a.key == "gatehouse.exec.escalate");
            assert_eq!(
                esc.and_then(|a| a.value.as_ref())
                    .and_then(|v| v.value.clone()),
                Some(PV::BoolValue(true))
            );
            assert!(r.attributes.iter().all(|a| a.key != "gatehouse.rule"));
        }
    }

    #[test]
    fn spans_read_back_with_the_official_types() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        let start = SystemTime::now() - std::time::Duration::from_millis(3);
        let mut s = record::Scratch::default();
        let attrs = [("gatehouse.outcome", "refused: not_allowed")];
        let root = crate::SpanIds::new(None).expect("a root");
        record::span(
            &mut s,
            "gatehouse.egress.request",
            &root,
            start,
            true,
            &attrs,
        );
        let a = s.record().expect("encoded").to_vec();
        let parent =
            crate::TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .expect("valid");
        let child = crate::SpanIds::new(Some(&parent)).expect("sampled");
        record::span(
            &mut s,
            "gatehouse.egress.request",
            &child,
            start,
            false,
            &attrs,
        );
        let out = framed(&[a, s.record().expect("encoded").to_vec()]);
        let req = ExportTraceServiceRequest::decode(out.as_slice()).expect("decodes");
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans.len(), 2);
        let s = &spans[0];
        assert_eq!(s.name, "gatehouse.egress.request");
        assert_eq!(s.kind, 2);
        assert!(s.end_time_unix_nano - s.start_time_unix_nano >= 3_000_000);
        assert_eq!(s.status.as_ref().map(|st| st.code), Some(2));
        assert_eq!(spans[1].status.as_ref().map(|st| st.code), Some(1));
        assert_eq!(s.trace_id.len(), 16);
        assert_eq!(s.span_id.len(), 8);
        assert_ne!(
            s.trace_id, spans[1].trace_id,
            "each span a trace of its own"
        );
        assert_eq!(s.attributes[0].key, "gatehouse.outcome");
        assert!(s.parent_span_id.is_empty());
        assert_eq!(spans[1].trace_id, parent.trace_id);
        assert_eq!(spans[1].parent_span_id, parent.span_id);
        assert_ne!(spans[1].span_id, parent.span_id);
    }

    #[test]
    fn json_is_otlp_json() {
        let start = SystemTime::now();
        let mut s = record::Scratch::default();
        let ids = crate::SpanIds::new(None).expect("a root");
        record::span(&mut s, "n", &ids, start, false, &[("k", "v")]);
        let out = framed(&[s.record().expect("encoded").to_vec()]);
        let json = crate::send::to_json(crate::send::Signal::Traces, &out).expect("transcodes");
        let v: serde_json::Value = serde_json::from_slice(&json).expect("json");
        let span = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["name"], "n");
        assert_eq!(
            span["traceId"].as_str().map(str::len),
            Some(32),
            "hex: {span}"
        );
        assert_eq!(span["attributes"][0]["value"]["stringValue"], "v");
        assert!(crate::send::to_json(crate::send::Signal::Logs, b"\xff").is_err());
    }
}
