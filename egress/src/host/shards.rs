//! The sandbox table's maps and list, in pieces a copy shares (issue 58):
//! a change through the control API makes a new table from the one in
//! force with one sandbox changed, and readers keep the old one until
//! they are done with it, so the new table is a copy. Kept whole, the
//! copy of three collections of 10 000 sandboxes cost milliseconds a
//! change; in pieces, a copy shares every piece (one reference count
//! each) and a change copies only the piece it touches — the same cost
//! at 10 000 sandboxes as at one.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How many pieces a [`ShardedMap`] has: 10 000 sandboxes make pieces of
/// about 160 entries.
const SHARDS: usize = 64;

/// The most entries a piece of [`Chunks`] holds.
const CHUNK: usize = 128;

/// A hash map in [`SHARDS`] pieces: a clone shares every piece, an insert
/// or removal copies the one piece its key falls in (when another table
/// still shares it).
pub(crate) struct ShardedMap<K, V> {
    /// Empty until the first insert, then `SHARDS` long.
    shards: Vec<Arc<HashMap<K, V>>>,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap { shards: Vec::new() }
    }
}

impl<K, V> Clone for ShardedMap<K, V> {
    fn clone(&self) -> Self {
        ShardedMap {
            shards: self.shards.clone(),
        }
    }
}

/// Which piece `key` falls in: a hash with fixed keys (each piece's map
/// hashes with its own random keys; this one only spreads the entries).
fn shard_of<Q: Hash + ?Sized>(key: &Q) -> usize {
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    // Truncation is the point: the low bits pick the piece.
    (h.finish() as usize) % SHARDS
}

impl<K: Hash + Eq + Clone, V: Clone> ShardedMap<K, V> {
    /// The value of `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards.get(shard_of(key))?.get(key)
    }

    /// Whether `key` has a value.
    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Sets `key`'s value, copying its piece first if another map shares it.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| Arc::default()).collect();
        }
        if let Some(shard) = self.shards.get_mut(shard_of(&key)) {
            Arc::make_mut(shard).insert(key, value);
        }
    }

    /// Takes `key`'s value out, copying its piece first if another map
    /// shares it (and only when the key is there).
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shards.get_mut(shard_of(key))?;
        if !shard.contains_key(key) {
            return None;
        }
        Arc::make_mut(shard).remove(key)
    }
}

/// A list in pieces of at most [`CHUNK`] entries: a clone shares every
/// piece, a change copies the one piece it touches. The order is the
/// order entries were pushed in, removals aside.
pub(crate) struct Chunks<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Clone for Chunks<T> {
    fn clone(&self) -> Self {
        Chunks {
            chunks: self.chunks.clone(),
            len: self.len,
        }
    }
}

impl<T: Clone> Chunks<T> {
    /// How many entries the list holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every entry, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// Adds `value` at the end.
    pub(crate) fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(value),
            _ => self.chunks.push(Arc::new(vec![value])),
        }
        self.len += 1;
    }

    /// Where the first entry `is` holds is: (piece, place in it).
    fn find(&self, is: impl Fn(&T) -> bool) -> Option<(usize, usize)> {
        self.chunks
            .iter()
            .enumerate()
            .find_map(|(i, c)| c.iter().position(&is).map(|j| (i, j)))
    }

    /// Puts `value` in the place of the first entry `is` holds for;
    /// `false` (nothing changed) when there is none.
    pub(crate) fn replace(&mut self, is: impl Fn(&T) -> bool, value: T) -> bool {
        let Some((i, j)) = self.find(is) else {
            return false;
        };
        match self
            .chunks
            .get_mut(i)
            .and_then(|c| Arc::make_mut(c).get_mut(j))
        {
            Some(slot) => {
                *slot = value;
                true
            }
            None => false,
        }
    }

    /// Takes out the first entry `is` holds for; `false` when there is
    /// none. A piece left small is merged with a neighbour, so the pieces
    /// stay few however many entries come and go.
    pub(crate) fn remove(&mut self, is: impl Fn(&T) -> bool) -> bool {
        let Some((i, j)) = self.find(is) else {
            return false;
        };
        let Some(chunk) = self.chunks.get_mut(i) else {
            return false;
        };
        let chunk = Arc::make_mut(chunk);
        if j >= chunk.len() {
            return false;
        }
        chunk.remove(j);
        self.len -= 1;
        let small = chunk.len();
        if small == 0 {
            self.chunks.remove(i);
        } else if small < CHUNK / 4 {
            // With the piece before it if the two fit in one, else with
            // the one after.
            let fits = |k: usize| self.chunks.get(k).is_some_and(|c| small + c.len() <= CHUNK);
            let pair = match i.checked_sub(1) {
                Some(before) if fits(before) => Some(before),
                _ if fits(i + 1) => Some(i),
                _ => None,
            };
            if let Some(first) = pair {
                let second = self.chunks.remove(first + 1);
                if let Some(chunk) = self.chunks.get_mut(first) {
                    Arc::make_mut(chunk).extend(second.iter().cloned());
                }
            }
        }
        true
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Against a plain `Vec` and `HashMap` over a seeded stream of pushes,
    /// replacements and removals, with a clone taken before each change
    /// that must not see it.
    #[test]
    fn the_pieces_behave_as_one_list_and_one_map_and_copies_do_not_share_changes() {
        let mut list: Chunks<u32> = Chunks::default();
        let mut plain: Vec<u32> = Vec::new();
        let mut map: ShardedMap<u32, u32> = ShardedMap::default();
        let mut plain_map: HashMap<u32, u32> = HashMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..20_000u32 {
            let before = (list.clone(), plain.clone(), map.clone(), plain_map.clone());
            let r = next();
            let v = (r >> 8) as u32 % 700;
            // Growing for the first half, then shrinking.
            let grow = if step < 10_000 { 3 } else { 1 };
            match r % 5 {
                k if k < grow => {
                    list.push(v);
                    plain.push(v);
                    map.insert(v, step);
                    plain_map.insert(v, step);
                }
                k if k == grow => {
                    let a = list.replace(|e| *e == v, v + 1000);
                    let b = match plain.iter().position(|e| *e == v) {
                        Some(i) => {
                            plain[i] = v + 1000;
                            true
                        }
                        None => false,
                    };
                    assert_eq!(a, b);
                }
                _ => {
                    let a = list.remove(|e| *e == v || *e == v + 1000);
                    let b = match plain.iter().position(|e| *e == v || *e == v + 1000) {
                        Some(i) => {
                            plain.remove(i);
                            true
                        }
                        None => false,
                    };
                    assert_eq!(a, b);
                    assert_eq!(map.remove(&v), plain_map.remove(&v));
                }
            }
            assert_eq!(list.len(), plain.len());
            assert!(list.iter().eq(plain.iter()), "step {step}");
            // The copy taken before is as it was.
            assert!(before.0.iter().eq(before.1.iter()));
            if step % 97 == 0 {
                for k in 0..700 {
                    assert_eq!(map.get(&k), plain_map.get(&k));
                    assert_eq!(before.2.get(&k), before.3.get(&k));
                }
                // The pieces stay few.
                assert!(
                    list.chunks.len() <= plain.len() / 16 + 4,
                    "{} pieces for {}",
                    list.chunks.len(),
                    plain.len()
                );
            }
        }
        assert!(!plain.is_empty());
    }
}
