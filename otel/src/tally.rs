//! Decision counts by policy, outcome, reason and query kind: atomics in a
//! table read-locked on the deciding thread (a write lock only the first
//! time a combination is seen), read when metrics are collected.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

type Key = (&'static str, &'static str, &'static str);

/// The table.
#[derive(Default)]
pub(crate) struct Tally {
    by_policy: RwLock<HashMap<Box<str>, HashMap<Key, AtomicU64>>>,
}

impl Tally {
    /// Counts one decision.
    pub(crate) fn add(
        &self,
        policy: &str,
        decision: &'static str,
        reason: &'static str,
        kind: &'static str,
    ) {
        let key = (decision, reason, kind);
        if let Ok(t) = self.by_policy.read()
            && let Some(n) = t.get(policy).and_then(|p| p.get(&key))
        {
            n.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Ok(mut t) = self.by_policy.write() {
            t.entry(policy.into())
                .or_default()
                .entry(key)
                .or_default()
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every count.
    pub(crate) fn each(
        &self,
        mut f: impl FnMut(&str, &'static str, &'static str, &'static str, u64),
    ) {
        if let Ok(t) = self.by_policy.read() {
            for (policy, counts) in t.iter() {
                for ((d, r, k), n) in counts {
                    f(policy, d, r, k, n.load(Ordering::Relaxed));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_combination() {
        let t = Tally::default();
        for _ in 0..3 {
            t.add("p", "allow", "allowed_by_rule", "connect");
        }
        t.add("p", "deny", "not_allowed", "dns");
        t.add("q", "deny", "not_allowed", "dns");
        let mut seen = Vec::new();
        t.each(|p, d, r, k, n| seen.push((p.to_string(), d, r, k, n)));
        seen.sort();
        assert_eq!(
            seen,
            vec![
                ("p".into(), "allow", "allowed_by_rule", "connect", 3),
                ("p".into(), "deny", "not_allowed", "dns", 1),
                ("q".into(), "deny", "not_allowed", "dns", 1),
            ]
        );
    }
}
