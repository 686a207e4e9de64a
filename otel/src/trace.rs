//! W3C Trace Context: a caller's `traceparent`, so that the span of a
//! request it made through the proxy sits in the caller's trace.

/// A caller's trace and span, from its `traceparent` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace the request belongs to.
    pub trace_id: [u8; 16],
    /// The caller's span: the parent of the proxy's.
    pub span_id: [u8; 8],
    /// Whether the caller records this trace. A span under a caller that
    /// does not is not recorded either (the OpenTelemetry default,
    /// `parentbased_always_on`).
    pub sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` value: `VERSION-TRACEID-SPANID-FLAGS`, lower
    /// case hex, ids not all zero. Version `00` is exactly that; a later
    /// version is read by the same first four fields (and may go on after
    /// a `-`), as the recommendation says; `ff` is invalid. Anything else
    /// (the header may come from a compromised agent) is `None`: the span
    /// is then a trace of its own.
    pub fn parse(v: &str) -> Option<TraceParent> {
        let v = v.trim_matches([' ', '\t']);
        let b = v.as_bytes();
        let head = b.get(..55)?;
        let version = hex::<1>(head.get(0..2)?)?;
        let [version] = version;
        if version == 0xff
            || (version == 0 && b.len() != 55)
            || (b.len() > 55 && b.get(55) != Some(&b'-'))
        {
            return None;
        }
        if head.get(2) != Some(&b'-') || head.get(35) != Some(&b'-') || head.get(52) != Some(&b'-')
        {
            return None;
        }
        let trace_id = hex::<16>(head.get(3..35)?)?;
        let span_id = hex::<8>(head.get(36..52)?)?;
        let [flags] = hex::<1>(head.get(53..55)?)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// A span's ids, made when its request begins: the decisions made while
/// it is current ([`in_span`]) carry them, so that a collector joins each
/// decision to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanIds {
    /// The trace: the caller's, or one of its own.
    pub trace_id: [u8; 16],
    /// The span's own id.
    pub span_id: [u8; 8],
    /// The caller's span, when there is one.
    pub parent: Option<[u8; 8]>,
}

impl SpanIds {
    /// New ids: in `parent`'s trace under its span, or a trace of their
    /// own. `None` when the parent does not sample the trace (no span is
    /// recorded, and decisions carry no ids).
    pub fn new(parent: Option<&TraceParent>) -> Option<SpanIds> {
        let (trace, span) = crate::wire::ids();
        match parent {
            Some(p) if !p.sampled => None,
            Some(p) => Some(SpanIds {
                trace_id: p.trace_id,
                span_id: span,
                parent: Some(p.span_id),
            }),
            None => Some(SpanIds {
                trace_id: trace,
                span_id: span,
                parent: None,
            }),
        }
    }
}

thread_local! {
    static CURRENT: std::cell::Cell<Option<SpanIds>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with `ids` as this thread's current span: the decision records
/// made inside carry its trace and span ids.
pub fn in_span<R>(ids: Option<&SpanIds>, f: impl FnOnce() -> R) -> R {
    let before = CURRENT.with(|c| c.replace(ids.copied()));
    let r = f();
    CURRENT.with(|c| c.set(before));
    r
}

/// This thread's current span.
pub(crate) fn current() -> Option<SpanIds> {
    CURRENT.with(std::cell::Cell::get)
}

/// `N` bytes from `2N` lower-case hex digits.
fn hex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let [hi, lo] = pair else { return None };
        *o = digit(*hi)? << 4 | digit(*lo)?;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_example_is_read() {
        let t = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(t.trace_id[0], 0x4b);
        assert_eq!(t.trace_id[15], 0x36);
        assert_eq!(t.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(t.sampled);
        let t = TraceParent::parse(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ")
            .expect("valid, spaces around");
        assert!(!t.sampled);
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later")
                .is_some(),
            "a later version, read by its first fields"
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u{e9}",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }
}
