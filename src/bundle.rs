//! Signed bundles: a compiled artifact with an Ed25519 signature, for a
//! fleet that receives its policies from a file server, an object store or
//! a CDN and must trust only what its owner signed (docs/bundles.md).
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GHBUNDL\0` |
//! | 4 | bundle format version ([`BUNDLE_VERSION`]) |
//! | 8 | key id: the first 8 bytes of the SHA-256 of the public key |
//! | 64 | Ed25519 signature of `gatehouse bundle v1\0` followed by the artifact |
//! | n | the artifact ([`crate::artifact`]), with its own checksum |
//!
//! [`verify`] refuses, with an error that says which: bytes that are not a
//! bundle (a bare artifact or policy text is *unsigned*), a key id no
//! trusted key has, a signature that does not verify (a tampered artifact,
//! or another key's signature under a trusted id), and an artifact that
//! does not load. Nothing is loaded before the signature verifies.
//!
//! Keys are text files: `gatehouse-secret-key-v1:` or
//! `gatehouse-public-key-v1:` then 64 hex digits (the 32-byte Ed25519 seed
//! or public key). [`Keypair::generate`] draws the seed from the operating
//! system.

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};

use crate::compile::PolicySet;

/// The first eight bytes of every bundle.
pub const BUNDLE_MAGIC: &[u8; 8] = b"GHBUNDL\0";
/// The bundle format this build writes and reads.
pub const BUNDLE_VERSION: u32 = 1;
const CONTEXT: &[u8] = b"gatehouse bundle v1\0";
const HEADER: usize = 8 + 4 + 8 + 64;
const SECRET_PREFIX: &str = "gatehouse-secret-key-v1:";
const PUBLIC_PREFIX: &str = "gatehouse-public-key-v1:";

/// Why a bundle or a key was refused.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A trusted key is set, and the bytes are not a signed bundle.
    #[error(
        "the policy is not signed: a trusted key is configured, so only a signed bundle (`policyc compile --sign KEY`) is accepted"
    )]
    Unsigned,
    /// A bundle of a newer or unknown format.
    #[error("unknown bundle format {0}; this gatehouse reads format {BUNDLE_VERSION}")]
    UnknownFormat(u32),
    /// Fewer bytes than a bundle's header.
    #[error("the bundle is truncated")]
    Truncated,
    /// Signed by a key that is not trusted.
    #[error("the bundle is signed by key {0}, which is not a trusted key")]
    UntrustedKey(String),
    /// The signature does not verify: the content was changed after
    /// signing, or the signature is not the trusted key's.
    #[error(
        "the bundle's signature does not verify with trusted key {0}: it was changed after signing, or signed by another key"
    )]
    BadSignature(String),
    /// The signed artifact does not load.
    #[error("the signed artifact is invalid: {0}")]
    Artifact(crate::artifact::ArtifactError),
    /// A key file that cannot be read as one.
    #[error("not a gatehouse {0} key (expected `{1}` and 64 hex digits)")]
    BadKey(&'static str, &'static str),
    /// The system's random source failed (key generation).
    #[error("no randomness from the operating system: {0}")]
    Random(String),
}

/// A public key a deployment trusts.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct PublicKey(VerifyingKey);

/// A signing key, with its public half.
pub struct Keypair(SigningKey);

impl std::fmt::Debug for Keypair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keypair({})", self.public().id())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl PublicKey {
    /// Reads a public key file's text.
    pub fn parse(text: &str) -> Result<PublicKey, BundleError> {
        let bad = BundleError::BadKey("public", PUBLIC_PREFIX);
        let bytes = text
            .trim()
            .strip_prefix(PUBLIC_PREFIX)
            .and_then(unhex32)
            .ok_or(bad.clone())?;
        VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|_| bad)
    }

    /// The key file's text (one line).
    pub fn to_text(&self) -> String {
        format!("{PUBLIC_PREFIX}{}\n", hex(self.0.as_bytes()))
    }

    /// The key id: the first 8 bytes of the SHA-256 of the key, in hex.
    pub fn id(&self) -> String {
        hex(&self.id_bytes())
    }

    fn id_bytes(&self) -> [u8; 8] {
        let d = Sha256::digest(self.0.as_bytes());
        let mut id = [0u8; 8];
        id.copy_from_slice(d.get(..8).unwrap_or(&[0; 8]));
        id
    }
}

impl Keypair {
    /// A new key pair, its seed drawn from the operating system.
    pub fn generate() -> Result<Keypair, BundleError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| BundleError::Random(e.to_string()))?;
        Ok(Keypair(SigningKey::from_bytes(&seed)))
    }

    /// Reads a secret key file's text.
    pub fn parse(text: &str) -> Result<Keypair, BundleError> {
        text.trim()
            .strip_prefix(SECRET_PREFIX)
            .and_then(unhex32)
            .map(|seed| Keypair(SigningKey::from_bytes(&seed)))
            .ok_or(BundleError::BadKey("secret", SECRET_PREFIX))
    }

    /// The secret key file's text (one line). Keep it secret.
    pub fn to_text(&self) -> String {
        format!("{SECRET_PREFIX}{}\n", hex(self.0.as_bytes()))
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// `artifact` signed: a bundle.
    pub fn sign(&self, artifact: &[u8]) -> Vec<u8> {
        let mut message = Vec::with_capacity(CONTEXT.len() + artifact.len());
        message.extend_from_slice(CONTEXT);
        message.extend_from_slice(artifact);
        let signature = self.0.sign(&message);
        let mut out = Vec::with_capacity(HEADER + artifact.len());
        out.extend_from_slice(BUNDLE_MAGIC);
        out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
        out.extend_from_slice(&self.public().id_bytes());
        out.extend_from_slice(&signature.to_bytes());
        out.extend_from_slice(artifact);
        out
    }
}

/// Whether `bytes` start like a bundle (signed or not yet verified).
pub fn is_bundle(bytes: &[u8]) -> bool {
    bytes.starts_with(BUNDLE_MAGIC)
}

/// Verifies a bundle with the trusted keys, then loads its artifact.
///
/// ```
/// use gatehouse::bundle::{Keypair, verify};
/// use gatehouse::PolicySet;
///
/// let set = PolicySet::from_source("p.policy", "policy p { network off }").unwrap();
/// let key = Keypair::generate()?;
/// let bundle = key.sign(&set.to_artifact().unwrap());
/// assert_eq!(verify(&bundle, &[key.public()])?.revision(), set.revision());
///
/// let mut tampered = bundle.clone();
/// *tampered.last_mut().unwrap() ^= 1;
/// assert!(verify(&tampered, &[key.public()]).is_err());
/// # Ok::<(), gatehouse::bundle::BundleError>(())
/// ```
pub fn verify(bytes: &[u8], trusted: &[PublicKey]) -> Result<PolicySet, BundleError> {
    if !is_bundle(bytes) {
        return Err(BundleError::Unsigned);
    }
    let header = bytes.get(..HEADER).ok_or(BundleError::Truncated)?;
    let version = header
        .get(8..12)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or(BundleError::Truncated)?;
    if version != BUNDLE_VERSION {
        return Err(BundleError::UnknownFormat(version));
    }
    let id = header.get(12..20).ok_or(BundleError::Truncated)?;
    let signature = header
        .get(20..84)
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .map(|b| ed25519_dalek::Signature::from_bytes(&b))
        .ok_or(BundleError::Truncated)?;
    let artifact = bytes.get(HEADER..).ok_or(BundleError::Truncated)?;
    let key = trusted
        .iter()
        .find(|k| k.id_bytes().as_slice() == id)
        .ok_or_else(|| BundleError::UntrustedKey(hex(id)))?;
    let mut message = Vec::with_capacity(CONTEXT.len() + artifact.len());
    message.extend_from_slice(CONTEXT);
    message.extend_from_slice(artifact);
    key.0
        .verify_strict(&message, &signature)
        .map_err(|_| BundleError::BadSignature(key.id()))?;
    PolicySet::from_artifact(artifact).map_err(BundleError::Artifact)
}

/// Loads compiled bytes the way every gatehouse program does: with trusted
/// keys, only a bundle that [`verify`] accepts; without, a bundle (its
/// signature unchecked) or a bare artifact.
pub fn load(bytes: &[u8], trusted: &[PublicKey]) -> Result<PolicySet, BundleError> {
    if !trusted.is_empty() {
        return verify(bytes, trusted);
    }
    let artifact = if is_bundle(bytes) {
        bytes.get(HEADER..).ok_or(BundleError::Truncated)?
    } else {
        bytes
    };
    PolicySet::from_artifact(artifact).map_err(BundleError::Artifact)
}

/// The id of the key that signed a bundle (unverified), for messages.
pub fn signer_id(bytes: &[u8]) -> Option<String> {
    is_bundle(bytes)
        .then(|| bytes.get(12..20).map(hex))
        .flatten()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn bundle() -> (Keypair, Vec<u8>, PolicySet) {
        let set = PolicySet::from_source(
            "p.policy",
            "policy p {\n  network {\n    allow domain github.com\n  }\n}\n",
        )
        .unwrap();
        let key = Keypair::generate().unwrap();
        let b = key.sign(&set.to_artifact().unwrap());
        (key, b, set)
    }

    #[test]
    fn round_trip_and_key_files() {
        let (key, b, set) = bundle();
        let again = Keypair::parse(&key.to_text()).unwrap();
        let public = PublicKey::parse(&key.public().to_text()).unwrap();
        assert_eq!(again.public(), public);
        assert_eq!(verify(&b, &[public]).unwrap().revision(), set.revision());
        assert!(PublicKey::parse(&key.to_text()).is_err());
        assert!(Keypair::parse(&key.public().to_text()).is_err());
        assert!(PublicKey::parse("gatehouse-public-key-v1:zz").is_err());
    }

    #[test]
    fn every_refusal_says_why() {
        let (key, b, set) = bundle();
        let trusted = [key.public()];
        // Unsigned: a bare artifact, or policy text.
        assert_eq!(
            verify(&set.to_artifact().unwrap(), &trusted).err(),
            Some(BundleError::Unsigned)
        );
        assert_eq!(
            verify(b"policy p { network off }", &trusted).err(),
            Some(BundleError::Unsigned)
        );
        // Another key.
        let other = Keypair::generate().unwrap();
        assert!(matches!(
            verify(&b, &[other.public()]),
            Err(BundleError::UntrustedKey(_))
        ));
        // Another key's signature under the trusted id.
        let mut forged = other.sign(&set.to_artifact().unwrap());
        forged[12..20].copy_from_slice(&b[12..20]);
        assert!(matches!(
            verify(&forged, &trusted),
            Err(BundleError::BadSignature(_))
        ));
        // Any byte changed: signature, id, artifact.
        for i in [20, 50, HEADER, HEADER + 30, b.len() - 1] {
            let mut t = b.clone();
            t[i] ^= 0x40;
            assert!(verify(&t, &trusted).is_err(), "byte {i}");
        }
        for n in [0, 8, 20, HEADER - 1, b.len() - 1] {
            assert!(verify(&b[..n], &trusted).is_err(), "{n} bytes");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(verify(&longer, &trusted).is_err());
        // No trusted key at all: nothing verifies.
        assert!(verify(&b, &[]).is_err());
    }
}
