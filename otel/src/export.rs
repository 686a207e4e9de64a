//! The background export: every TICK (or sooner, when the queue fills)
//! takes everything queued, frames it into requests of at most BATCH
//! records, and sends them; each record is counted sent, or failed when
//! its export fails or times out. After a failure the next try waits (1 s,
//! doubling to 10 s): meanwhile the queue fills and new records are
//! dropped and counted on the deciding side, with no work there; shutdown
//! tries once more whatever the wait.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use crate::Counts;
use crate::queue::{Pending, Queue};
use crate::send::{Sender, Signal};
use crate::wire::Frame;

/// The most records one request carries.
const BATCH: usize = 512;
/// The most bytes of records one request carries (one larger record goes
/// alone): collectors refuse gRPC messages over 4 MiB by default.
const MAX_BYTES: usize = 1 << 20;
/// How often the queue is drained when it is not filling up.
const TICK: Duration = Duration::from_millis(100);

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
    let mut labels: Vec<(Arc<str>, &'static str, [KeyValue; 2])> = Vec::new();
    let mut backoff = Duration::ZERO;
    let mut retry_at = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = x.wake.notified() => {}
        }
        x.counts.woken.store(false, Ordering::Relaxed);
        let stopping = x.counts.stopping.load(Ordering::Relaxed);
        if !stopping && tokio::time::Instant::now() < retry_at {
            continue;
        }
        x.queue.take(&mut taken);
        for (secs, policy, kind) in &taken.latency {
            x.latency.record(*secs, label(&mut labels, policy, kind));
        }
        let spans = x
            .send_all(Signal::Traces, &taken.spans, &taken.span_ends, true)
            .await;
        let logs = x
            .send_all(Signal::Logs, &taken.logs, &taken.log_ends, spans)
            .await;
        let ok = spans && logs;
        if taken.len() > 0 {
            x.counts.healthy.store(ok, Ordering::Relaxed);
        }
        if ok {
            backoff = Duration::ZERO;
        } else {
            backoff = (backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(10));
            retry_at = tokio::time::Instant::now() + backoff;
        }
        if stopping {
            break;
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
    async fn send_all(&self, signal: Signal, buf: &[u8], ends: &[usize], go: bool) -> bool {
        let mut ok = go;
        let (mut from, mut last, mut n) = (0usize, 0usize, 0u64);
        for &end in ends {
            if n > 0 && (n as usize >= BATCH || end - from > MAX_BYTES) {
                ok = self.send(signal, buf.get(from..last), n, ok).await;
                (from, n) = (last, 0);
            }
            (last, n) = (end, n + 1);
        }
        if n > 0 {
            ok = self.send(signal, buf.get(from..last), n, ok).await;
        }
        ok
    }

    /// One request of `n` records; whether it arrived (false, not tried,
    /// unless `go`).
    async fn send(&self, signal: Signal, records: Option<&[u8]>, n: u64, go: bool) -> bool {
        let ok = match records {
            Some(records) if go => {
                let mut body = Vec::new();
                self.frame.request(records, &mut body);
                self.sender.send(signal, body, self.timeout).await.is_ok()
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
