//! Compiled artifacts: a compiled [`PolicySet`] in a file, so that a proxy
//! can load it without the parser or the compiler.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GATEHSE\0` |
//! | 4 | format version (this build writes and reads [`FORMAT_VERSION`]) |
//! | 8 | payload length |
//! | 32 | SHA-256 of the payload |
//! | n | payload: the set, serialised with serde (canonical JSON: maps in key order, so the same set gives the same bytes) |
//!
//! Loading checks the header, the length and the checksum, deserialises, then
//! validates every internal index; anything wrong is a clear error, never a
//! panic and never a partly loaded set.

use sha2::{Digest, Sha256};

use crate::compile::PolicySet;

/// The first eight bytes of every artifact.
pub const MAGIC: &[u8; 8] = b"GATEHSE\0";
/// The artifact format this build writes and reads.
/// 3 (2026-12-02): the domain automaton stores its nodes with slot flags and
/// rebuilds its lookup table on load.
/// 4 (2026-12-03): each policy carries its lowered network rules
/// ([`Policy::network`](crate::Policy::network)), so exporters read an
/// artifact as they read text.
/// 5 (2026-12-03): the payload is the set serialised directly, fields in
/// declaration order and hash maps in key order, not through a JSON value
/// tree (which cost about 5 KiB a rule to build); the revision is still the
/// payload's digest.
pub const FORMAT_VERSION: u32 = 6;
const HEADER: usize = 8 + 4 + 8 + 32;

/// Why an artifact was refused.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The bytes do not start with [`MAGIC`].
    #[error("not a gatehouse artifact (no `GATEHSE` header)")]
    NotAnArtifact,
    /// A newer gatehouse wrote it.
    #[error(
        "the artifact was written by a newer gatehouse (format {found}); this one reads format {supported}"
    )]
    NewerFormat {
        /// The artifact's format.
        found: u32,
        /// The format this build reads.
        supported: u32,
    },
    /// A format this build does not know.
    #[error("unknown artifact format {0}")]
    UnknownFormat(u32),
    /// Fewer bytes than the header promises.
    #[error("the artifact is truncated: {found} of {expected} bytes")]
    Truncated {
        /// The length the header gives.
        expected: u64,
        /// The bytes there are.
        found: u64,
    },
    /// More bytes than the header promises.
    #[error("the artifact has {0} bytes after its end")]
    TrailingBytes(u64),
    /// The checksum does not match the content.
    #[error("the artifact is corrupted: its checksum does not match")]
    Checksum,
    /// The content does not decode.
    #[error("the artifact's content is invalid: {0}")]
    Invalid(String),
    /// The content decoded, but its tables are inconsistent.
    #[error("the artifact's tables are inconsistent: {0}")]
    Inconsistent(crate::compile::Inconsistency),
    /// Writing: the set could not be serialised (an internal error).
    #[error("internal error: the policy set could not be serialised: {0}")]
    Serialize(String),
}

pub use crate::digest::sha256_hex;

impl PolicySet {
    /// The set as an artifact. A set that cannot be serialised (an
    /// internal error) gives [`ArtifactError::Serialize`], never an empty or
    /// partial artifact.
    pub fn to_artifact(&self) -> Result<Vec<u8>, ArtifactError> {
        let payload = self
            .canonical_bytes()
            .map_err(|e| ArtifactError::Serialize(e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&Sha256::digest(&payload));
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Loads an artifact, refusing anything corrupted, truncated or newer.
    pub fn from_artifact(bytes: &[u8]) -> Result<PolicySet, ArtifactError> {
        let magic = bytes.get(..8).ok_or(ArtifactError::NotAnArtifact)?;
        if magic != MAGIC {
            return Err(ArtifactError::NotAnArtifact);
        }
        let truncated = |expected: usize| ArtifactError::Truncated {
            expected: expected as u64,
            found: bytes.len() as u64,
        };
        let header = bytes.get(..HEADER).ok_or_else(|| truncated(HEADER))?;
        let version = u32::from_le_bytes(
            header
                .get(8..12)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| truncated(HEADER))?,
        );
        if version > FORMAT_VERSION {
            return Err(ArtifactError::NewerFormat {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version != FORMAT_VERSION {
            return Err(ArtifactError::UnknownFormat(version));
        }
        let len = u64::from_le_bytes(
            header
                .get(12..20)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| truncated(HEADER))?,
        );
        let sum = header.get(20..52).ok_or_else(|| truncated(HEADER))?;
        let total = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(HEADER))
            .ok_or(ArtifactError::Invalid("length".into()))?;
        if bytes.len() < total {
            return Err(truncated(total));
        }
        if bytes.len() > total {
            return Err(ArtifactError::TrailingBytes((bytes.len() - total) as u64));
        }
        let payload = bytes.get(HEADER..total).ok_or_else(|| truncated(total))?;
        if Sha256::digest(payload).as_slice() != sum {
            return Err(ArtifactError::Checksum);
        }
        let set =
            PolicySet::from_payload(payload).map_err(|e| ArtifactError::Invalid(e.to_string()))?;
        set.validate().map_err(ArtifactError::Inconsistent)?;
        Ok(set)
    }
}
