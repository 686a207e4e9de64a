//! What artifacts hold of [`Intervals`]: every interval's slot and the
//! full slots, as before the runtime packed them (issue 62).

use serde::{Deserialize, Serialize};

use super::{INLINE, Intervals, IpSlot, NONE, Packed, PortArena, Starts, code};

/// What artifacts hold of [`Intervals`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StoredIntervals {
    /// Each start as `[high 64 bits, low 64 bits]`: the artifact's JSON
    /// cannot carry a number above `u64::MAX`, which IPv6 starts reach.
    #[serde(with = "wide")]
    pub(super) starts: Vec<u128>,
    slots: Vec<u32>,
    table: Vec<IpSlot>,
    ports: PortArena,
    width: u32,
}

/// `u128` starts as pairs of `u64` in artifacts.
mod wide {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u128], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|&x| [(x >> 64) as u64, x as u64]))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u128>, D::Error> {
        let pairs: Vec<[u64; 2]> = Vec::deserialize(d)?;
        Ok(pairs
            .into_iter()
            .map(|[hi, lo]| (u128::from(hi) << 64) | u128::from(lo))
            .collect())
    }
}

impl From<Intervals> for StoredIntervals {
    fn from(i: Intervals) -> StoredIntervals {
        StoredIntervals {
            starts: i.starts.wide(),
            slots: i.slots(),
            table: (i.table.iter())
                .map(|[deny, allow, exact_allow]| IpSlot {
                    deny: deny.unpack(&i.split),
                    allow: allow.unpack(&i.split),
                    exact_allow: exact_allow.unpack(&i.split),
                })
                .collect(),
            ports: i.ports,
            width: i.width,
        }
    }
}

impl TryFrom<StoredIntervals> for Intervals {
    type Error = crate::compile::Inconsistency;
    fn try_from(s: StoredIntervals) -> Result<Intervals, crate::compile::Inconsistency> {
        if s.table.len() >= INLINE as usize || s.starts.len() != s.slots.len() {
            return Err(crate::compile::Inconsistency::Table(
                "interval table out of shape",
            ));
        }
        if s.slots
            .iter()
            .any(|&x| x != NONE && x as usize >= s.table.len())
        {
            return Err(crate::compile::Inconsistency::Table(
                "interval slot out of range",
            ));
        }
        let mut split = Vec::new();
        let table: Vec<[Packed; 3]> = (s.table.into_iter())
            .map(|x| [x.deny, x.allow, x.exact_allow].map(|g| Packed::pack(g, &mut split)))
            .collect();
        let codes = s.slots.iter().map(|&slot| code(&table, slot)).collect();
        let starts = Starts::new(s.width, s.starts, codes).ok_or(
            crate::compile::Inconsistency::Table("interval start wider than its family"),
        )?;
        let mut i = Intervals {
            starts,
            table,
            split,
            ports: s.ports,
            width: s.width,
            index: Vec::new(),
            bits: 0,
        };
        i.index();
        Ok(i)
    }
}
