//! Digests, in one place: policy revisions, artifact checksums and the
//! egress daemon's change detection all use this.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 as an [`std::io::Write`]: what is written is hashed, not kept.
#[derive(Default)]
pub(crate) struct Hasher(Sha256);

impl Hasher {
    /// The hex digest of everything written.
    pub(crate) fn hex(self) -> String {
        hex(&self.0.finalize())
    }
}

impl std::io::Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
