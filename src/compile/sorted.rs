//! Hash maps written in key order, so that a compiled set serialises to
//! the same bytes every time (its revision and its artifact) without first
//! being copied into a `serde_json::Value` tree, which cost about 5 KiB a
//! rule (issue 35, finding 9).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use serde::{Serialize, Serializer};

/// A map, keys in order.
pub(crate) fn map<K, V, H, S>(map: &HashMap<K, V, H>, s: S) -> Result<S::Ok, S::Error>
where
    K: Ord + Serialize,
    V: Serialize,
    H: BuildHasher,
    S: Serializer,
{
    s.collect_map(map.iter().collect::<BTreeMap<_, _>>())
}

/// A map of maps, keys in order at both levels.
pub(crate) fn nested<K, J, V, H, I, S>(
    map: &HashMap<K, HashMap<J, V, I>, H>,
    s: S,
) -> Result<S::Ok, S::Error>
where
    K: Ord + Serialize,
    J: Ord + Serialize,
    V: Serialize,
    H: BuildHasher,
    I: BuildHasher,
    S: Serializer,
{
    s.collect_map(
        map.iter()
            .map(|(k, inner)| (k, inner.iter().collect::<BTreeMap<_, _>>()))
            .collect::<BTreeMap<_, _>>(),
    )
}
