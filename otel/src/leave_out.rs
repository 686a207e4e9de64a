//! Parts of the export left out, for measuring what each one costs under
//! load (`egress/load/otel_parts.sh`). Only a build with the `experiments`
//! feature reads `GATEHOUSE_OTEL_LEAVE_OUT` (a comma-separated list of the
//! parts below) and says on stderr what it leaves out; in any other build
//! nothing is left out and the variable is never read.

/// The decision counts (the `gatehouse.decisions` metric).
pub(crate) const TALLY: u32 = 1;
/// The decision records: neither captured nor queued.
pub(crate) const LOGS: u32 = 2;
/// Queueing the decision records: each is captured, then dropped.
pub(crate) const QUEUE: u32 = 4;
/// The requests' spans.
pub(crate) const SPANS: u32 = 8;
/// The export: what is queued is taken and dropped, neither encoded nor sent.
pub(crate) const SEND: u32 = 16;
/// A decision record's attributes: only its time, span ids and body are
/// captured.
pub(crate) const ATTRS: u32 = 32;

#[cfg(feature = "experiments")]
const NAMES: [(&str, u32); 6] = [
    ("tally", TALLY),
    ("logs", LOGS),
    ("queue", QUEUE),
    ("spans", SPANS),
    ("send", SEND),
    ("attrs", ATTRS),
];

/// Whether `part` is left out.
#[cfg(feature = "experiments")]
pub(crate) fn left_out(part: u32) -> bool {
    static PARTS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let parts = *PARTS.get_or_init(|| {
        let v = std::env::var("GATEHOUSE_OTEL_LEAVE_OUT").unwrap_or_default();
        let mut parts = 0;
        for name in v.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match NAMES.iter().find(|(n, _)| *n == name) {
                Some((_, bit)) => parts |= bit,
                None => eprintln!(
                    "gatehouse-otel: GATEHOUSE_OTEL_LEAVE_OUT: `{name}` is not a part \
                     (tally, logs, queue, spans, send, attrs)"
                ),
            }
        }
        if parts != 0 {
            eprintln!("gatehouse-otel: an experiments build, leaving out: {v}");
        }
        parts
    });
    parts & part != 0
}

/// Whether `part` is left out: never, in a build without `experiments`.
#[cfg(not(feature = "experiments"))]
#[inline(always)]
pub(crate) fn left_out(_part: u32) -> bool {
    false
}
