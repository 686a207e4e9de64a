//! The table of vetted answers: what the resolver or the proxy's own lookup
//! got from upstream *and* the policy accepted with `resolved`, by name and
//! record type, until the answer's TTL runs out.
//!
//! A fresh answer replaces the old one (never merged with it), so an address
//! DNS has moved away from is not dialled again; addresses keep the order
//! DNS gave them; expired entries are evicted, and the table holds at most
//! [`MAX_NAMES`] entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use crate::metrics::Metrics;

/// The most names kept (each with its A and its AAAA answer).
pub const MAX_NAMES: usize = 16_384;
/// The most addresses kept of one answer.
pub const MAX_ADDRS: usize = 32;
/// TTLs are kept within these bounds.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// The longest a vetted answer is kept, whatever its TTL.
pub const MAX_TTL: Duration = Duration::from_secs(300);

struct Entry {
    addrs: Vec<IpAddr>,
    until: Instant,
}

/// By name: the A answer, then the AAAA answer.
type Answers = [Option<Entry>; 2];

/// The answers the resolver vetted, by name: the addresses the proxy may dial for it.
pub struct Vetted {
    map: Mutex<HashMap<String, Answers>>,
    metrics: Arc<Metrics>,
}

fn slot(kind: RecordType) -> Option<usize> {
    match kind {
        RecordType::A => Some(0),
        RecordType::AAAA => Some(1),
        _ => None,
    }
}

fn live(a: &Answers, now: Instant) -> usize {
    a.iter().flatten().filter(|e| e.until > now).count()
}

/// The cache key of a name: ASCII lowercase, no trailing dot.
pub use gatehouse_wire::dns::key;

impl Vetted {
    /// An empty cache.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Vetted {
            map: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Records a vetted answer for `name` and `kind`, replacing any earlier
    /// one. An empty answer removes it.
    pub fn record(&self, name: &str, kind: RecordType, addrs: &[IpAddr], ttl: Duration) {
        let (Some(i), Ok(mut m)) = (slot(kind), self.map.lock()) else {
            return;
        };
        let k = key(name);
        let now = Instant::now();
        if addrs.is_empty() {
            if let Some(a) = m.get_mut(&k) {
                if let Some(e) = a.get_mut(i) {
                    *e = None;
                }
                if a.iter().all(Option::is_none) {
                    m.remove(&k);
                }
            }
        } else {
            if m.len() >= MAX_NAMES && !m.contains_key(&k) {
                m.retain(|_, a| live(a, now) > 0);
                if m.len() >= MAX_NAMES {
                    // Still full of live answers: drop the name whose
                    // answers expire first.
                    let first = m
                        .iter()
                        .min_by_key(|(_, a)| a.iter().flatten().map(|e| e.until).max())
                        .map(|(k, _)| k.clone());
                    if let Some(first) = first {
                        m.remove(&first);
                    }
                }
            }
            let entry = Entry {
                addrs: addrs.iter().take(MAX_ADDRS).copied().collect(),
                until: now + ttl.clamp(MIN_TTL, MAX_TTL),
            };
            if let Some(e) = m.entry(k).or_default().get_mut(i) {
                *e = Some(entry);
            }
        }
        self.metrics.resolver_cache_entries.set(m.len() as i64);
    }

    /// The live vetted addresses of `name`: A then AAAA, each in DNS order;
    /// `None` when neither is cached.
    pub fn get(&self, name: &str) -> Option<Vec<IpAddr>> {
        // The common name is its own key already: no copy to look it up.
        let k: std::borrow::Cow<'_, str> =
            if name.bytes().any(|c| c.is_ascii_uppercase()) || name.ends_with('.') {
                std::borrow::Cow::Owned(key(name))
            } else {
                std::borrow::Cow::Borrowed(name)
            };
        let m = self.map.lock().ok()?;
        let now = Instant::now();
        let answers = m.get(k.as_ref())?;
        let mut out = Vec::new();
        let mut any = false;
        for e in answers.iter().flatten().filter(|e| e.until > now) {
            any = true;
            out.extend(e.addrs.iter().copied());
        }
        any.then_some(out)
    }

    /// Drops every expired answer (run periodically).
    pub fn evict_expired(&self) {
        if let Ok(mut m) = self.map.lock() {
            let now = Instant::now();
            for a in m.values_mut() {
                for e in a.iter_mut() {
                    if e.as_ref().is_some_and(|e| e.until <= now) {
                        *e = None;
                    }
                }
            }
            m.retain(|_, a| a.iter().any(Option::is_some));
            self.metrics.resolver_cache_entries.set(m.len() as i64);
        }
    }

    /// How many names it holds.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    #[test]
    fn a_fresh_answer_replaces_the_old_one() {
        let v = Vetted::new(Arc::default());
        v.record(
            "A.test.",
            RecordType::A,
            &[ip("10.0.0.1"), ip("192.0.2.1")],
            Duration::from_secs(60),
        );
        assert_eq!(v.get("a.test"), Some(vec![ip("10.0.0.1"), ip("192.0.2.1")]));
        v.record(
            "a.test",
            RecordType::A,
            &[ip("192.0.2.9")],
            Duration::from_secs(60),
        );
        assert_eq!(v.get("a.test"), Some(vec![ip("192.0.2.9")]));
        v.record(
            "a.test",
            RecordType::AAAA,
            &[ip("2001:db8::1")],
            Duration::from_secs(60),
        );
        assert_eq!(
            v.get("a.test"),
            Some(vec![ip("192.0.2.9"), ip("2001:db8::1")])
        );
        v.record("a.test", RecordType::A, &[], Duration::from_secs(60));
        assert_eq!(v.get("a.test"), Some(vec![ip("2001:db8::1")]));
        assert_eq!(v.get("b.test"), None);
    }

    #[test]
    fn the_table_is_capped() {
        let v = Vetted::new(Arc::default());
        for i in 0..MAX_NAMES + 100 {
            v.record(
                &format!("n{i}.test"),
                RecordType::A,
                &[ip("192.0.2.1")],
                Duration::from_secs(60),
            );
        }
        assert_eq!(v.len(), MAX_NAMES);
        let many: Vec<IpAddr> = (0..100u8).map(|i| IpAddr::from([192, 0, 2, i])).collect();
        v.record("many.test", RecordType::A, &many, Duration::from_secs(60));
        assert_eq!(v.get("many.test").map(|a| a.len()), Some(MAX_ADDRS));
    }
}
