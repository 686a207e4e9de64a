//! Digests, in one place: policy revisions, artifact checksums and the
//! egress daemon's change detection all use this.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
