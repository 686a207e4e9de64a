//! Idle upstream connections, kept per host and vetted address for reuse.
//!
//! A connection is taken only for an address that the request's own
//! `resolved` check has just accepted, and for the same host name it was
//! opened for: reuse never skips a decision and never carries one host's
//! request on a connection opened for another. A connection the server has
//! closed (or sent unasked bytes on) is dropped when found.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::metrics::Metrics;

/// Idle connections kept per host and address.
pub const MAX_IDLE_PER_KEY: usize = 32;
/// Idle connections kept in all.
pub const MAX_IDLE: usize = 1024;
/// How long an idle connection is kept (below common servers' keep-alive
/// timeouts, nginx's 75 s among them, so that the server rarely closes one
/// first).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Idle connections by address: each with the host name it was opened
/// for (lowercase, no trailing dot) and when it went idle.
type Idle = HashMap<SocketAddr, Vec<(String, TcpStream, Instant)>>;

/// Idle upstream connections, by decided origin, for reuse.
pub struct Pool {
    idle: Mutex<Idle>,
    metrics: Arc<Metrics>,
    /// At most this many idle connections in all.
    cap: usize,
}

fn same(host: &str, kept: &str) -> bool {
    host.trim_end_matches('.').eq_ignore_ascii_case(kept)
}

impl Pool {
    /// A pool of at most `cap` idle connections (and never more than
    /// [`MAX_IDLE`]).
    pub fn new(metrics: Arc<Metrics>, cap: usize) -> Self {
        Pool {
            idle: Mutex::new(HashMap::new()),
            metrics,
            cap: cap.min(MAX_IDLE),
        }
    }

    /// An idle, live connection to `host` at one of `addrs` (in their
    /// order) and `port`.
    pub fn take(&self, host: &str, addrs: &[IpAddr], port: u16) -> Option<(TcpStream, SocketAddr)> {
        let mut idle = self.idle.lock().ok()?;
        for ip in addrs {
            let addr = SocketAddr::new(*ip, port);
            let Some(list) = idle.get_mut(&addr) else {
                continue;
            };
            // The most recently idle first.
            while let Some(i) = list.iter().rposition(|(h, _, _)| same(host, h)) {
                let (_, s, since) = list.swap_remove(i);
                self.metrics.pool_idle.dec();
                if since.elapsed() < IDLE_TIMEOUT && alive(&s) {
                    return Some((s, addr));
                }
            }
            if list.is_empty() {
                idle.remove(&addr);
            }
        }
        None
    }

    /// Keeps `s` for reuse, unless the pool is full.
    pub fn put(&self, host: &str, addr: SocketAddr, s: TcpStream) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        let total: usize = idle.values().map(Vec::len).sum();
        if total >= self.cap {
            // Full: drop what has expired, and keep this one only if that
            // made room.
            idle.retain(|_, list| {
                list.retain(|(_, _, since)| since.elapsed() < IDLE_TIMEOUT);
                !list.is_empty()
            });
            let now: usize = idle.values().map(Vec::len).sum();
            self.metrics.pool_idle.set(now as i64);
            if now >= self.cap {
                return;
            }
        }
        let list = idle.entry(addr).or_default();
        if list.iter().filter(|(h, _, _)| same(host, h)).count() < MAX_IDLE_PER_KEY {
            list.push((
                host.trim_end_matches('.').to_ascii_lowercase(),
                s,
                Instant::now(),
            ));
            self.metrics.pool_idle.inc();
        }
    }
}

/// An idle connection is live when a read would block: no EOF, no error,
/// and no bytes the server sent unasked.
fn alive(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}
