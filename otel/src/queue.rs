//! The bounded queue between the deciding threads and the export: encoded
//! records appended to one buffer under a lock held for a copy, taken by
//! the export all at once by swapping buffers (whose capacity is kept, so
//! a steady stream allocates nothing).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What a record is.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// A decision's `LogRecord`, with its latency for the histogram.
    Log,
    /// A request's `Span`.
    Span,
}

/// Records waiting for the export.
#[derive(Default)]
pub(crate) struct Pending {
    /// `LogRecord`s, each as field 2 of `ScopeLogs` (tag, length, bytes).
    pub(crate) logs: Vec<u8>,
    /// Where each record in `logs` ends.
    pub(crate) log_ends: Vec<usize>,
    /// `Span`s, each as field 2 of `ScopeSpans`.
    pub(crate) spans: Vec<u8>,
    /// Where each record in `spans` ends.
    pub(crate) span_ends: Vec<usize>,
    /// Each decision's latency in seconds, policy and query kind.
    pub(crate) latency: Vec<(f64, Arc<str>, &'static str)>,
}

impl Pending {
    pub(crate) fn len(&self) -> usize {
        self.log_ends.len() + self.span_ends.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.logs.len() + self.spans.len()
    }

    /// Moves `other`'s records to the end of these (leaving `other` empty,
    /// its capacity kept).
    pub(crate) fn append(&mut self, other: &mut Pending) {
        if self.len() == 0 {
            std::mem::swap(self, other);
            other.clear();
            return;
        }
        let (l, s) = (self.logs.len(), self.spans.len());
        self.logs.extend_from_slice(&other.logs);
        self.log_ends.extend(other.log_ends.iter().map(|e| e + l));
        self.spans.extend_from_slice(&other.spans);
        self.span_ends.extend(other.span_ends.iter().map(|e| e + s));
        self.latency.append(&mut other.latency);
        other.clear();
    }

    pub(crate) fn clear(&mut self) {
        self.logs.clear();
        self.log_ends.clear();
        self.spans.clear();
        self.span_ends.clear();
        self.latency.clear();
    }
}

/// The queue: at most `cap` records (logs and spans together).
pub(crate) struct Queue {
    pending: Mutex<Pending>,
    cap: usize,
    /// `pending.len()`, readable without the lock: a full queue is seen
    /// before anything is encoded.
    len: AtomicUsize,
    /// Signalled when the export takes what is pending.
    taken: Condvar,
}

/// Why a record was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Full,
}

impl Queue {
    pub(crate) fn new(cap: usize) -> Self {
        Queue {
            pending: Mutex::new(Pending::default()),
            cap: cap.max(1),
            len: AtomicUsize::new(0),
            taken: Condvar::new(),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Records pending now (a snapshot).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.cap
    }

    /// Appends `record` (a message's encoding) as field 2 of its scope's
    /// message. With the queue full: refused, or — when `wait` says so,
    /// asked again each time — waits for the export to take what is
    /// pending. A poisoned lock refuses (the event is counted as dropped).
    pub(crate) fn push(
        &self,
        kind: Kind,
        record: &[u8],
        latency: Option<(f64, Arc<str>, &'static str)>,
        wait: impl Fn() -> bool,
    ) -> Result<(), Refused> {
        let Ok(mut p) = self.pending.lock() else {
            return Err(Refused::Full);
        };
        while p.len() >= self.cap {
            if !wait() {
                return Err(Refused::Full);
            }
            match self.taken.wait_timeout(p, Duration::from_millis(100)) {
                Ok((g, _)) => p = g,
                Err(_) => return Err(Refused::Full),
            }
        }
        let p = &mut *p;
        let (buf, ends) = match kind {
            Kind::Log => (&mut p.logs, &mut p.log_ends),
            Kind::Span => (&mut p.spans, &mut p.span_ends),
        };
        crate::wire::bytes_field(buf, 2, record);
        let end = buf.len();
        ends.push(end);
        if let Some(l) = latency {
            p.latency.push(l);
        }
        self.len.store(p.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Takes everything pending into `into` (cleared first), leaving
    /// `into`'s old buffers in the queue.
    pub(crate) fn take(&self, into: &mut Pending) {
        into.clear();
        if let Ok(mut p) = self.pending.lock() {
            std::mem::swap(&mut *p, into);
            self.len.store(0, Ordering::Relaxed);
        }
        self.taken.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn full_refuses_and_take_empties() {
        let q = Queue::new(2);
        assert!(q.push(Kind::Log, b"a", None, || false).is_ok());
        assert!(q.push(Kind::Span, b"bc", None, || false).is_ok());
        assert!(q.is_full());
        assert_eq!(q.push(Kind::Log, b"d", None, || false), Err(Refused::Full));
        let mut p = Pending::default();
        q.take(&mut p);
        assert_eq!(q.len(), 0);
        assert_eq!(p.logs, b"\x12\x01a");
        assert_eq!(p.log_ends, vec![3]);
        assert_eq!(p.spans, b"\x12\x02bc");
        assert!(q.push(Kind::Log, b"e", None, || false).is_ok());
        let mut more = Pending::default();
        q.take(&mut more);
        p.append(&mut more);
        assert_eq!(p.logs, b"\x12\x01a\x12\x01e");
        assert_eq!(p.log_ends, vec![3, 6]);
        assert_eq!(p.bytes(), 10);
        assert_eq!(more.len(), 0);
    }

    #[test]
    fn a_waiting_push_goes_in_once_the_export_takes() {
        let q = Arc::new(Queue::new(1));
        assert!(q.push(Kind::Log, b"a", None, || false).is_ok());
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.push(Kind::Log, b"b", None, || true));
        std::thread::sleep(Duration::from_millis(50));
        let mut p = Pending::default();
        q.take(&mut p);
        assert_eq!(t.join().expect("joins"), Ok(()));
        q.take(&mut p);
        assert_eq!(p.logs, b"\x12\x01b");
    }
}
