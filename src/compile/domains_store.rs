//! What artifacts hold of a [`DomainTrie`]: its node list and every label
//! in node order, its full slots — rebuilt from the lookup table when one
//! is written, and packed again when one loads (issue 62).

use serde::{Deserialize, Serialize};

use super::{DomainTrie, Group, MAX_LABEL, NONE, Node, Packed, PortArena, Slot};

/// What artifacts hold of a [`DomainTrie`]: everything but the lookup
/// table, which loading rebuilds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredTrie {
    nodes: Vec<Node>,
    labels: String,
    slots: Vec<Slot>,
    star: Group,
    ports: PortArena,
}

impl From<DomainTrie> for StoredTrie {
    fn from(t: DomainTrie) -> StoredTrie {
        let (nodes, labels) = t.nodes();
        StoredTrie {
            nodes,
            slots: (t.slots.iter())
                .map(|[d, a]| Slot {
                    deny: d.unpack(&t.split),
                    allow: a.unpack(&t.split),
                })
                .collect(),
            labels,
            star: t.star,
            ports: t.ports,
        }
    }
}

impl TryFrom<StoredTrie> for DomainTrie {
    type Error = crate::compile::Inconsistency;
    fn try_from(s: StoredTrie) -> Result<DomainTrie, crate::compile::Inconsistency> {
        // The table is built from the nodes, so their shape is checked
        // first; `validate` checks the rest.
        for (i, n) in s.nodes.iter().enumerate() {
            if n.label_len == 0 || n.label_len as usize > MAX_LABEL {
                return Err(crate::compile::Inconsistency::Table("bad label length"));
            }
            if n.parent != NONE && n.parent as usize >= i {
                return Err(crate::compile::Inconsistency::Table("bad parent"));
            }
            let end = n.label_start as usize + n.label_len as usize;
            if s.labels.get(n.label_start as usize..end).is_none() {
                return Err(crate::compile::Inconsistency::Table("label out of range"));
            }
        }
        if s.nodes.len() > (1 << 30) {
            return Err(crate::compile::Inconsistency::Table("too many nodes"));
        }
        // Labels in node order, so that the node list can be rebuilt
        // (unchanged for every artifact this crate writes).
        let mut nodes = s.nodes;
        let mut labels = String::with_capacity(s.labels.len());
        for n in &mut nodes {
            let end = n.label_start as usize + n.label_len as usize;
            let label = s.labels.get(n.label_start as usize..end).unwrap_or("");
            n.label_start = u32::try_from(labels.len()).unwrap_or(u32::MAX);
            labels.push_str(label);
        }
        let mut split = Vec::new();
        let slots = (s.slots.into_iter())
            .map(|x| {
                [
                    Packed::pack(x.deny, &mut split),
                    Packed::pack(x.allow, &mut split),
                ]
            })
            .collect();
        let mut t = DomainTrie {
            order: Vec::new(),
            labels: String::new(),
            slots,
            split,
            star: s.star,
            ports: s.ports,
            table: Vec::new(),
            home: 0,
        };
        t.index(&nodes, &labels);
        Ok(t)
    }
}
