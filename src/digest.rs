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

/// A hasher for maps built from a policy's own rules while checking and
/// compiling (FxHash's multiply-rotate): the keys are the author's, so
/// there is no adversary to resist, and SipHash was a tenth of `check` and
/// of `compile` on large policies. Never for maps keyed by what a query
/// or the network brings.
#[derive(Clone, Copy, Default)]
pub(crate) struct FastHash;

pub(crate) struct FastHasher(u64);

impl std::hash::BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}
