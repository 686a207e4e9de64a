//! What host mode's nftables table holds for the sandboxes, as last
//! written, so that a change writes only what changed (issue 58): one
//! sandbox's new policy is at most its layer's chain and its sources'
//! elements of the verdict maps, in one transaction, whatever the number
//! of sandboxes — and nothing at all when its kernel layer did not change.
//!
//! nft transactions are atomic: a refused one leaves the table as it was,
//! so the record stays true; the next change is then written whole.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use nftables::batch::Batch;
use nftables::schema::{Chain, NfListObject, SetType};
use nftables::types::NfFamily;

use super::boundary::ifaces_in_rules;
use super::boundary::{BRIDGE_TABLE, bridge_rules, bridge_sets, flush_chain, hold_rules};
use super::expr::{Contents, Layer, Ports, TABLE, family, refill, source_element, sources_sets};
use super::nft::{NftError, Ruleset, layer_chain, layer_element};

/// A sandbox's sources and its layer's chain, as written (the name shared
/// with the chain's entry).
type Placed = (Vec<IpAddr>, Arc<str>);

/// A sandbox's place in a change: its sources and chain now, or gone.
type Moved = (String, Option<(Vec<IpAddr>, String)>);

/// The table's contents as last written.
#[derive(Default)]
pub struct Installed {
    networks: Vec<ipnet::IpNet>,
    interfaces: Vec<String>,
    /// Each sandbox's sources and its layer's chain.
    sandboxes: HashMap<String, Placed>,
    /// Each layer chain in the table, its layer and how many sandboxes
    /// jump to it.
    chains: HashMap<Arc<str>, (Arc<Layer>, usize)>,
}

/// What a written change makes of the record ([`Installed::commit`]).
pub struct Delta {
    networks: Vec<ipnet::IpNet>,
    interfaces: Vec<String>,
    /// Each sandbox changed: its sources and chain now, or gone.
    sandboxes: Vec<Moved>,
    /// Each chain whose count changed: its layer and count now (0: gone).
    chains: Vec<(String, Arc<Layer>, usize)>,
}

impl Installed {
    /// The record of a table written whole from `c` ([`super::nft::ruleset`]).
    pub fn of(c: &Contents<'_>) -> Result<Installed, NftError> {
        let mut out = Installed {
            networks: c.networks.to_vec(),
            interfaces: c.interfaces.to_vec(),
            ..Installed::default()
        };
        let mut delta = Vec::new();
        for s in &c.layer {
            let chain = s.layer.chain();
            let entry = out
                .chains
                .entry(Arc::from(chain.as_str()))
                .or_insert_with(|| (s.layer.clone(), 0));
            if entry.0 != s.layer {
                return Err(NftError::Collision(chain));
            }
            entry.1 += 1;
            delta.push((s.id.clone(), Some((s.sources.clone(), chain))));
        }
        out.place(delta);
        Ok(out)
    }

    /// Whether a change to `networks` or `interfaces` needs every sandbox
    /// (the sources held are then written whole).
    pub fn needs_all(&self, networks: &[ipnet::IpNet], interfaces: &[String]) -> bool {
        self.networks != networks || self.interfaces != interfaces
    }

    /// The ids of every sandbox written.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.sandboxes.keys()
    }

    /// How many layer chains the table holds.
    pub fn chains(&self) -> usize {
        self.chains.len()
    }

    /// The transaction that brings the table from this record to `c`:
    /// `c.layer` are the sandboxes to write (every one, when
    /// [`Installed::needs_all`]), `gone` those to take out. Nothing else is
    /// touched: the DNS-fed passes stay, and so do other sandboxes'
    /// elements and chains.
    pub fn change(
        &self,
        c: &Contents<'_>,
        gone: &[String],
        ports: Ports,
    ) -> Result<(Ruleset, Delta), NftError> {
        let all = self.needs_all(c.networks, c.interfaces);
        let mut delta = Delta {
            networks: c.networks.to_vec(),
            interfaces: c.interfaces.to_vec(),
            sandboxes: Vec::new(),
            chains: Vec::new(),
        };
        let mut b = Batch::new();
        // The sources held one by one (those no `networks` entry covers).
        let covered = |ip: &IpAddr| c.networks.iter().any(|n| n.contains(ip));
        if all {
            bridge_sets(c, &mut b, true);
            for ((name, elems), kind) in sources_sets(c)
                .into_iter()
                .zip([SetType::Ipv4Addr, SetType::Ipv6Addr])
            {
                refill(&mut b, name, kind, elems);
            }
        } else {
            let old: HashSet<IpAddr> = gone
                .iter()
                .chain(c.layer.iter().map(|s| &s.id))
                .filter_map(|id| self.sandboxes.get(id))
                .flat_map(|(src, _)| src.iter().copied())
                .filter(|ip| !covered(ip))
                .collect();
            let new: HashSet<IpAddr> = c
                .layer
                .iter()
                .flat_map(|s| s.sources.iter().copied())
                .filter(|ip| !covered(ip))
                .collect();
            let mut out: Vec<&IpAddr> = old.difference(&new).collect();
            let mut into: Vec<&IpAddr> = new.difference(&old).collect();
            out.sort();
            into.sort();
            for ip in out {
                b.delete(source_element(family(), TABLE, *ip));
                b.delete(source_element(NfFamily::Bridge, BRIDGE_TABLE, *ip));
            }
            for ip in into {
                b.add(source_element(family(), TABLE, *ip));
                b.add(source_element(NfFamily::Bridge, BRIDGE_TABLE, *ip));
            }
        }
        // The chains: counts after the change.
        let mut counts: HashMap<String, (Arc<Layer>, usize)> = HashMap::new();
        let mut count = |chain: &str, layer: &Arc<Layer>, up: bool| -> Result<(), NftError> {
            let e = counts.entry(chain.to_string()).or_insert_with(|| {
                self.chains
                    .get(chain)
                    .cloned()
                    .unwrap_or_else(|| (layer.clone(), 0))
            });
            if up {
                if e.0 != *layer {
                    return Err(NftError::Collision(chain.to_string()));
                }
                e.1 += 1;
            } else {
                e.1 = e.1.saturating_sub(1);
            }
            Ok(())
        };
        let now: HashSet<&str> = c.layer.iter().map(|s| s.id.as_str()).collect();
        let mut leaving: Vec<&String> = gone
            .iter()
            .filter(|id| !now.contains(id.as_str()))
            .collect();
        if all {
            leaving.extend(
                self.sandboxes
                    .keys()
                    .filter(|id| !now.contains(id.as_str())),
            );
        }
        leaving.sort();
        leaving.dedup();
        let mut deletes = Vec::new();
        let mut adds = Vec::new();
        for id in &leaving {
            if let Some((sources, chain)) = self.sandboxes.get(*id) {
                if let Some((layer, _)) = self.chains.get(chain) {
                    count(chain, layer, false)?;
                }
                deletes.extend(sources.iter().map(|ip| layer_element(*ip, None)));
                delta.sandboxes.push(((*id).clone(), None));
            }
        }
        let mut fresh: Vec<(String, Arc<Layer>)> = Vec::new();
        for s in &c.layer {
            let chain = s.layer.chain();
            count(&chain, &s.layer, true)?;
            let old = self.sandboxes.get(&s.id);
            if let Some((sources, was)) = old {
                if let Some((layer, _)) = self.chains.get(was) {
                    count(was, layer, false)?;
                }
                for ip in sources {
                    if !(s.sources.contains(ip) && **was == *chain) {
                        deletes.push(layer_element(*ip, None));
                    }
                }
            }
            for ip in &s.sources {
                if !old.is_some_and(|(src, was)| src.contains(ip) && **was == *chain) {
                    adds.push(layer_element(*ip, Some(&chain)));
                }
            }
            if !self.chains.contains_key(chain.as_str()) && !fresh.iter().any(|(n, _)| *n == chain)
            {
                fresh.push((chain.clone(), s.layer.clone()));
            }
            if old.is_none_or(|(src, was)| *src != s.sources || **was != *chain) {
                delta
                    .sandboxes
                    .push((s.id.clone(), Some((s.sources.clone(), chain))));
            }
        }
        for (chain, layer) in &fresh {
            for o in layer_chain(chain, layer) {
                b.add(o);
            }
        }
        for o in deletes {
            b.delete(o);
        }
        for o in adds {
            b.add(o);
        }
        let mut counts: Vec<(String, (Arc<Layer>, usize))> = counts.into_iter().collect();
        counts.sort_by(|a, b| a.0.cmp(&b.0));
        for (chain, (layer, n)) in counts {
            let was = self.chains.get(chain.as_str()).map_or(0, |(_, n)| *n);
            if n == 0 && was > 0 {
                b.delete(NfListObject::Chain(Chain {
                    family: family(),
                    table: std::borrow::Cow::Borrowed(TABLE),
                    name: std::borrow::Cow::Owned(chain.clone()),
                    ..Chain::default()
                }));
            }
            if n != was {
                delta.chains.push((chain, layer, n));
            }
        }
        if self.interfaces != c.interfaces {
            flush_chain(&mut b, family(), TABLE, "hold");
            for r in hold_rules(c.interfaces) {
                b.add(r);
            }
            flush_chain(&mut b, family(), TABLE, "ifaces_in");
            for r in ifaces_in_rules(c.interfaces, ports) {
                b.add(r);
            }
            flush_chain(&mut b, NfFamily::Bridge, BRIDGE_TABLE, "forward");
            for r in bridge_rules(c.interfaces) {
                b.add(r);
            }
        }
        let mut out = Ruleset::default();
        out.batch(b);
        Ok((out, delta))
    }

    /// Takes a written change into the record.
    pub fn commit(&mut self, delta: Delta) {
        self.networks = delta.networks;
        self.interfaces = delta.interfaces;
        for (chain, layer, n) in delta.chains {
            if n == 0 {
                self.chains.remove(chain.as_str());
            } else if let Some(e) = self.chains.get_mut(chain.as_str()) {
                *e = (layer, n);
            } else {
                self.chains.insert(Arc::from(chain), (layer, n));
            }
        }
        self.place(delta.sandboxes);
    }

    /// Records where sandboxes are now (after their chains).
    fn place(&mut self, sandboxes: Vec<Moved>) {
        for (id, now) in sandboxes {
            match now {
                Some((sources, chain)) => {
                    let name = self
                        .chains
                        .get_key_value(chain.as_str())
                        .map_or_else(|| Arc::from(chain), |(k, _)| k.clone());
                    self.sandboxes.insert(id, (sources, name));
                }
                None => {
                    self.sandboxes.remove(&id);
                }
            }
        }
    }

    /// Writes the change ([`Installed::change`]) and takes it into the
    /// record; a change that writes nothing runs no `nft`.
    pub fn apply(
        &mut self,
        c: &Contents<'_>,
        gone: &[String],
        ports: Ports,
    ) -> Result<(), NftError> {
        let (rules, delta) = self.change(c, gone, ports)?;
        if !rules.is_empty() {
            // Elements alone go over netlink (`nft` reads every element of
            // the table first); a batch the kernel refused changed nothing,
            // and `nft` then makes the same transaction (and says why not).
            let fast = rules
                .element_ops()
                .map(|ops| ops.apply(std::time::Duration::from_secs(2)));
            if !matches!(fast, Some(Ok(()))) {
                super::nft::apply(&rules)?;
            }
        }
        self.commit(delta);
        Ok(())
    }
}
