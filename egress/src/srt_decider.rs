//! `gatehouse-egress srt-decider --policy FILE`: the external decider of
//! sandbox-runtime's `srt proxy` (npm `@anthropic-ai/sandbox-runtime`),
//! protocol version 1, on stdin (proxy → decider) and stdout (decider →
//! proxy). See docs/integrations/srt.md.
//!
//! Framing: a 4-byte big-endian length, then that many bytes of one UTF-8
//! JSON object whose `t` names the message. The proxy speaks first:
//!
//! ```text
//! proxy   → decider  {"t":"hello","proto":1}
//! decider → proxy    {"t":"hello","proto":1,"allowedDomains":[...],"deniedDomains":[...]}
//! proxy   → decider  {"t":"req","id":N,"method","host","port","hostHeader"?,"sni"?,"path","query"?,"headers"?}
//! decider → proxy    {"t":"verdict","id":N,"action":"allow"}
//!                  | {"t":"verdict","id":N,"action":"deny","status":403|421,"reason":"CODE"}
//! ```
//!
//! The hello's lists are the policy's domain rules as far as
//! sandbox-runtime's list entries can say them
//! ([`gatehouse::export::srt_lists`]): the proxy refuses a host outside
//! them without asking, and asks about every other request, which this
//! decider then decides in full. A `req` is decided as the gatehouse proxy
//! decides a request: the server name (when TLS was terminated) and the
//! `Host` header must name the request's host, or it is refused with 421
//! (`sni_mismatch`, `host_mismatch`); then `connect HOST:PORT via https`
//! (with a server name) or `via http` decides, a refusal being 403 with the
//! reason code.
//!
//! The rules of the protocol are kept on this side too, and anything else
//! from the proxy is a violation that ends the decider (the proxy then
//! refuses every request): a hello that is not exactly `{"t":"hello",
//! "proto":1}`, a frame over 1 MiB or not one strict JSON object (invalid
//! UTF-8, a lone surrogate, a duplicate key, a `null`), an unknown message
//! or field, an optional field sent empty, a header name that is not
//! lower-case or a value with a control character, ids that do not start
//! at 1 or do not strictly increase, and a `body` (this decider never asks
//! for one).

use std::collections::BTreeSet;
use std::io::{Read, Write};

use serde::Deserialize;

use gatehouse::query::Via;

use crate::adapter::same_destination;
use crate::outcome::{Outcome, Refusal};
use crate::policy::Policies;

/// The protocol version spoken.
pub const PROTO: u64 = 1;
/// The largest frame read or written.
pub const MAX_FRAME: usize = 1 << 20;
/// The largest request id (JavaScript's largest safe integer).
pub const MAX_ID: u64 = (1 << 53) - 1;

#[derive(Deserialize)]
#[serde(tag = "t", deny_unknown_fields)]
enum Incoming {
    #[serde(rename = "hello")]
    Hello { proto: u64 },
    #[serde(rename = "req")]
    Req(Req),
    #[serde(rename = "body")]
    Body {
        #[allow(dead_code)]
        id: u64,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Req {
    id: u64,
    method: String,
    host: String,
    port: u16,
    #[serde(rename = "hostHeader")]
    host_header: Option<String>,
    sni: Option<String>,
    path: String,
    query: Option<String>,
    headers: Option<Headers>,
}

/// `{name: [values]}`, its names kept in order and refused when repeated
/// (a map type would keep the last of two silently).
struct Headers(Vec<(String, Vec<String>)>);

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Headers;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of header names to lists of values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Headers, A::Error> {
                let mut seen = BTreeSet::new();
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Vec<String>>()? {
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!("duplicate header `{k}`")));
                    }
                    out.push((k, v));
                }
                Ok(Headers(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Why the link must end.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation(pub String);

fn violation(why: impl Into<String>) -> Violation {
    Violation(why.into())
}

/// A control character (C0, DEL, C1), tab aside.
fn has_control(s: &str) -> bool {
    s.chars()
        .any(|c| c != '\t' && (c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)))
}

/// The whole value, with no `null` anywhere.
fn no_nulls(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => a.iter().all(no_nulls),
        serde_json::Value::Object(o) => o.values().all(no_nulls),
        _ => true,
    }
}

/// One message from a frame's bytes, strictly.
fn parse(frame: &[u8]) -> Result<Incoming, Violation> {
    let value: serde_json::Value =
        serde_json::from_slice(frame).map_err(|e| violation(format!("not JSON: {e}")))?;
    if !value.is_object() {
        return Err(violation("a frame must hold one JSON object"));
    }
    if !no_nulls(&value) {
        return Err(violation("null is not a value of this protocol"));
    }
    // Parsed again from the bytes: a struct sees duplicate keys, which the
    // value above kept one of.
    serde_json::from_slice(frame).map_err(|e| violation(format!("bad message: {e}")))
}

fn check_req(r: &Req) -> Result<(), Violation> {
    let empty = |field: &str, v: &Option<String>| match v {
        Some(s) if s.is_empty() => Err(violation(format!("optional field `{field}` sent empty"))),
        _ => Ok(()),
    };
    empty("hostHeader", &r.host_header)?;
    empty("sni", &r.sni)?;
    empty("query", &r.query)?;
    if let Some(Headers(h)) = &r.headers {
        if h.is_empty() {
            return Err(violation("optional field `headers` sent empty"));
        }
        for (name, values) in h {
            if name.is_empty() || name.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(violation(format!("header name `{name}` is not lower-case")));
            }
            if values.is_empty() || values.iter().any(|v| has_control(v)) {
                return Err(violation(format!(
                    "header `{name}` has no value or a control character"
                )));
            }
        }
    }
    if r.port == 0 {
        return Err(violation("port 0"));
    }
    for (field, v) in [("host", &r.host), ("method", &r.method)] {
        if v.is_empty() || has_control(v) {
            return Err(violation(format!(
                "`{field}` is empty or has a control character"
            )));
        }
    }
    if has_control(&r.path) {
        return Err(violation("`path` has a control character"));
    }
    Ok(())
}

/// What the decider answers one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The request may go ahead.
    Allow,
    /// Refused.
    Deny {
        /// The HTTP status sandbox-runtime answers with.
        status: u16,
        /// The reason code.
        reason: &'static str,
    },
}

/// Decides one request with `policies`: agreement of the server name and
/// the `Host` header with the host first, then the policy.
fn decide(policies: &Policies, r: &Req) -> Answer {
    let mut req = policies.request();
    let what = format!("srt {} {}:{}", r.method, r.host, r.port);
    if let Some(sni) = &r.sni
        && !same_destination(sni, &r.host)
    {
        req.finish(&what, Outcome::Deny(Refusal::SniMismatch));
        return Answer::Deny {
            status: 421,
            reason: "sni_mismatch",
        };
    }
    // Inside a terminated tunnel a `Host` without a port means the
    // tunnel's port, as in the gatehouse proxy; in plain HTTP it means 80.
    let default_port = if r.sni.is_some() { r.port } else { 80 };
    if let Some(h) = &r.host_header {
        let agrees = gatehouse_wire::authority::split_authority(h, default_port)
            .is_some_and(|(hh, hp)| same_destination(&hh, &r.host) && hp == r.port);
        if !agrees {
            req.finish(&what, Outcome::Deny(Refusal::HostMismatch));
            return Answer::Deny {
                status: 421,
                reason: "host_mismatch",
            };
        }
    }
    let via = if r.sni.is_some() {
        Via::Https
    } else {
        Via::Http
    };
    match crate::gate::admit(&mut req, &r.host, r.port, via) {
        Ok(()) => {
            req.finish(&what, Outcome::Allowed);
            Answer::Allow
        }
        Err(refusal) => {
            let reason = refusal.as_str();
            req.finish(&what, Outcome::Deny(refusal));
            Answer::Deny {
                status: 403,
                reason,
            }
        }
    }
}

/// Reads one frame; `None` at the end of the stream between frames.
fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, Violation> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let Some(rest) = len.get_mut(got..) else {
            break;
        };
        match input.read(rest) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(violation("the stream ended inside a frame's length")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(violation(format!("read: {e}"))),
        }
    }
    let n = u32::from_be_bytes(len) as usize;
    if n == 0 || n > MAX_FRAME {
        return Err(violation(format!(
            "a frame of {n} bytes (from 1 to {MAX_FRAME})"
        )));
    }
    let mut frame = vec![0u8; n];
    input
        .read_exact(&mut frame)
        .map_err(|e| violation(format!("the stream ended inside a frame: {e}")))?;
    Ok(Some(frame))
}

fn write_frame(output: &mut impl Write, msg: &serde_json::Value) -> Result<(), Violation> {
    let body = serde_json::to_vec(msg).map_err(|e| violation(format!("encode: {e}")))?;
    if body.len() > MAX_FRAME {
        return Err(violation("an answer over the frame limit"));
    }
    let len = u32::try_from(body.len()).map_err(|_| violation("frame length"))?;
    output
        .write_all(&len.to_be_bytes())
        .and_then(|()| output.write_all(&body))
        .and_then(|()| output.flush())
        .map_err(|e| violation(format!("write: {e}")))
}

/// Serves one link until the proxy closes it (`Ok`) or breaks the
/// protocol (`Err`, after which nothing more is written).
pub fn serve(
    policies: &Policies,
    lists: &gatehouse::export::SrtLists,
    input: &mut impl Read,
    output: &mut impl Write,
) -> Result<(), Violation> {
    match read_frame(input)? {
        None => return Ok(()),
        Some(frame) => match parse(&frame)? {
            Incoming::Hello { proto: PROTO } => {}
            Incoming::Hello { proto } => {
                return Err(violation(format!(
                    "protocol version {proto}; this decider speaks {PROTO}"
                )));
            }
            _ => return Err(violation("the first message must be a hello")),
        },
    }
    write_frame(
        output,
        &serde_json::json!({
            "t": "hello",
            "proto": PROTO,
            "allowedDomains": lists.allowed,
            "deniedDomains": lists.denied,
        }),
    )?;
    let mut last_id = 0u64;
    while let Some(frame) = read_frame(input)? {
        let r = match parse(&frame)? {
            Incoming::Req(r) => r,
            Incoming::Hello { .. } => return Err(violation("a second hello")),
            Incoming::Body { .. } => {
                return Err(violation("a body this decider never asked for"));
            }
        };
        if r.id <= last_id || r.id > MAX_ID {
            return Err(violation(format!(
                "request id {} after {last_id}: ids start at 1 and strictly increase",
                r.id
            )));
        }
        last_id = r.id;
        check_req(&r)?;
        let verdict = match decide(policies, &r) {
            Answer::Allow => serde_json::json!({"t": "verdict", "id": r.id, "action": "allow"}),
            Answer::Deny { status, reason } => serde_json::json!({
                "t": "verdict", "id": r.id, "action": "deny", "status": status, "reason": reason,
            }),
        };
        write_frame(output, &verdict)?;
    }
    Ok(())
}

/// The hello's lists, from the policy in force: its lowered network view
/// (`gatehouse::Policy::network`), the same whether the file held policy
/// text, a compiled artifact or a signed bundle.
pub fn lists(
    source: &crate::adapter::Source,
    set: &gatehouse::PolicySet,
) -> Result<gatehouse::export::SrtLists, ListsError> {
    gatehouse::export::srt_lists(set, source.name.as_deref()).map_err(ListsError)
}

/// Why the hello's lists could not be made from the policy.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ListsError(gatehouse::export::ExportError);

/// `gatehouse-egress srt-decider ...`: the process's exit code.
pub fn run(source: &crate::adapter::Source) -> i32 {
    let policies = match crate::adapter::boot(source, "srt-decider") {
        Ok(p) => p,
        Err(code) => return code,
    };
    let lists = match lists(source, &policies.store.load()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gatehouse-egress srt-decider: {e}");
            return 1;
        }
    };
    for n in &lists.notes {
        eprintln!(
            "gatehouse-egress srt-decider: {}: `{}` is left out of the hello lists: {}",
            n.at, n.rule, n.why
        );
    }
    eprintln!(
        "gatehouse-egress srt-decider: serving (revision {}; {} allowed and {} denied entries)",
        policies.store.load().revision(),
        lists.allowed.len(),
        lists.denied.len()
    );
    let mut input = std::io::stdin().lock();
    let mut output = std::io::BufWriter::new(std::io::stdout().lock());
    match serve(&policies, &lists, &mut input, &mut output) {
        Ok(()) => 0,
        Err(Violation(why)) => {
            eprintln!("gatehouse-egress srt-decider: protocol violation, closing the link: {why}");
            1
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn frame(v: &str) -> Vec<u8> {
        let mut out = (v.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(v.as_bytes());
        out
    }

    fn policies(text: &str) -> Policies {
        crate::testing::policies(&format!("srt-{}", text.len()), text).unwrap()
    }

    const POLICY: &str = "policy p {\n  network {\n    allow domain **.github.com port 443\n    allow domain localhost port 8080\n    deny domain gist.github.com\n  }\n}\n";

    /// The answers to `frames`, and how the link ended.
    fn run(frames: &[&str]) -> (Vec<serde_json::Value>, Result<(), Violation>) {
        let p = policies(POLICY);
        let lists = gatehouse::export::SrtLists {
            allowed: vec!["github.com:443".into()],
            denied: vec![],
            notes: vec![],
        };
        let input: Vec<u8> = frames.iter().flat_map(|f| frame(f)).collect();
        let mut out = Vec::new();
        let end = serve(&p, &lists, &mut input.as_slice(), &mut out);
        let mut answers = Vec::new();
        let mut rest = out.as_slice();
        while rest.len() >= 4 {
            let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            answers.push(serde_json::from_slice(&rest[4..4 + n]).unwrap());
            rest = &rest[4 + n..];
        }
        (answers, end)
    }

    const HELLO: &str = r#"{"t":"hello","proto":1}"#;

    #[test]
    fn hello_then_verdicts() {
        let (a, end) = run(&[
            HELLO,
            r#"{"t":"req","id":1,"method":"GET","host":"api.github.com","port":443,"hostHeader":"api.github.com","sni":"api.github.com","path":"/"}"#,
            r#"{"t":"req","id":2,"method":"GET","host":"gist.github.com","port":443,"sni":"gist.github.com","path":"/"}"#,
            r#"{"t":"req","id":3,"method":"GET","host":"api.github.com","port":443,"sni":"evil.example","path":"/"}"#,
            r#"{"t":"req","id":4,"method":"GET","host":"localhost","port":8080,"hostHeader":"evil.example:8080","path":"/"}"#,
            r#"{"t":"req","id":5,"method":"GET","host":"localhost","port":8080,"hostHeader":"LOCALHOST:8080","path":"/x","query":"a=1","headers":{"accept":["*/*"]}}"#,
            r#"{"t":"req","id":7,"method":"GET","host":"api.github.com","port":80,"path":"/"}"#,
        ]);
        assert_eq!(end, Ok(()));
        assert_eq!(
            a[0],
            serde_json::json!({"t":"hello","proto":1,"allowedDomains":["github.com:443"],"deniedDomains":[]})
        );
        assert_eq!(
            a[1],
            serde_json::json!({"t":"verdict","id":1,"action":"allow"})
        );
        assert_eq!(
            a[2],
            serde_json::json!({"t":"verdict","id":2,"action":"deny","status":403,"reason":"denied_by_rule"})
        );
        assert_eq!(a[3]["reason"], "sni_mismatch");
        assert_eq!(a[3]["status"], 421);
        assert_eq!(a[4]["reason"], "host_mismatch");
        assert_eq!(a[5]["action"], "allow");
        assert_eq!(a[6]["reason"], "not_allowed");
        assert_eq!(a.len(), 7);
    }

    #[test]
    fn violations_end_the_link() {
        let req = |id: u32, extra: &str| {
            format!(
                r#"{{"t":"req","id":{id},"method":"GET","host":"a.example","port":443,"path":"/"{extra}}}"#
            )
        };
        let cases: Vec<Vec<String>> = vec![
            vec![req(1, "")],
            vec![r#"{"t":"hello","proto":2}"#.into()],
            vec![r#"{"t":"hello","proto":1,"x":1}"#.into()],
            vec![r#"{"t":"hello","proto":1,"proto":1}"#.into()],
            vec![HELLO.into(), HELLO.into()],
            vec![HELLO.into(), req(0, "")],
            vec![HELLO.into(), req(2, ""), req(2, "")],
            vec![HELLO.into(), req(1, r#","sni":"""#)],
            vec![HELLO.into(), req(1, r#","sni":null"#)],
            vec![HELLO.into(), req(1, r#","headers":{}"#)],
            vec![HELLO.into(), req(1, r#","headers":{"Accept":["x"]}"#)],
            vec![HELLO.into(), req(1, r#","headers":{"a":["x\u0001"]}"#)],
            vec![HELLO.into(), req(1, r#","headers":{"a":["1"],"a":["2"]}"#)],
            vec![HELLO.into(), req(1, r#","extra":1"#)],
            vec![HELLO.into(), r#"{"t":"body","id":1,"data":"eA=="}"#.into()],
            vec![HELLO.into(), r#"{"t":"req","id":1,"id":2}"#.into()],
            vec![
                HELLO.into(),
                r#"{"t":"req","id":1,"method":"GET","host":"a\ud800","port":443,"path":"/"}"#
                    .into(),
            ],
            vec![HELLO.into(), "[1]".into()],
        ];
        for frames in cases {
            let refs: Vec<&str> = frames.iter().map(String::as_str).collect();
            let (answers, end) = run(&refs);
            assert!(end.is_err(), "{frames:?} was accepted");
            // Nothing is answered to the message that broke the protocol.
            let allowed = answers.iter().filter(|a| a["action"] == "allow").count();
            assert_eq!(allowed, 0, "{frames:?}");
        }
    }

    #[test]
    fn frame_limits() {
        let p = policies(POLICY);
        let lists = gatehouse::export::SrtLists::default();
        let mut input = frame(HELLO);
        input.extend_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        let mut out = Vec::new();
        assert!(serve(&p, &lists, &mut input.as_slice(), &mut out).is_err());
        let mut input = frame(HELLO);
        input.extend_from_slice(&[0, 0]);
        assert!(serve(&p, &lists, &mut input.as_slice(), &mut Vec::new()).is_err());
        // A closed stream before anything: a clean end, nothing written.
        let mut out = Vec::new();
        assert_eq!(serve(&p, &lists, &mut [].as_slice(), &mut out), Ok(()));
        assert!(out.is_empty());
    }
}
