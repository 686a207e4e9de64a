//! Signed bundles: a compiled artifact with an Ed25519 signature, for a
//! fleet that receives its policies from a file server, an object store or
//! a CDN and must trust only what its owner signed (docs/bundles.md).
//!
//! Layout (integers little-endian), format 2:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GHBUNDL\0` |
//! | 4 | bundle format version ([`BUNDLE_VERSION`]) |
//! | 8 | key id: the first 8 bytes of the SHA-256 of the public key |
//! | 8 | serial: a number that only grows from one signing to the next |
//! | 64 | Ed25519 signature of `gatehouse bundle v2\0`, the serial, then the artifact |
//! | n | the artifact ([`crate::artifact`]), with its own checksum |
//!
//! The serial is signed, so a bundle server cannot change it; a program
//! that has accepted a bundle refuses any with a smaller serial
//! ([`not_older`]): a server that need not be trusted cannot roll a fleet
//! back to an older, more permissive bundle that the same key once signed.
//! [`Keypair::sign`] takes the serial from the clock (milliseconds since
//! 1970, and always above the last one this process signed);
//! [`Keypair::sign_serial`] takes it as given. Format 1 bundles (no serial)
//! still verify, with serial 0: older than any format 2 bundle.
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
/// The bundle format this build writes (it reads format 1 too).
pub const BUNDLE_VERSION: u32 = 2;
const CONTEXT_V1: &[u8] = b"gatehouse bundle v1\0";
const CONTEXT: &[u8] = b"gatehouse bundle v2\0";
const HEADER_V1: usize = 8 + 4 + 8 + 64;
const HEADER: usize = 8 + 4 + 8 + 8 + 64;
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
    /// A bundle older than one already accepted: never rolled back to.
    #[error(
        "the bundle's serial {offered} is older than serial {newest}, already accepted: a bundle is never rolled back"
    )]
    Rollback {
        /// The serial of the bundle offered.
        offered: u64,
        /// The newest serial accepted before.
        newest: u64,
    },
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

    /// `artifact` signed: a bundle, its serial taken from the clock
    /// (milliseconds since 1970), and above the last one this process
    /// signed.
    pub fn sign(&self, artifact: &[u8]) -> Vec<u8> {
        self.sign_serial(artifact, next_serial())
    }

    /// `artifact` signed with the given serial: a bundle.
    pub fn sign_serial(&self, artifact: &[u8], serial: u64) -> Vec<u8> {
        let signature = self.0.sign(&message(serial, artifact));
        let mut out = Vec::with_capacity(HEADER + artifact.len());
        out.extend_from_slice(BUNDLE_MAGIC);
        out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
        out.extend_from_slice(&self.public().id_bytes());
        out.extend_from_slice(&serial.to_le_bytes());
        out.extend_from_slice(&signature.to_bytes());
        out.extend_from_slice(artifact);
        out
    }
}

/// What a format 2 signature covers.
fn message(serial: u64, artifact: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(CONTEXT.len() + 8 + artifact.len());
    m.extend_from_slice(CONTEXT);
    m.extend_from_slice(&serial.to_le_bytes());
    m.extend_from_slice(artifact);
    m
}

/// The clock in milliseconds since 1970, and above every serial this
/// process handed out before (two signings in one millisecond differ).
fn next_serial() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The serial written in a bundle (0 for format 1), unverified: read it
/// after [`verify`] accepted the bytes. `None` for bytes that are not a
/// bundle of a known format.
pub fn serial(bytes: &[u8]) -> Option<u64> {
    if !is_bundle(bytes) {
        return None;
    }
    match bytes.get(8..12).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(v) if u32::from_le_bytes(v) == 1 => Some(0),
        Some(v) if u32::from_le_bytes(v) == BUNDLE_VERSION => bytes
            .get(20..28)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes),
        _ => None,
    }
}

/// Refuses a bundle whose serial is below `newest`, the newest serial
/// accepted before (a bundle of the same serial passes: it is the same
/// signing, or one its owner chose to number alike). Bytes that are not a
/// bundle have no serial and pass: [`verify`] decides about them.
pub fn not_older(bytes: &[u8], newest: u64) -> Result<(), BundleError> {
    match serial(bytes) {
        Some(offered) if offered < newest => Err(BundleError::Rollback { offered, newest }),
        _ => Ok(()),
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
    let version = bytes
        .get(8..12)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or(BundleError::Truncated)?;
    let (header, serial) = match version {
        1 => (HEADER_V1, None),
        BUNDLE_VERSION => (
            HEADER,
            Some(
                bytes
                    .get(20..28)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(u64::from_le_bytes)
                    .ok_or(BundleError::Truncated)?,
            ),
        ),
        other => return Err(BundleError::UnknownFormat(other)),
    };
    let head = bytes.get(..header).ok_or(BundleError::Truncated)?;
    let id = head.get(12..20).ok_or(BundleError::Truncated)?;
    let signature = head
        .get(header - 64..header)
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .map(|b| ed25519_dalek::Signature::from_bytes(&b))
        .ok_or(BundleError::Truncated)?;
    let artifact = bytes.get(header..).ok_or(BundleError::Truncated)?;
    let key = trusted
        .iter()
        .find(|k| k.id_bytes().as_slice() == id)
        .ok_or_else(|| BundleError::UntrustedKey(hex(id)))?;
    let message = match serial {
        Some(n) => message(n, artifact),
        None => [CONTEXT_V1, artifact].concat(),
    };
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
    let artifact = match serial(bytes) {
        Some(_) if bytes.get(8..12) == Some(&1u32.to_le_bytes()[..]) => {
            bytes.get(HEADER_V1..).ok_or(BundleError::Truncated)?
        }
        Some(_) => bytes.get(HEADER..).ok_or(BundleError::Truncated)?,
        None if is_bundle(bytes) => {
            return Err(BundleError::UnknownFormat(
                bytes
                    .get(8..12)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(0, u32::from_le_bytes),
            ));
        }
        None => bytes,
    };
    PolicySet::from_artifact(artifact).map_err(BundleError::Artifact)
}

/// Why [`open`] refused a policy file's bytes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Neither UTF-8 policy text nor compiled bytes.
    #[error("neither policy text (UTF-8) nor a compiled artifact")]
    NotPolicy,
    /// A compiled artifact or bundle refused (tampered, foreign, unsigned
    /// where a key is trusted, another format version), or text where a key
    /// is trusted.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// Policy text that does not build: every diagnostic, rendered with the
    /// file's name.
    #[error("{0}")]
    Compile(Box<crate::Error>),
}

/// A policy file's bytes, whatever they hold, the way every gatehouse
/// program reads them: a signed bundle or a compiled artifact (by their
/// magic), else UTF-8 policy text compiled under the name `name`. With
/// trusted keys only a bundle one of them signed is accepted — never text,
/// never a bare artifact (docs/bundles.md).
///
/// ```
/// let set = gatehouse::bundle::open("p.policy", b"policy p {\n  network off\n}\n".to_vec(), &[])?;
/// let again = gatehouse::bundle::open("p.gha", set.to_artifact()?, &[])?;
/// assert_eq!(set.revision(), again.revision());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(name: &str, bytes: Vec<u8>, trusted: &[PublicKey]) -> Result<PolicySet, OpenError> {
    let compiled = bytes.starts_with(crate::artifact::MAGIC) || is_bundle(&bytes);
    if compiled || !trusted.is_empty() {
        return Ok(load(&bytes, trusted)?);
    }
    let text = String::from_utf8(bytes).map_err(|_| OpenError::NotPolicy)?;
    let mut sources = crate::SourceMap::new();
    sources.add(name, text);
    PolicySet::from_sources(sources).map_err(|e| OpenError::Compile(Box::new(e)))
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

    /// The serial is signed, grows from one signing to the next, and a
    /// smaller one is a rollback (issue 35, finding 3); format 1 bundles
    /// still verify, with serial 0.
    #[test]
    fn serials_are_signed_and_never_roll_back() {
        let (key, b, set) = bundle();
        let trusted = [key.public()];
        let artifact = set.to_artifact().unwrap();
        let later = key.sign(&artifact);
        let (s1, s2) = (serial(&b).unwrap(), serial(&later).unwrap());
        assert!(s2 > s1 && s1 > 1_700_000_000_000, "{s1} {s2}");
        assert!(verify(&later, &trusted).is_ok());
        // The serial is covered by the signature.
        for i in 20..28 {
            let mut t = later.clone();
            t[i] ^= 1;
            assert!(
                matches!(verify(&t, &trusted), Err(BundleError::BadSignature(_))),
                "byte {i}"
            );
        }
        assert_eq!(not_older(&later, s1), Ok(()));
        assert_eq!(not_older(&b, s1), Ok(()));
        assert_eq!(
            not_older(&b, s2),
            Err(BundleError::Rollback {
                offered: s1,
                newest: s2
            })
        );
        assert_eq!(serial(&key.sign_serial(&artifact, 7)), Some(7));
        assert_eq!(
            not_older(&artifact, u64::MAX),
            Ok(()),
            "not a bundle: verify decides"
        );
        // Format 1: magic, version 1, key id, signature of the v1 context.
        let mut v1 = Vec::new();
        v1.extend_from_slice(BUNDLE_MAGIC);
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&key.public().id_bytes());
        let sig = key.0.sign(&[CONTEXT_V1, &artifact[..]].concat());
        v1.extend_from_slice(&sig.to_bytes());
        v1.extend_from_slice(&artifact);
        assert_eq!(verify(&v1, &trusted).unwrap().revision(), set.revision());
        assert_eq!(load(&v1, &[]).unwrap().revision(), set.revision());
        assert_eq!(serial(&v1), Some(0));
        assert!(not_older(&v1, s1).is_err());
    }
}
