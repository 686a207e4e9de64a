//! Tests of the wire format: what is written is read back with the
//! official types (`opentelemetry-proto`).

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
    assert_eq!(field_2_content(b"\x12\x01ab"), None);
    assert_eq!(field_2_content(b"\x12\x80"), None);
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
