//! Choosing the policy of a set a front end was told to use
//! ([`PolicySet::select`]): one way for the CLI, the daemon, its adapters
//! and the bindings, with one error that says what to pick.

use super::{Policy, PolicySet};

/// Why [`PolicySet::select`] found no policy.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// No policy of that name; the closest name, when one is close.
    #[error("no policy named `{name}`{}", .did_you_mean.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Unknown {
        /// The name asked for.
        name: String,
        /// A did-you-mean line (`did you mean `agent`?`), when one fits.
        did_you_mean: Option<String>,
    },
    /// No name was given and the set holds several policies.
    #[error("the set holds {} policies ({}); pick one by name", .names.len(), .names.join(", "))]
    Several {
        /// Every policy's name, in source order.
        names: Vec<String>,
    },
    /// The set holds no policy at all.
    #[error("the set holds no policy")]
    Empty,
}

impl PolicySet {
    /// The policy a front end was told to use: the one named, or — when
    /// no name is given — the set's only one. The error says what to do:
    /// the closest name (did-you-mean), or the names to pick from.
    ///
    /// ```
    /// use gatehouse::{PolicySet, SelectError};
    ///
    /// let set = PolicySet::from_source("a.policy", "policy ci { }\npolicy agent { }\n").expect("compiles");
    /// assert_eq!(set.select(Some("ci")).map(|p| p.name()), Ok("ci"));
    /// let e = set.select(Some("agnet")).err().expect("no such policy");
    /// assert_eq!(e.to_string(), "no policy named `agnet` (did you mean `agent`?)");
    /// assert!(matches!(set.select(None), Err(SelectError::Several { .. })));
    /// ```
    pub fn select(&self, name: Option<&str>) -> Result<&Policy, SelectError> {
        let names = || self.policies().map(|p| p.name.clone()).collect::<Vec<_>>();
        match name {
            Some(n) => self.policy(n).ok_or_else(|| SelectError::Unknown {
                name: n.to_string(),
                did_you_mean: crate::diag::did_you_mean(
                    n,
                    self.policies().map(|p| p.name.as_str()),
                ),
            }),
            None => match self.inner.policies.as_slice() {
                [one] => Ok(one),
                [] => Err(SelectError::Empty),
                _ => Err(SelectError::Several { names: names() }),
            },
        }
    }
}
