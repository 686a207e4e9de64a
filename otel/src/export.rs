//! The background export: every TAKE (or sooner, when the queue fills)
//! takes everything queued; every TICK (or sooner, once there is a full
//! request) encodes the decisions it took as OTLP from their compact form
//! ([`crate::record::expand`]), frames them and the spans into requests of
//! at most BATCH records, and sends them; each record is counted sent, or
//! failed when
//! its export fails or times out. After a failure the next try waits (1 s,
//! doubling to 10 s): meanwhile the queue fills and new records are
//! dropped and counted on the deciding side, with no work there; shutdown
//! tries once more whatever the wait.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use crate::Counts;
use crate::queue::{Pending, Queue};
use crate::send::{Sender, Signal};
use crate::wire::Frame;

/// The most records one request carries.
const BATCH: usize = 2048;
/// The most bytes of records one request carries (one larger record goes
/// alone): collectors refuse gRPC messages over 4 MiB by default.
const MAX_BYTES: usize = 1 << 20;
/// How often what was taken is sent, when it is not a full request sooner.
const TICK: Duration = Duration::from_millis(100);
/// How often the queue is taken when it is not filling up: often enough
/// that the buffers the deciding threads write stay small (within a core's
/// cache), without a wake-up from them.
const TAKE: Duration = Duration::from_millis(20);

/// What the export needs.
pub(crate) struct Export {
    pub(crate) queue: Arc<Queue>,
    pub(crate) wake: Arc<tokio::sync::Notify>,
    pub(crate) sender: Sender,
    pub(crate) frame: Frame,
    pub(crate) counts: Arc<Counts>,
    pub(crate) timeout: Duration,
    pub(crate) latency: Histogram<f64>,
}

pub(crate) async fn export_loop(x: Export) {
    let mut taken = Pending::default();
    // What has been taken and not yet sent: gathered into requests of up
    // to BATCH records, sent at the latest a TICK after the last send.
    let mut out = Pending::default();
    // Each request's bytes, reused (see `Export::send`).
    let mut body = BytesMut::new();
    // The decisions taken, encoded as OTLP (and one record's encoding).
    let (mut expanded, mut one) = (Pending::default(), Vec::new());
    let mut labels: Vec<(Arc<str>, &'static str, [KeyValue; 2])> = Vec::new();
    // Each signal waits after its own failures: a collector that takes
    // logs but not traces keeps getting the decisions.
    let (mut logs_wait, mut traces_wait) = (Backoff::default(), Backoff::default());
    let mut last_send = tokio::time::Instant::now();
    loop {
        // Waiting after a failure, the export sleeps until the next try
        // (shutdown wakes it); idle (nothing taken, nothing queued), a TICK.
        let now = tokio::time::Instant::now();
        let nap = if now < logs_wait.until {
            logs_wait.until - now
        } else if out.len() > 0 || x.queue.len() > 0 {
            TAKE
        } else {
            TICK
        };
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = x.wake.notified() => {}
        }
        x.counts.woken.store(false, Ordering::Relaxed);
        let stopping = x.counts.stopping.load(Ordering::Relaxed);
        let now = tokio::time::Instant::now();
        if !stopping && now < logs_wait.until {
            continue;
        }
        x.queue.take(&mut taken);
        if crate::leave_out::left_out(crate::leave_out::SEND) && !stopping {
            taken.clear();
            continue;
        }
        out.append(&mut taken);
        let due = now >= last_send + TICK;
        if !(stopping || due || out.len() >= BATCH || out.bytes() >= MAX_BYTES) {
            continue;
        }
        last_send = now;
        for (secs, policy, kind) in &out.latency {
            x.latency.record(*secs, label(&mut labels, policy, kind));
        }
        // The decisions' OTLP encoding, from their compact form.
        let unreadable = expand_all(&out.logs, &out.log_ends, &mut expanded, &mut one);
        x.counts.failed.fetch_add(unreadable, Ordering::Relaxed);
        // The decisions first, then the spans, unless the collector did
        // not take the decisions or is refusing spans for now: then the
        // spans count as failed without a try.
        let ok = x
            .send_all(
                &mut body,
                Signal::Logs,
                &expanded.logs,
                &expanded.log_ends,
                true,
            )
            .await;
        let try_spans = ok && (stopping || now >= traces_wait.until);
        let spans_ok = x
            .send_all(
                &mut body,
                Signal::Traces,
                &out.spans,
                &out.span_ends,
                try_spans,
            )
            .await;
        if !out.log_ends.is_empty() {
            x.counts.healthy.store(ok, Ordering::Relaxed);
            logs_wait.after(ok);
        }
        if try_spans && !out.span_ends.is_empty() {
            traces_wait.after(spans_ok);
        }
        out.clear();
        if stopping {
            break;
        }
    }
}

/// The OTLP `LogRecord`s of the compact decision records in `buf` (each a
/// field 2 ending at its place in `ends`), into `into.logs` as field 2 of
/// `ScopeLogs` with their ends; how many could not be read (none: this
/// program wrote them).
fn expand_all(buf: &[u8], ends: &[usize], into: &mut Pending, one: &mut Vec<u8>) -> u64 {
    into.clear();
    let (mut from, mut unreadable) = (0, 0);
    for &end in ends {
        let compact = buf.get(from..end).and_then(crate::wire::field_2_content);
        from = end;
        let mut read = false;
        let n = compact.and_then(|c| {
            crate::wire::encode(one, |r| read = crate::record::expand(c, r).is_some())
        });
        match n.and_then(|n| one.get(..n)) {
            Some(record) if read => {
                crate::wire::bytes_field(&mut into.logs, 2, record);
                into.log_ends.push(into.logs.len());
            }
            _ => unreadable += 1,
        }
    }
    unreadable
}

/// How long a signal waits after failures: 1 s, doubling to 10 s; none
/// after a success.
struct Backoff {
    wait: Duration,
    until: tokio::time::Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            wait: Duration::ZERO,
            until: tokio::time::Instant::now(),
        }
    }
}

impl Backoff {
    fn after(&mut self, ok: bool) {
        if ok {
            self.wait = Duration::ZERO;
        } else {
            self.wait = (self.wait * 2).clamp(Duration::from_secs(1), Duration::from_secs(10));
            self.until = tokio::time::Instant::now() + self.wait;
        }
    }
}

/// The histogram's attributes for `policy` and `kind`, made once.
fn label<'a>(
    labels: &'a mut Vec<(Arc<str>, &'static str, [KeyValue; 2])>,
    policy: &Arc<str>,
    kind: &'static str,
) -> &'a [KeyValue] {
    let i = match labels
        .iter()
        .position(|(p, k, _)| **p == **policy && *k == kind)
    {
        Some(i) => i,
        None => {
            if labels.len() >= 64 {
                labels.clear();
            }
            labels.push((
                policy.clone(),
                kind,
                [
                    KeyValue::new("gatehouse.policy", policy.to_string()),
                    KeyValue::new("gatehouse.query.kind", kind),
                ],
            ));
            labels.len() - 1
        }
    };
    labels.get(i).map_or(&[], |(_, _, a)| a.as_slice())
}

impl Export {
    /// Sends `buf`'s records (ending at `ends`) in requests of at most
    /// BATCH records; whether all arrived. After a failure (or when `go`
    /// is false) the rest are not tried: they count as failed.
    async fn send_all(
        &self,
        body: &mut BytesMut,
        signal: Signal,
        buf: &[u8],
        ends: &[usize],
        go: bool,
    ) -> bool {
        let mut ok = go;
        let (mut from, mut last, mut n) = (0usize, 0usize, 0u64);
        for &end in ends {
            if n > 0 && (n as usize >= BATCH || end - from > MAX_BYTES) {
                ok = self.send(body, signal, buf.get(from..last), n, ok).await;
                (from, n) = (last, 0);
            }
            (last, n) = (end, n + 1);
        }
        if n > 0 {
            ok = self.send(body, signal, buf.get(from..last), n, ok).await;
        }
        ok
    }

    /// One request of `n` records; whether it arrived (false, not tried,
    /// unless `go`). The request is written into `body`, whose allocation
    /// comes back once the transport has let go of what it sent: a steady
    /// export maps no fresh pages per request.
    async fn send(
        &self,
        body: &mut BytesMut,
        signal: Signal,
        records: Option<&[u8]>,
        n: u64,
        go: bool,
    ) -> bool {
        let ok = match records {
            Some(records) if go => {
                self.frame.request(records, body, self.sender.is_grpc());
                let request = body.split().freeze();
                self.sender
                    .send(signal, request, self.timeout)
                    .await
                    .is_ok()
            }
            _ => false,
        };
        let counter = if ok {
            &self.counts.sent
        } else {
            &self.counts.failed
        };
        counter.fetch_add(n, Ordering::Relaxed);
        ok
    }
}
