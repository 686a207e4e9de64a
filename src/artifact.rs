//! Compiled artifacts: a compiled [`PolicySet`] in a file, so that a proxy
//! can load it without the parser or the compiler.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GATEHSE\0` |
//! | 4 | format version (this build writes and reads [`FORMAT_VERSION`]) |
//! | 8 | length of what follows the header |
//! | 32 | SHA-256 of what follows the header |
//! | 8 | length of the payload |
//! | n | the payload, compressed (raw DEFLATE, RFC 1951) |
//!
//! The payload is the set in postcard's binary encoding of its serde form
//! (fields in declaration order, every map in key order, integers as
//! varints), so the same set always gives the same bytes; the set's
//! [revision](PolicySet::revision) is the digest of the payload, so it does
//! not depend on the compressor.
//!
//! Loading checks the header, the length and the checksum and bounds the
//! payload's stated length (at most [`MAX_PAYLOAD`], and at most what
//! DEFLATE can expand the stored bytes to); then it decodes the set while
//! inflating, through a 64 KiB window (the payload is never held whole),
//! requires the stream to end exactly where the set does at the stated
//! length, and validates every internal index; anything wrong is a clear
//! error, never a panic and never a partly loaded set.

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
/// 6 (2026-12-04): file rules (`read`/`none` with globs) in each policy.
/// 7 (2026-12-07): the payload is binary (postcard) instead of JSON, and
/// stored compressed (issue 62: 433 → 38 bytes a rule at 200 000 rules),
/// decoded while it is inflated.
/// 8 (2026-12-08): the rule table holds three bytes a rule (text length,
/// line difference, column) instead of twelve (issue 62).
pub const FORMAT_VERSION: u32 = 8;
const HEADER: usize = 8 + 4 + 8 + 32;

/// The largest payload (uncompressed) a load accepts: 128 MiB, more than
/// four times what a policy at the 8 MiB text cap compiles to (about 28
/// MB), so that a small file cannot make a load hold gigabytes.
pub const MAX_PAYLOAD: u64 = 128 << 20;

/// DEFLATE expands its input at most about 1 032-fold; a stated payload
/// length beyond that is a lie, refused before anything is allocated.
const MAX_RATIO: u64 = 1_040;

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
        Ok(seal(&payload))
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
        let stored = bytes.get(HEADER..total).ok_or_else(|| truncated(total))?;
        if Sha256::digest(stored).as_slice() != sum {
            return Err(ArtifactError::Checksum);
        }
        let (len, deflated) = stated(stored)?;
        let set = PolicySet::from_deflated(deflated, len)
            .map_err(|e| ArtifactError::Invalid(e.to_string()))?;
        set.validate().map_err(ArtifactError::Inconsistent)?;
        Ok(set)
    }
}

/// The set a payload holds, every internal index checked.
pub(crate) fn load_payload(payload: &[u8]) -> Result<PolicySet, ArtifactError> {
    let set =
        PolicySet::from_payload(payload).map_err(|e| ArtifactError::Invalid(e.to_string()))?;
    set.validate().map_err(ArtifactError::Inconsistent)?;
    Ok(set)
}

/// The artifact around `payload`: header, checksum, the payload compressed.
pub(crate) fn seal(payload: &[u8]) -> Vec<u8> {
    let mut stored = Vec::with_capacity(8 + payload.len() / 3);
    stored.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    stored.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(payload, LEVEL));
    let mut out = Vec::with_capacity(HEADER + stored.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&stored));
    out.extend_from_slice(&stored);
    out
}

/// miniz's compression level: the output is fixed by the level and the
/// crate's version (pinned by `Cargo.lock`); the revision does not depend
/// on it. Level 1: at 200 000 rules 38–40 bytes a rule for about 0.15 s,
/// where level 6 gives 35 for 1.6 s (`policyc compile`, BENCHMARKS.md).
const LEVEL: u8 = 1;

/// The payload's stated length and the DEFLATE stream, the length
/// bounded: at most [`MAX_PAYLOAD`] and at most what the stream can expand
/// to, refused before anything is allocated.
fn stated(stored: &[u8]) -> Result<(usize, &[u8]), ArtifactError> {
    let invalid = |m: &str| ArtifactError::Invalid(m.to_string());
    let (len, deflated) = stored
        .split_first_chunk::<8>()
        .ok_or_else(|| invalid("no payload length"))?;
    let len = u64::from_le_bytes(*len);
    if len > MAX_PAYLOAD {
        return Err(invalid(&format!(
            "its payload of {len} bytes is over the limit of {MAX_PAYLOAD}"
        )));
    }
    if len > (deflated.len() as u64).saturating_mul(MAX_RATIO) + 64 {
        return Err(invalid(
            "its payload length is more than its compressed bytes can hold",
        ));
    }
    let len = usize::try_from(len).map_err(|_| invalid("payload length"))?;
    Ok((len, deflated))
}

/// The payload of an artifact's stored bytes (after the checksum), whole:
/// exactly its stated length, the whole DEFLATE stream consumed, nothing
/// after it. Loads decode while inflating instead; this is for tests and
/// the fuzz target.
pub(crate) fn inflate(stored: &[u8]) -> Result<Vec<u8>, ArtifactError> {
    use miniz_oxide::inflate::TINFLStatus;
    use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
    let invalid = |m: &str| ArtifactError::Invalid(m.to_string());
    let (len, deflated) = stated(stored)?;
    let mut out = vec![0u8; len];
    let mut state = Box::<DecompressorOxide>::default();
    let (status, read, written) = decompress(
        &mut state,
        deflated,
        &mut out,
        0,
        inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
    );
    match status {
        TINFLStatus::Done if read == deflated.len() && written == len => Ok(out),
        TINFLStatus::Done if read != deflated.len() => {
            Err(invalid("bytes follow its compressed payload"))
        }
        TINFLStatus::Done | TINFLStatus::HasMoreOutput => {
            Err(invalid("its payload is not the length its header states"))
        }
        _ => Err(invalid("its compressed payload does not inflate")),
    }
}
