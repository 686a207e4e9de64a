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

/// The most entries (name and record type) kept.
pub const MAX_NAMES: usize = 16_384;
/// The most addresses kept of one answer.
pub const MAX_ADDRS: usize = 32;
/// TTLs are kept within these bounds.
pub const MIN_TTL: Duration = Duration::from_secs(1);
pub const MAX_TTL: Duration = Duration::from_secs(300);

struct Entry {
    addrs: Vec<IpAddr>,
    until: Instant,
}

pub struct Vetted {
    map: Mutex<HashMap<(String, RecordType), Entry>>,
    metrics: Arc<Metrics>,
}

/// The cache key of a name: ASCII lowercase, no trailing dot.
pub fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Vetted {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Vetted {
            map: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Records a vetted answer for `name` and `kind`, replacing any earlier
    /// one. An empty answer removes the entry.
    pub fn record(&self, name: &str, kind: RecordType, addrs: &[IpAddr], ttl: Duration) {
        let Ok(mut m) = self.map.lock() else {
            return;
        };
        let k = (key(name), kind);
        if addrs.is_empty() {
            m.remove(&k);
        } else {
            let now = Instant::now();
            if m.len() >= MAX_NAMES && !m.contains_key(&k) {
                m.retain(|_, e| e.until > now);
                if m.len() >= MAX_NAMES {
                    // Still full of live answers: drop the one that expires
                    // first.
                    if let Some(first) = m
                        .iter()
                        .min_by_key(|(_, e)| e.until)
                        .map(|(k, _)| k.clone())
                    {
                        m.remove(&first);
                    }
                }
            }
            let addrs = addrs.iter().take(MAX_ADDRS).copied().collect();
            m.insert(
                k,
                Entry {
                    addrs,
                    until: now + ttl.clamp(MIN_TTL, MAX_TTL),
                },
            );
        }
        self.metrics.resolver_cache_entries.set(m.len() as i64);
    }

    /// The live vetted addresses of `name`: A then AAAA, each in DNS order;
    /// `None` when neither is cached.
    pub fn get(&self, name: &str) -> Option<Vec<IpAddr>> {
        let m = self.map.lock().ok()?;
        let now = Instant::now();
        let k = key(name);
        let mut out = Vec::new();
        let mut any = false;
        for kind in [RecordType::A, RecordType::AAAA] {
            if let Some(e) = m.get(&(k.clone(), kind)).filter(|e| e.until > now) {
                any = true;
                out.extend(e.addrs.iter().copied());
            }
        }
        any.then_some(out)
    }

    /// Drops every expired entry (run periodically).
    pub fn evict_expired(&self) {
        if let Ok(mut m) = self.map.lock() {
            let now = Instant::now();
            m.retain(|_, e| e.until > now);
            self.metrics.resolver_cache_entries.set(m.len() as i64);
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

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
