//! The DNS-fed kernel passes in force, and their revocation (issue 52).
//!
//! The daemon, not the kernel, is the record of what it passed: every
//! element it put in `pass_v4`/`pass_v6` is kept here with its sandbox and
//! the name it was answered for. That record makes three guarantees
//! (docs/host.md, "Passes, established flows and revocation"):
//!
//! - **A pass enters only under the policy in force.** A granted pass is
//!   checked again against the sandbox's policy when the writer applies
//!   it, under the same lock a revision takes, so an answer given just
//!   before a policy change never lands after it.
//! - **A change in force revokes exactly what it no longer allows.** After
//!   every change (a policy file edited, `PUT …/policy`, a Zoo call, a
//!   table edit, `DELETE`, a restart), every recorded pass is decided again
//!   with its sandbox's policy now in force; those it denies, and every
//!   pass of a sandbox that left or lost the address, are deleted from the
//!   sets, and the kernel-passed flows that no recorded, still-allowed pass
//!   covers are deleted from conntrack, in the same step. Other sandboxes'
//!   passes are untouched.
//! - **An established kernel-passed flow lives as long as the policy
//!   allows it,** not as long as the DNS answer: the forward chain accepts
//!   an established flow marked [`PASS_MARK`] (set when its first packet
//!   matched a pass), and only a revision ends it — by deleting its
//!   conntrack entry, after which its next packet is a new flow that no
//!   pass admits.
//!
//! Each sandbox holds at most [`MAX_PER_SANDBOX`] passes; past that the
//! oldest leaves the set first (evicting a pass only takes something away).
//!
//! The record is kept in the state directory (`passes.json`) across
//! restarts: a restarted daemon decides every recorded pass again with the
//! restored policies, keeps the established flows they still allow, and
//! cuts the rest (a flow no record covers is cut).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use super::nft::{self, Pass};
use super::table::{Sandbox, SandboxTable};
use crate::policy::stderr_line;

pub use super::nft::PASS_MARK;
/// The most passes one sandbox holds in the kernel's sets.
pub const MAX_PER_SANDBOX: usize = 4096;
/// How long a pass is remembered after its answer expired, so that a flow
/// it admitted is judged by its name at the next revision.
const REMEMBER: Duration = Duration::from_secs(24 * 3600);

/// One answer's passes, as the resolver hands them over.
pub struct Grant {
    /// The sandbox's id.
    pub sandbox: String,
    /// The name answered.
    pub name: String,
    /// The elements.
    pub passes: Vec<Pass>,
}

/// (source, destination, port): one element of the sets.
type Key = (IpAddr, IpAddr, u16);

struct Granted {
    sandbox: String,
    name: String,
    /// When the kernel's element times out.
    expires: Instant,
    /// Order of entry, for eviction.
    seq: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Granted>,
    /// Each sandbox's keys in order of entry; a pair whose key was renewed
    /// or removed since is stale and skipped.
    order: HashMap<String, VecDeque<(u64, Key)>>,
    /// Each sandbox's number of entries.
    live: HashMap<String, usize>,
    seq: u64,
}

impl Inner {
    fn count(&self, sandbox: &str) -> usize {
        self.live.get(sandbox).copied().unwrap_or(0)
    }

    fn counted(&mut self, sandbox: &str, up: bool) {
        let n = self.live.entry(sandbox.to_string()).or_default();
        *n = if up { *n + 1 } else { n.saturating_sub(1) };
    }

    /// Records `key`; returns the keys evicted to keep the bound.
    fn record(&mut self, key: Key, sandbox: &str, name: &str, expires: Instant) -> Vec<Key> {
        self.seq += 1;
        let seq = self.seq;
        let before = self.entries.insert(
            key,
            Granted {
                sandbox: sandbox.to_string(),
                name: name.to_string(),
                expires,
                seq,
            },
        );
        match before {
            Some(b) if b.sandbox == sandbox => {}
            Some(b) => {
                self.counted(&b.sandbox, false);
                self.counted(sandbox, true);
            }
            None => self.counted(sandbox, true),
        }
        let mut order = self.order.remove(sandbox).unwrap_or_default();
        order.push_back((seq, key));
        let mut evicted = Vec::new();
        while self.count(sandbox) > MAX_PER_SANDBOX {
            let Some((s, k)) = order.pop_front() else {
                break;
            };
            if self.entries.get(&k).is_some_and(|g| g.seq == s) {
                self.entries.remove(&k);
                self.counted(sandbox, false);
                evicted.push(k);
            }
        }
        if order.len() > 2 * MAX_PER_SANDBOX {
            let entries = &self.entries;
            order.retain(|(s, k)| entries.get(k).is_some_and(|g| g.seq == *s));
        }
        self.order.insert(sandbox.to_string(), order);
        evicted
    }
}

/// One recorded pass as the record file keeps it across restarts.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    sandbox: String,
    name: String,
    source: IpAddr,
    addr: IpAddr,
    port: u16,
    /// When its answer expires, in seconds since the epoch.
    expires: u64,
}

/// The passes in force (see the module's documentation).
pub struct Registry {
    inner: Mutex<Inner>,
    table: Arc<ArcSwap<SandboxTable>>,
    /// Where the record is kept across restarts (the state directory), so
    /// that a restarted daemon keeps the flows its restored policies still
    /// allow; `None`: not kept.
    file: Option<std::path::PathBuf>,
    /// When the record was last written (it is written at most once a
    /// second while answers arrive, and after every revision).
    written: Mutex<Option<Instant>>,
    /// Whether `conntrack` runs here: without it flows are not kept past
    /// their answer (the ruleset has no established rule), so there is
    /// nothing to cut.
    pub conntrack: bool,
}

/// Whether `conntrack` can be run.
pub fn conntrack_available() -> bool {
    Command::new("conntrack")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the sandbox `id` of `table` owns `key`'s source and its policy
/// in force passes `key`'s port for `name` at `key`'s address.
fn allowed(table: &SandboxTable, id: &str, name: &str, key: Key) -> bool {
    let Some(s) = table.get(id) else {
        return false;
    };
    if !s.addresses.contains(&key.0) {
        return false;
    }
    let set = s.policies().store.load();
    let Ok(policy) = set.select(s.policies().name.as_deref()) else {
        return false;
    };
    super::ports::ports_for(policy, name, &[key.1]).contains(&key.2)
}

impl Registry {
    /// A record over the table in force, read back from `file` (what a
    /// previous daemon recorded) when there is one.
    pub fn new(
        table: Arc<ArcSwap<SandboxTable>>,
        conntrack: bool,
        file: Option<std::path::PathBuf>,
    ) -> Registry {
        let mut inner = Inner::default();
        if let Some(saved) = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| serde_json::from_slice::<Vec<Saved>>(&b).ok())
        {
            let (now, wall) = (Instant::now(), unix_now());
            for s in saved.into_iter().take(MAX_PER_SANDBOX * 1024) {
                let expires = if s.expires >= wall {
                    now + Duration::from_secs(s.expires - wall)
                } else {
                    now.checked_sub(Duration::from_secs(wall - s.expires))
                        .unwrap_or(now)
                };
                let _ = inner.record((s.source, s.addr, s.port), &s.sandbox, &s.name, expires);
            }
        }
        Registry {
            inner: Mutex::new(inner),
            table,
            conntrack,
            file,
            written: Mutex::new(None),
        }
    }

    /// Writes the record (whole: a temporary file, then a rename), at most
    /// once a second unless `now`.
    fn save(&self, inner: &Inner, now: bool) {
        let Some(file) = &self.file else {
            return;
        };
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        if !now && written.is_some_and(|w| w.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *written = Some(Instant::now());
        let (at, wall) = (Instant::now(), unix_now());
        let saved: Vec<Saved> = inner
            .entries
            .iter()
            .map(|(k, g)| Saved {
                sandbox: g.sandbox.clone(),
                name: g.name.clone(),
                source: k.0,
                addr: k.1,
                port: k.2,
                expires: if g.expires >= at {
                    wall + g.expires.duration_since(at).as_secs()
                } else {
                    wall.saturating_sub(at.duration_since(g.expires).as_secs())
                },
            })
            .collect();
        let Ok(bytes) = serde_json::to_vec(&saved) else {
            return;
        };
        let tmp = file.with_extension("tmp");
        let write = |tmp: &std::path::Path| {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let _ = std::fs::remove_file(tmp);
            // The daemon's own record: readable by its owner only.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(tmp)?
                .write_all(&bytes)
        };
        let done = std::fs::create_dir_all(file.parent().unwrap_or(std::path::Path::new(".")))
            .and_then(|()| write(&tmp))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = done {
            stderr_line(format!(
                "gatehouse-egress: the record of kernel passes was not written to {} ({e}); after a restart every kernel-passed flow is cut",
                file.display()
            ));
        }
    }

    /// Puts what the policies in force still allow of `grants` in the sets
    /// (one transaction), evicting the oldest past the bound.
    pub fn grant(&self, grants: Vec<Grant>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let table = self.table.load();
        let now = Instant::now();
        let mut add = Vec::new();
        let mut evicted = Vec::new();
        // One decision per (sandbox, name, address, port) in a batch.
        let mut decided: HashMap<(String, String, Key), bool> = HashMap::new();
        // A pass not recorded before is written to the record file at once
        // (a restart must find it); a renewal waits for the next write.
        let mut fresh = false;
        for g in grants {
            for p in g.passes {
                let key = (p.source, p.addr, p.port);
                let ok = *decided
                    .entry((g.sandbox.clone(), g.name.clone(), key))
                    .or_insert_with(|| allowed(&table, &g.sandbox, &g.name, key));
                if !ok {
                    continue;
                }
                let expires = now + Duration::from_secs(u64::from(p.ttl));
                fresh |= !inner.entries.contains_key(&key);
                evicted.extend(inner.record(key, &g.sandbox, &g.name, expires));
                add.push(p);
            }
        }
        evicted.retain(|k| !add.iter().any(|p| (p.source, p.addr, p.port) == *k));
        if add.is_empty() && evicted.is_empty() {
            return;
        }
        self.save(&inner, fresh);
        if let Err(e) = nft::apply(&nft::join(nft::revoke(&evicted), nft::passes_batch(&add))) {
            stderr_line(format!(
                "gatehouse-egress: kernel passes not written ({e}); the transparent listener decides those connections"
            ));
        }
    }

    /// Decides every recorded pass again with the policies in force now,
    /// revokes what they deny (and what belongs to no sandbox any more),
    /// and cuts the kernel-passed flows no still-allowed pass covers.
    /// `before` are the sources held before the change (a sandbox that
    /// left is no longer in the table). `only`: the sandboxes the change
    /// touched (`None`: every one, as at start or on SIGHUP) — the others'
    /// passes are not decided again and their flows not listed, so one
    /// sandbox's edit costs what that sandbox holds, not what the host
    /// holds. Returns how many passes and flows were revoked.
    pub fn revise(&self, before: &[IpAddr], only: Option<&HashSet<String>>) -> (usize, usize) {
        let Ok(mut inner) = self.inner.lock() else {
            return (0, 0);
        };
        let table = self.table.load();
        let now = Instant::now();
        let mut revoked: Vec<Key> = Vec::new();
        let touched = |id: &str| only.is_none_or(|o| o.contains(id));
        inner.entries.retain(|key, g| {
            if !touched(&g.sandbox) {
                return true;
            }
            let keep = now.saturating_duration_since(g.expires) < REMEMBER
                && allowed(&table, &g.sandbox, &g.name, *key);
            if !keep && g.expires > now {
                revoked.push(*key);
            }
            keep
        });
        let mut live: HashMap<String, usize> = HashMap::new();
        for g in inner.entries.values() {
            *live.entry(g.sandbox.clone()).or_default() += 1;
        }
        inner.order.retain(|id, _| live.contains_key(id));
        inner.live = live;
        if !revoked.is_empty()
            && let Err(e) = nft::apply(&nft::revoke(&revoked).to_nftables())
        {
            stderr_line(format!(
                "gatehouse-egress: revoked kernel passes not deleted ({e})"
            ));
        }
        self.save(&inner, true);
        let cut = if self.conntrack {
            let mut sources: Vec<IpAddr> = before.to_vec();
            let addresses = |s: &Arc<Sandbox>| s.addresses.clone();
            match only {
                // The sandboxes touched, by id: not a look at every one.
                Some(ids) => sources.extend(
                    ids.iter()
                        .filter_map(|id| table.get(id))
                        .flat_map(addresses),
                ),
                None => sources.extend(table.sandboxes().flat_map(addresses)),
            }
            cut_flows(&sources, |k| inner.entries.contains_key(&k))
        } else {
            0
        };
        (revoked.len(), cut)
    }

    /// Whether kernel-passed flows are kept while established.
    pub fn conntrack(&self) -> bool {
        self.conntrack
    }

    /// How many passes sandbox `id` holds (for tests and metrics).
    pub fn held(&self, id: &str) -> usize {
        self.inner.lock().map_or(0, |i| i.count(id))
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One kernel-passed flow as conntrack lists it.
#[derive(Debug, PartialEq, Eq)]
struct Flow {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
}

/// Reads `conntrack -L` output: the original direction's addresses and
/// ports of each TCP flow.
fn parse_flows(text: &str) -> Vec<Flow> {
    let mut out = Vec::new();
    for line in text.lines() {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name).map(str::to_string))
        };
        let (Some(src), Some(dst), Some(sport), Some(dport)) = (
            field("src=").and_then(|s| s.parse().ok()),
            field("dst=").and_then(|s| s.parse().ok()),
            field("sport=").and_then(|s| s.parse().ok()),
            field("dport=").and_then(|s| s.parse().ok()),
        ) else {
            continue;
        };
        out.push(Flow {
            src,
            dst,
            sport,
            dport,
        });
    }
    out
}

/// Deletes the kernel-passed flows from `sources` whose element `keep`
/// does not hold; returns how many.
fn cut_flows(sources: &[IpAddr], keep: impl Fn(Key) -> bool) -> usize {
    let mut cut = 0;
    let held: std::collections::HashSet<IpAddr> = sources.iter().copied().collect();
    for family in ["ipv4", "ipv6"] {
        // A family none of the sources has holds none of their flows: not
        // listed (a change to one IPv4 sandbox runs `conntrack` once).
        if !held.iter().any(|s| s.is_ipv4() == (family == "ipv4")) {
            continue;
        }
        let listed = Command::new("conntrack")
            .args(["-L", "-f", family, "-p", "tcp", "-m"])
            .arg(PASS_MARK.to_string())
            .output();
        let Ok(listed) = listed else {
            stderr_line(
                "gatehouse-egress: conntrack could not be run; revoked flows were not cut".into(),
            );
            return cut;
        };
        for f in parse_flows(&String::from_utf8_lossy(&listed.stdout)) {
            if !held.contains(&f.src) || keep((f.src, f.dst, f.dport)) {
                continue;
            }
            let deleted = Command::new("conntrack")
                .args(["-D", "-f", family, "-p", "tcp", "-s"])
                .arg(f.src.to_string())
                .arg("-d")
                .arg(f.dst.to_string())
                .args([
                    "--sport",
                    &f.sport.to_string(),
                    "--dport",
                    &f.dport.to_string(),
                ])
                .output();
            if deleted.is_ok_and(|o| o.status.success()) {
                cut += 1;
            }
        }
    }
    cut
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn conntrack_listings_are_read_in_the_original_direction() {
        let text = "tcp      6 431999 ESTABLISHED src=10.200.1.2 dst=11.0.0.3 sport=40000 dport=22 src=11.0.0.3 dst=10.200.1.2 sport=22 dport=40000 [ASSURED] mark=1734868993 use=1\n\
                    tcp      6 10 SYN_SENT src=fd00:200:1::2 dst=2a00:1::3 sport=5 dport=2222 [UNREPLIED] src=2a00:1::3 dst=fd00:200:1::2 sport=2222 dport=5 mark=1734868993 use=1\n\
                    conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.\n";
        let flows = parse_flows(text);
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0].dst, "11.0.0.3".parse::<IpAddr>().unwrap());
        assert_eq!((flows[0].sport, flows[0].dport), (40000, 22));
        assert_eq!(flows[1].dport, 2222);
    }

    #[test]
    fn a_sandbox_holds_at_most_the_bound_oldest_out_first() {
        let mut inner = Inner::default();
        let src: IpAddr = "10.200.1.2".parse().unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let mut evicted = Vec::new();
        for k in 0..(MAX_PER_SANDBOX as u32 + 10) {
            let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + k));
            evicted.extend(inner.record((src, addr, 22), "a", "x.test", far));
        }
        inner.record((src, "11.9.9.9".parse().unwrap(), 22), "b", "y.test", far);
        assert_eq!(inner.count("a"), MAX_PER_SANDBOX);
        assert_eq!(inner.count("b"), 1);
        assert_eq!(evicted.len(), 10);
        // The first ten in are the ten out.
        let first = IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000));
        assert!(evicted.contains(&(src, first, 22)));
        assert!(!inner.entries.contains_key(&(src, first, 22)));
        // Renewing a key does not count it twice.
        let last = IpAddr::from(std::net::Ipv4Addr::from(
            0x0b00_0000 + MAX_PER_SANDBOX as u32 + 9,
        ));
        assert!(inner.record((src, last, 22), "a", "x.test", far).is_empty());
        assert_eq!(inner.count("a"), MAX_PER_SANDBOX);
    }
}
