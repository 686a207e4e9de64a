//! A decision as an OTLP `LogRecord`, a request as an OTLP `Span`: encoded
//! on the deciding thread, once, into the bytes the collector gets. No
//! event is built and handed over (no allocation freed on another thread,
//! nothing copied twice): the export only frames what is queued.

use std::cell::RefCell;
use std::time::SystemTime;

use gatehouse::log::DecisionEvent;
use gatehouse::query::Query;

use crate::wire::{
    Cursor, VARINT, Value, any_value, bytes_field, encode, fixed64, key_value, nanos, tag, varint,
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

/// The `LogRecord` of one decision, into `s.record`. Hosts, ports, names
/// and the decision are always sent; command lines, paths and review
/// actions only with `log_commands` (and then as the policy's masks leave
/// them).
pub(crate) fn decision(
    s: &mut Scratch,
    e: &DecisionEvent<'_>,
    log_commands: bool,
    extra: &[(&'static str, String)],
) {
    let now = nanos(SystemTime::now());
    let Scratch {
        buf,
        len,
        text,
        more,
    } = s;
    *len = encode(buf, |r| {
        decision_into(r, text, more, e, log_commands, extra, now);
    });
}

fn decision_into(
    r: &mut Cursor<'_>,
    body: &mut String,
    more: &mut String,
    e: &DecisionEvent<'_>,
    log_commands: bool,
    extra: &[(&'static str, String)],
    now: u64,
) {
    let q = e.masked;
    fixed64(r, 1, now);
    tag(r, 2, VARINT);
    varint(r, 9); // SEVERITY_NUMBER_INFO
    bytes_field(r, 3, b"INFO");
    // The body: `DECISION KIND [TARGET]: REASON`.
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
    any_value(r, 5, Value::S(body));
    let kv = |r: &mut Cursor<'_>, k: &str, v: Value<'_>| key_value(r, 6, k, v);
    kv(r, "gatehouse.policy", Value::S(e.policy));
    kv(r, "gatehouse.revision", Value::S(e.revision));
    kv(r, "gatehouse.decision", Value::S(e.decision));
    kv(r, "gatehouse.reason", Value::S(e.reason));
    kv(r, "gatehouse.query.kind", Value::S(q.kind()));
    if let Some(rule) = &e.rule {
        body.clear();
        body.push_str(rule.file);
        body.push(':');
        push_number(body, u64::try_from(rule.line).unwrap_or(u64::MAX));
        body.push(':');
        push_number(body, u64::try_from(rule.column).unwrap_or(u64::MAX));
        kv(r, "gatehouse.rule", Value::S(body));
    }
    if let Some(t) = &e.tool_decision {
        kv(r, "gatehouse.tool_decision", Value::S(t.decision));
        kv(r, "gatehouse.decision_source", Value::S(t.source));
    }
    match e.decision {
        "ask" => kv(r, "gatehouse.escalation", Value::S("user")),
        "review" => kv(r, "gatehouse.escalation", Value::S("auto_review")),
        _ => {}
    }
    for (k, v) in extra {
        kv(r, k, Value::S(v));
    }
    query_attrs(r, more, q, log_commands);
    // The request's span, when the decision is made inside one.
    if let Some(ids) = crate::trace::current() {
        bytes_field(r, 9, &ids.trace_id);
        bytes_field(r, 10, &ids.span_id);
    }
    fixed64(r, 11, now);
    bytes_field(r, 12, b"gatehouse.decision");
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
fn query_attrs(r: &mut Cursor<'_>, text: &mut String, q: &Query, log_commands: bool) {
    let mut kv = |k: &str, v: Value<'_>| key_value(r, 6, k, v);
    match q {
        Query::Connect { host, port, via } => {
            kv("server.address", Value::S(host));
            kv("server.port", Value::I(*port));
            kv("network.transport", Value::S("tcp"));
            kv("gatehouse.via", Value::S(via.as_str()));
        }
        Query::Dns { name } => kv("dns.question.name", Value::S(name)),
        Query::Resolved { host, addrs, port } => {
            kv("dns.question.name", Value::S(host));
            text.clear();
            for (i, a) in addrs.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(a);
            }
            kv("dns.answers", Value::S(text));
            if let Some(p) = port {
                kv("server.port", Value::I(*p));
            }
        }
        Query::Socket { path } => {
            kv("network.transport", Value::S("unix"));
            kv("server.address", Value::S(path));
        }
        Query::Listen { addr } => kv("server.address", Value::S(addr)),
        Query::Tool { permission } => kv("gatehouse.permission", Value::S(permission)),
        Query::App { program } => kv("gatehouse.app", Value::S(program)),
        Query::Mcp { server, tool, .. } => {
            kv("gatehouse.mcp.server", Value::S(server));
            kv("gen_ai.tool.name", Value::S(tool));
        }
        Query::Prompt { category } => kv("gatehouse.prompt.category", Value::S(category.as_str())),
        Query::Exec { argv, escalate } => {
            kv("gatehouse.exec.escalate", Value::B(*escalate));
            if log_commands {
                text.clear();
                for (i, a) in argv.iter().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    text.push_str(a);
                }
                kv("process.command_line", Value::S(text));
            }
        }
        Query::Write { path, .. } | Query::Read { path, .. } => {
            if log_commands {
                kv("file.path", Value::S(path));
            }
        }
        Query::Review { action, .. } => {
            kv("gatehouse.review.action.kind", Value::S(action.kind()));
            if log_commands {
                let json = serde_json::to_string(action).unwrap_or_default();
                kv("gatehouse.review.action", Value::S(&json));
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
        key_value(r, 9, k, Value::S(v));
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
