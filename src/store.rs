//! Live updates: an [`arc_swap`] handle that readers load without locks and
//! a writer replaces atomically.
//!
//! A reader that calls [`PolicyStore::load`] holds one whole compiled set for
//! as long as it keeps the guard: it never sees half of an update. A set that
//! fails to compile is refused and the old one stays in force.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::build::Error;
use crate::compile::PolicySet;
use crate::source::SourceMap;

/// The live policy of a running program: readers load the current set
/// without a lock; an update that does not compile is refused, and the old
/// set stays in force (fail closed, never empty).
///
/// ```
/// use gatehouse::{PolicySet, PolicyStore, SourceMap, Via};
///
/// let store = PolicyStore::new(PolicySet::from_source("p.policy", "policy p {\n  network off\n}\n")?);
/// let allowed = |s: &PolicyStore| s.load().single().expect("one policy").connect("github.com", 443, Via::Https).is_allow();
/// assert!(!allowed(&store));
///
/// let mut next = SourceMap::new();
/// next.add("p.policy", "policy p {\n  network {\n    allow domain github.com\n  }\n}\n");
/// store.update(next)?;
/// assert!(allowed(&store));
///
/// let mut broken = SourceMap::new();
/// broken.add("p.policy", "policy p {\n  network {\n    allow domain\n");
/// assert!(store.update(broken).is_err());
/// assert!(allowed(&store)); // the last good set still decides
/// # Ok::<(), gatehouse::Error>(())
/// ```
#[derive(Debug)]
pub struct PolicyStore {
    current: ArcSwap<PolicySet>,
}

impl PolicyStore {
    /// A store whose first policy set is `set`.
    pub fn new(set: PolicySet) -> Self {
        PolicyStore {
            current: ArcSwap::from_pointee(set),
        }
    }

    /// A store whose first policy set is `set`, shared with whoever else
    /// holds it (equal policies compiled once).
    pub fn shared(set: Arc<PolicySet>) -> Self {
        PolicyStore {
            current: ArcSwap::new(set),
        }
    }

    /// Installs an already compiled set that others may share.
    pub fn replace_shared(&self, set: Arc<PolicySet>) {
        self.current.store(set);
    }

    /// The current set, lock-free. Keep the snapshot for the duration of
    /// one decision (or one batch that must be consistent).
    pub fn load(&self) -> Snapshot {
        Snapshot(self.current.load())
    }

    /// The current set as a shared pointer, to keep beyond one decision (a
    /// connection that must be re-decided later with the set it began with).
    pub fn load_full(&self) -> Arc<PolicySet> {
        self.current.load_full()
    }

    /// Installs an already compiled set.
    pub fn replace(&self, set: PolicySet) {
        self.current.store(Arc::new(set));
    }

    /// Compiles `sources` and installs the result; on any error the old set
    /// stays in force and the error is returned.
    pub fn update(&self, sources: SourceMap) -> Result<(), Error> {
        let set = PolicySet::from_sources(sources)?;
        self.replace(set);
        Ok(())
    }
}

/// The set in force when [`PolicyStore::load`] was called: it derefs to
/// [`PolicySet`], and an update meanwhile does not change it.
pub struct Snapshot(arc_swap::Guard<Arc<PolicySet>>);

impl std::ops::Deref for Snapshot {
    type Target = PolicySet;
    fn deref(&self) -> &PolicySet {
        &self.0
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Snapshot").field(&**self).finish()
    }
}
