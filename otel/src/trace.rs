//! W3C Trace Context: a caller's `traceparent`, so that the span of a
//! request it made through the proxy sits in the caller's trace; and the
//! sampler that says which requests' spans are recorded.

use crate::settings::SettingsError;

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

/// Which requests' spans are recorded: the OpenTelemetry samplers of
/// `OTEL_TRACES_SAMPLER`. A request that is not sampled makes no span, and
/// its decisions carry no trace ids (every decision is still exported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    /// With a caller's `traceparent`, its sampled flag decides.
    parent_based: bool,
    /// Otherwise (or always, when not parent based).
    root: Root,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    On,
    Off,
    /// Sampled when the trace id's last 8 bytes, big-endian and shifted
    /// right by one, are below this (the ratio times 2^63), as the
    /// OpenTelemetry SDKs compute `TraceIdRatioBased`.
    Below(u64),
}

impl Default for Sampler {
    /// `parentbased_always_on`, the OpenTelemetry default.
    fn default() -> Self {
        Sampler {
            parent_based: true,
            root: Root::On,
        }
    }
}

impl Sampler {
    /// The sampler `name` (`None`: the default) with its argument, the
    /// ratio of the `traceidratio` samplers (default 1).
    pub fn parse(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, SettingsError> {
        let name = name.map(str::trim).unwrap_or("parentbased_always_on");
        let ratio = || -> Result<Root, SettingsError> {
            let r = match arg.map(str::trim) {
                None => 1.0,
                Some(a) => a
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| {
                        SettingsError::Invalid(format!(
                            "traces sampler argument `{a}`: a ratio from 0 to 1 is needed"
                        ))
                    })?,
            };
            // 2^63 · r, exact at both ends (1.0 samples every trace).
            let bound = if r >= 1.0 {
                1u64 << 63
            } else {
                (r * (1u64 << 63) as f64) as u64
            };
            Ok(Root::Below(bound))
        };
        let (parent_based, root) = match name {
            "always_on" => (false, Root::On),
            "always_off" => (false, Root::Off),
            "traceidratio" => (false, ratio()?),
            "parentbased_always_on" => (true, Root::On),
            "parentbased_always_off" => (true, Root::Off),
            "parentbased_traceidratio" => (true, ratio()?),
            other => {
                return Err(SettingsError::Invalid(format!(
                    "traces sampler `{other}` is not known: use parentbased_always_on (the default), \
                     parentbased_always_off, parentbased_traceidratio, always_on, always_off or traceidratio"
                )));
            }
        };
        Ok(Sampler { parent_based, root })
    }

    /// Whether a span in `trace_id` (under `parent`, when a caller gave
    /// one) is recorded.
    pub fn sampled(&self, parent: Option<&TraceParent>, trace_id: &[u8; 16]) -> bool {
        if let (true, Some(p)) = (self.parent_based, parent) {
            return p.sampled;
        }
        match self.root {
            Root::On => true,
            Root::Off => false,
            Root::Below(bound) => {
                let low: [u8; 8] = trace_id
                    .get(8..)
                    .and_then(|b| b.try_into().ok())
                    .unwrap_or([0; 8]);
                (u64::from_be_bytes(low) >> 1) < bound
            }
        }
    }

    /// New ids for a request's span, or `None` when it is not sampled.
    pub fn span_ids(&self, parent: Option<&TraceParent>) -> Option<SpanIds> {
        let (trace, span) = crate::wire::ids();
        let trace_id = parent.map_or(trace, |p| p.trace_id);
        self.sampled(parent, &trace_id).then_some(SpanIds {
            trace_id,
            span_id: span,
            parent: parent.map(|p| p.span_id),
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
    /// (The default sampler's; [`Telemetry::span_ids`](crate::Telemetry::span_ids)
    /// applies the configured one.)
    pub fn new(parent: Option<&TraceParent>) -> Option<SpanIds> {
        Sampler::default().span_ids(parent)
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

    fn parent(sampled: bool) -> TraceParent {
        TraceParent {
            trace_id: [7; 16],
            span_id: [9; 8],
            sampled,
        }
    }

    fn sampler(name: &str, arg: Option<&str>) -> Sampler {
        Sampler::parse(Some(name), arg).expect("a known sampler")
    }

    #[test]
    fn the_default_follows_the_caller_and_records_roots() {
        let s = Sampler::parse(None, None).expect("default");
        assert_eq!(s, Sampler::default());
        assert_eq!(s, sampler("parentbased_always_on", None));
        assert!(s.span_ids(None).is_some());
        let ids = s.span_ids(Some(&parent(true))).expect("sampled caller");
        assert_eq!((ids.trace_id, ids.parent), ([7; 16], Some([9; 8])));
        assert!(s.span_ids(Some(&parent(false))).is_none());
        assert_eq!(SpanIds::new(Some(&parent(false))), None);
    }

    #[test]
    fn each_named_sampler_decides_as_opentelemetry_says() {
        let on = sampler("always_on", None);
        assert!(
            on.span_ids(Some(&parent(false))).is_some(),
            "ignores the caller"
        );
        let off = sampler("always_off", None);
        assert!(off.span_ids(Some(&parent(true))).is_none());
        assert!(off.span_ids(None).is_none());
        let pb_off = sampler("parentbased_always_off", None);
        assert!(pb_off.span_ids(None).is_none());
        assert!(pb_off.span_ids(Some(&parent(true))).is_some());
        // Ratio 0 and 1 are exact; the caller's flag counts only when
        // parent based.
        let none = sampler("traceidratio", Some("0"));
        let all = sampler("traceidratio", Some("1"));
        let pb_none = sampler("parentbased_traceidratio", Some("0"));
        for _ in 0..1000 {
            assert!(none.span_ids(Some(&parent(true))).is_none());
            assert!(all.span_ids(Some(&parent(false))).is_some());
            assert!(pb_none.span_ids(None).is_none());
        }
        assert!(pb_none.span_ids(Some(&parent(true))).is_some());
        assert_eq!(
            sampler("traceidratio", None),
            all,
            "the ratio defaults to 1"
        );
    }

    #[test]
    fn a_ratio_samples_by_the_trace_ids_low_bytes() {
        let half = sampler("traceidratio", Some("0.5"));
        let mut id = [0u8; 16];
        id[8] = 0x7f; // low 8 bytes 0x7f00…: shifted, below 2^62
        assert!(half.sampled(None, &id));
        id[8] = 0x80; // 0x8000… >> 1 = 2^62: not below
        assert!(!half.sampled(None, &id));
        // Over fresh ids, about a quarter at 0.25.
        let quarter = sampler("traceidratio", Some("0.25"));
        let n = (0..20_000)
            .filter(|_| quarter.span_ids(None).is_some())
            .count();
        assert!((4_000..6_000).contains(&n), "{n} of 20000");
    }

    #[test]
    fn an_unknown_sampler_or_a_bad_ratio_is_an_error() {
        for (name, arg) in [
            ("jaeger_remote", None),
            ("AlwaysOn", None),
            ("traceidratio", Some("1.5")),
            ("traceidratio", Some("-0.1")),
            ("parentbased_traceidratio", Some("half")),
            ("traceidratio", Some("NaN")),
        ] {
            assert!(Sampler::parse(Some(name), arg).is_err(), "{name} {arg:?}");
        }
        let e = Sampler::parse(Some("jaeger_remote"), None).expect_err("unknown");
        assert!(e.to_string().contains("parentbased_always_on"), "{e}");
    }
}
