//! What one sandbox's resolver answered: by address, the names it was
//! given as an answer for, until the answer's TTL runs out. A transparent
//! connection whose first bytes name no host (SSH, a database protocol, a
//! server that speaks first) is decided by these names (docs/host.md).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most addresses remembered per sandbox; the soonest to expire goes
/// first when it is full.
pub const MAX_ADDRESSES: usize = 4096;
/// The most names remembered per address (a CDN address serves many).
pub const MAX_NAMES_PER_ADDRESS: usize = 8;
/// The longest an answer is remembered, whatever its TTL.
pub const MAX_TTL: Duration = Duration::from_secs(3600);

/// Address → (name, until), per sandbox.
#[derive(Default)]
pub struct Answered {
    map: Mutex<HashMap<IpAddr, Vec<(String, Instant)>>>,
}

impl Answered {
    /// Records that `name` was answered with `addrs` for `ttl`.
    pub fn record(&self, name: &str, addrs: &[IpAddr], ttl: Duration) {
        let Ok(mut m) = self.map.lock() else {
            return;
        };
        let now = Instant::now();
        let until = now + ttl.min(MAX_TTL);
        let name = crate::resolve::cache::key(name);
        for ip in addrs {
            let ip = super::addr::canonical(*ip);
            if m.len() >= MAX_ADDRESSES && !m.contains_key(&ip) {
                m.retain(|_, names| {
                    names.retain(|(_, u)| *u > now);
                    !names.is_empty()
                });
                if m.len() >= MAX_ADDRESSES {
                    let first = m
                        .iter()
                        .min_by_key(|(_, n)| n.iter().map(|(_, u)| *u).max())
                        .map(|(ip, _)| *ip);
                    if let Some(first) = first {
                        m.remove(&first);
                    }
                }
            }
            let names = m.entry(ip).or_default();
            names.retain(|(n, u)| *u > now && *n != name);
            if names.len() >= MAX_NAMES_PER_ADDRESS {
                names.sort_by_key(|(_, u)| *u);
                names.remove(0);
            }
            names.push((name.clone(), until));
        }
    }

    /// The live names answered with `ip`, the latest answer first.
    pub fn names_for(&self, ip: IpAddr) -> Vec<String> {
        let Ok(m) = self.map.lock() else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut live: Vec<&(String, Instant)> = m
            .get(&super::addr::canonical(ip))
            .map(|n| n.iter().filter(|(_, u)| *u > now).collect())
            .unwrap_or_default();
        live.sort_by_key(|(_, u)| std::cmp::Reverse(*u));
        live.into_iter().map(|(n, _)| n.clone()).collect()
    }

    /// Drops every expired answer (run periodically).
    pub fn evict_expired(&self) {
        if let Ok(mut m) = self.map.lock() {
            let now = Instant::now();
            m.retain(|_, names| {
                names.retain(|(_, u)| *u > now);
                !names.is_empty()
            });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_live_as_long_as_their_answer() {
        let a = Answered::default();
        let ip: IpAddr = "11.0.0.3".parse().unwrap();
        a.record("SSH.test.", &[ip], Duration::from_secs(60));
        a.record("git.test", &[ip], Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(a.names_for(ip), ["ssh.test"]);
        let mapped: IpAddr = "::ffff:11.0.0.3".parse().unwrap();
        assert_eq!(a.names_for(mapped), ["ssh.test"]);
        assert!(a.names_for("11.0.0.4".parse().unwrap()).is_empty());
        a.record("ssh.test", &[ip], Duration::ZERO);
        a.evict_expired();
        assert!(a.names_for(ip).is_empty());
    }

    #[test]
    fn the_table_stays_bounded() {
        let a = Answered::default();
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            a.record("n.test", &[IpAddr::from(i.to_be_bytes())], MAX_TTL);
        }
        assert!(a.map.lock().unwrap().len() <= MAX_ADDRESSES);
        let ip: IpAddr = "11.0.0.9".parse().unwrap();
        for i in 0..20 {
            a.record(&format!("n{i}.test"), &[ip], MAX_TTL);
        }
        assert_eq!(a.names_for(ip).len(), MAX_NAMES_PER_ADDRESS);
    }
}
