//! A compiled set's payload: its serde form in postcard's binary encoding
//! (what an artifact stores compressed and what the revision digests), and
//! its JSON form for the tests that forge artifacts.

use std::sync::Arc;

use serde::Deserialize;

use super::inflating::{Inflating, Undecodable};
use super::{PolicySet, SetIn, SetOut};

impl PolicySet {
    /// The set serialised canonically: fields in declaration order and
    /// every hash map in key order ([`sorted`]), so the same set always
    /// gives the same bytes.
    pub(crate) fn canonical_bytes(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = Vec::new();
        self.write_canonical(&mut out)?;
        Ok(out)
    }

    /// The SHA-256 of [`PolicySet::canonical_bytes`], streamed: the bytes
    /// are hashed as they are written and never held.
    pub(super) fn canonical_digest(&self) -> Result<String, postcard::Error> {
        let mut hasher = crate::digest::Hasher::default();
        self.write_canonical(&mut hasher)?;
        Ok(hasher.hex())
    }

    /// Writes the canonical form. One writer type (`dyn Write`) for both
    /// callers, so the serialiser of the whole set is compiled once (the
    /// WASM build's size budget).
    fn write_canonical(&self, out: &mut dyn std::io::Write) -> Result<(), postcard::Error> {
        postcard::to_io(&SetOut { inner: &self.inner }, out).map(|_| ())
    }

    /// The set an artifact's payload holds, unchecked: call
    /// [`PolicySet::validate`] before using it.
    pub(crate) fn from_payload(payload: &[u8]) -> Result<PolicySet, postcard::Error> {
        let (set, rest): (SetIn, &[u8]) = postcard::take_from_bytes(payload)?;
        if !rest.is_empty() {
            return Err(postcard::Error::DeserializeBadEncoding);
        }
        Ok(PolicySet {
            inner: Arc::new(set.inner),
        })
    }

    /// The set a compressed payload holds, decoded as it is inflated (the
    /// payload is never held whole), unchecked: call
    /// [`PolicySet::validate`] before using it.
    pub(crate) fn from_deflated(deflated: &[u8], len: usize) -> Result<PolicySet, Undecodable> {
        let mut de = postcard::Deserializer::from_flavor(Inflating::new(deflated, len));
        let set = SetIn::deserialize(&mut de);
        let stream = de.finalize().map_err(Undecodable::Content)?;
        let set = match set {
            Ok(set) => set,
            Err(e) => {
                return Err(match stream.fault {
                    Some(f) => Undecodable::Stream(f),
                    None => Undecodable::Content(e),
                });
            }
        };
        stream.finish().map_err(Undecodable::Stream)?;
        Ok(PolicySet {
            inner: Arc::new(set.inner),
        })
    }

    /// An artifact's payload as JSON (its serde form), for tests that
    /// forge one: see [`crate::testing::artifact_json`].
    pub(crate) fn payload_json(payload: &[u8]) -> Result<serde_json::Value, String> {
        let set = PolicySet::from_payload(payload).map_err(|e| e.to_string())?;
        serde_json::to_value(SetOut { inner: &set.inner }).map_err(|e| e.to_string())
    }

    /// The payload whose serde form is `json`, unvalidated (decoding
    /// checks nothing a load's validation checks, so a forged table stays
    /// as forged).
    pub(crate) fn json_payload(json: serde_json::Value) -> Result<Vec<u8>, String> {
        let set: SetIn = serde_json::from_value(json).map_err(|e| e.to_string())?;
        postcard::to_allocvec(&SetOut { inner: &set.inner }).map_err(|e| e.to_string())
    }
}
