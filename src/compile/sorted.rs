//! Hash maps written in key order, so that a compiled set serialises to
//! the same bytes every time (its revision and its artifact) without first
//! being copied into a `serde_json::Value` tree, which cost about 5 KiB a
//! rule (issue 35, finding 9). Every such map is keyed by `String`: one
//! sort of `&String` serves them all (the WASM build's size budget).

use std::collections::HashMap;
use std::hash::BuildHasher;

use serde::{Serialize, Serializer};

/// The entries of `map`, in key order (a list of known length: binary
/// encodings write the length first).
fn entries<V, H>(map: &HashMap<String, V, H>) -> Vec<(&String, &V)> {
    let mut entries: Vec<(&String, &V)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

/// A map, keys in order.
pub(crate) fn map<V, H, S>(map: &HashMap<String, V, H>, s: S) -> Result<S::Ok, S::Error>
where
    V: Serialize,
    H: BuildHasher,
    S: Serializer,
{
    s.collect_map(entries(map))
}

/// A map written in key order, as a value of another map.
struct InOrder<'a, V, H>(&'a HashMap<String, V, H>);

impl<V: Serialize, H: BuildHasher> Serialize for InOrder<'_, V, H> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        map(self.0, s)
    }
}

/// A map of maps, keys in order at both levels.
pub(crate) fn nested<V, H, I, S>(
    outer: &HashMap<String, HashMap<String, V, I>, H>,
    s: S,
) -> Result<S::Ok, S::Error>
where
    V: Serialize,
    H: BuildHasher,
    I: BuildHasher,
    S: Serializer,
{
    s.collect_map(
        entries(outer)
            .into_iter()
            .map(|(k, inner)| (k, InOrder(inner))),
    )
}
