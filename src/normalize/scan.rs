//! The fast path of host normalisation: the common host name validated and
//! laid out for the domain automaton eight bytes at a time
//! (docs/performance.md explains it; `host.rs` holds the general path, which
//! decides everything this path leaves, and the tests that hold the two
//! together).

use super::host::MAX_NAME;

/// Up to eight bytes of `bytes` from `at` (`at + n` ≤ `bytes.len()`),
/// little-endian, zero-padded: one load, also near the end of the slice
/// (the last eight bytes, shifted), and a byte loop only for slices
/// shorter than a word.
#[inline(always)]
pub(crate) fn word(bytes: &[u8], at: usize, n: usize) -> u64 {
    let keep = u64::MAX.checked_shr(64 - 8 * n.min(8) as u32).unwrap_or(0);
    if let Some(w) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        return u64::from_le_bytes(*w) & keep;
    }
    if let Some(w) = bytes.last_chunk::<8>() {
        // `at` is within the last eight bytes.
        let past = (at + 8).saturating_sub(bytes.len()).min(7);
        return (u64::from_le_bytes(*w) >> (8 * past)) & keep;
    }
    let mut w = 0u64;
    for (i, b) in bytes.iter().skip(at).take(n.min(8)).enumerate() {
        w |= u64::from(*b) << (8 * i);
    }
    w
}

/// A normalised name laid out for the domain automaton: its bytes and a
/// bitmap of its dots, so that labels are found from the right without a
/// scan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Labels<'b> {
    pub bytes: &'b [u8],
    pub dots: [u64; 4],
}

impl Labels<'_> {
    /// Where the last dot before byte `end` is.
    #[inline(always)]
    pub fn dot_before(&self, end: usize) -> Option<usize> {
        let mut i = end / 64;
        let mut below = (1u64 << (end % 64)).wrapping_sub(1);
        loop {
            let w = self.dots.get(i).copied().unwrap_or(0) & below;
            if w != 0 {
                return Some(i * 64 + 63 - w.leading_zeros() as usize);
            }
            i = i.checked_sub(1)?;
            below = u64::MAX;
        }
    }

    /// Lays out a name the general path normalised (lower-case ASCII);
    /// `None` for a name longer than any normalised name.
    pub fn layout(name: &str) -> Option<Labels<'_>> {
        let bytes = name.as_bytes();
        let mut dots = [0u64; 4];
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'.' {
                *dots.get_mut(i / 64)? |= 1 << (i % 64);
            }
        }
        Some(Labels { bytes, dots })
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// One word of a host, eight bytes at once: the high bit of each byte of
/// `valid` (`a-z A-Z 0-9 - _ .`), `upper` and `dot`. Only meaningful for
/// ASCII bytes (the caller checks the high bits of `w` itself). For each
/// byte, `(byte | 0x80) - c` keeps its high bit exactly when the byte is at
/// least `c`, and no borrow crosses into the next byte.
#[inline(always)]
fn classify(w: u64) -> (u64, u64, u64) {
    let t = w | HI;
    let ge = |t: u64, c: u8| t.wrapping_sub(LO.wrapping_mul(u64::from(c)));
    // Letters of either case: `byte | 0x20` is in `a..=z` exactly for
    // `A..=Z` and `a..=z`.
    let folded = t | (LO * 0x20);
    let letter = ge(folded, b'a') & !ge(folded, b'{');
    let dot = ge(t, b'.') & !ge(t, b'/');
    let valid = (ge(t, b'-') & !ge(t, b'/'))
        | (ge(t, b'0') & !ge(t, b':'))
        | letter
        | (ge(t, b'_') & !ge(t, b'`'));
    // Upper case: a letter without its 0x20 bit (moved up to bit 7).
    let upper = letter & !(w << 2);
    (valid & HI, upper & HI, dot & HI)
}

/// The high bits of a word's bytes gathered into one byte (bit `j` for
/// byte `j`).
#[inline(always)]
fn gather(high: u64) -> u64 {
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// The bytes of a host the fast path takes, by class, as bitmaps (bit `j`
/// for byte `j` of the chunk): valid bytes, upper-case letters, dots.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
struct Classes {
    valid: u64,
    upper: u64,
    dot: u64,
}

/// Classifies the (up to) sixteen bytes `lo` then `hi` (little-endian),
/// sixteen at once with SSE2, which every x86-64 processor has. Bytes at or
/// above 0x80 are negative as `i8`, so they fall outside every class.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn classify16(lo: u64, hi: u64) -> Classes {
    use std::arch::x86_64::{
        _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set_epi64x, _mm_set1_epi8, _mm_setzero_si128,
    };
    let c = |b: u8| _mm_set1_epi8(b as i8);
    let x = _mm_set_epi64x(hi as i64, lo as i64);
    let within =
        |v, a: u8, z: u8| _mm_and_si128(_mm_cmpgt_epi8(v, c(a - 1)), _mm_cmplt_epi8(v, c(z + 1)));
    // Letters of either case: `byte | 0x20` is in `a..=z` exactly for
    // `A..=Z` and `a..=z`.
    let letter = within(_mm_or_si128(x, c(0x20)), b'a', b'z');
    let dot = _mm_cmpeq_epi8(x, c(b'.'));
    let valid = _mm_or_si128(
        _mm_or_si128(letter, within(x, b'0', b'9')),
        _mm_or_si128(
            dot,
            _mm_or_si128(_mm_cmpeq_epi8(x, c(b'-')), _mm_cmpeq_epi8(x, c(b'_'))),
        ),
    );
    let upper = _mm_and_si128(
        letter,
        _mm_cmpeq_epi8(_mm_and_si128(x, c(0x20)), _mm_setzero_si128()),
    );
    let mask = |v| u64::from(_mm_movemask_epi8(v) as u16);
    Classes {
        valid: mask(valid),
        upper: mask(upper),
        dot: mask(dot),
    }
}

/// [`classify16`] eight bytes at a time with plain integer operations: the
/// path of every other target, and the oracle the SSE2 path is tested
/// against.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline(always)]
fn classify16_swar(lo: u64, hi: u64) -> Classes {
    let bits = |w: u64| {
        let (valid, upper, dot) = classify(w);
        // Non-ASCII bytes are in no class.
        let ascii = !w & HI;
        (
            gather(valid & ascii),
            gather(upper & ascii),
            gather(dot & ascii),
        )
    };
    let (v0, u0, d0) = bits(lo);
    let (v1, u1, d1) = bits(hi);
    Classes {
        valid: v0 | (v1 << 8),
        upper: u0 | (u1 << 8),
        dot: d0 | (d1 << 8),
    }
}

/// The classifier of this target.
#[inline(always)]
fn classes(lo: u64, hi: u64) -> Classes {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[allow(unsafe_code)]
    // SAFETY: `classify16` needs SSE2. This call is compiled only where the
    // whole build enables SSE2 (`cfg(target_feature = "sse2")`), as every
    // x86-64 target does by default: part of the x86-64 baseline, every
    // x86-64 processor has it. Builds without it take the integer path.
    unsafe {
        classify16(lo, hi)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        classify16_swar(lo, hi)
    }
}

/// The fast path's scan: the common host (ASCII letters, digits, `-`, `_`
/// and dots; at most one trailing dot; labels of 1–63 octets; a last label
/// that does not start with a digit), sixteen bytes at a time: every byte
/// validated and every dot noted, without a branch or a store per byte.
/// Returns the name's length without the trailing dot, whether it has upper
/// case, and the bitmap of its dots; `None` sends the host to the general
/// path, which decides (and words the error) exactly as before.
#[inline]
pub(super) fn fast_scan(input: &str) -> Option<(usize, bool, [u64; 4])> {
    fast_scan_with(input, classes)
}

/// [`fast_scan`] with a given classifier (the tests hold the two
/// classifiers' scans to each other).
#[inline(always)]
fn fast_scan_with(
    input: &str,
    classify: impl Fn(u64, u64) -> Classes,
) -> Option<(usize, bool, [u64; 4])> {
    let bytes = input.as_bytes();
    let bytes = bytes.strip_suffix(b".").unwrap_or(bytes);
    let len = bytes.len();
    // A host ending in a digit or a bracket (an address, most likely) goes
    // straight to the general path: the scan would refuse it at its end.
    if len == 0
        || len > MAX_NAME
        || bytes
            .last()
            .is_some_and(|b| b.is_ascii_digit() || *b == b']')
    {
        return None;
    }
    let (bad, upper, d0) = scan_block(bytes, len, 0, &classify);
    let (bad, upper, dots) = if len <= 64 {
        (bad, upper, [d0, 0, 0, 0])
    } else {
        let (b1, u1, d1) = scan_block(bytes, len, 64, &classify);
        let (b2, u2, d2) = scan_block(bytes, len, 128, &classify);
        let (b3, u3, d3) = scan_block(bytes, len, 192, &classify);
        (bad | b1 | b2 | b3, upper | u1 | u2 | u3, [d0, d1, d2, d3])
    };
    fast_scan_tail(bytes, len, upper != 0, dots, bad)
}

/// Sixty-four bytes of `bytes[..len]` from `base`, sixteen at a time: the
/// bitmaps of their invalid bytes, upper-case letters and dots. The dots
/// are returned in a register: a bitmap built in memory piece by piece
/// stalls the wider reads that follow.
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
fn scan_block(
    bytes: &[u8],
    len: usize,
    base: usize,
    classify: &impl Fn(u64, u64) -> Classes,
) -> (u64, u64, u64) {
    let whole = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(<[u8]>::first_chunk::<8>)
            .map_or(0, |w| u64::from_le_bytes(*w))
    };
    let (mut bad, mut upper, mut dot) = (0u64, 0u64, 0u64);
    let end = len.min(base + 64);
    let mut at = base;
    while at < end {
        let n = end - at;
        let (c, inside) = if n >= 16 {
            (classify(whole(at), whole(at + 8)), 0xffff)
        } else {
            let lo = word(bytes, at, n.min(8));
            let hi = if n > 8 { word(bytes, at + 8, n - 8) } else { 0 };
            (classify(lo, hi), (1u64 << n) - 1)
        };
        let shift = at - base;
        bad |= (!c.valid & inside) << shift;
        upper |= (c.upper & inside) << shift;
        dot |= (c.dot & inside) << shift;
        at += 16;
    }
    (bad, upper, dot)
}

/// The checks of [`fast_scan`] that need the whole name's dots.
#[inline(always)]
fn fast_scan_tail(
    bytes: &[u8],
    len: usize,
    upper: bool,
    dots: [u64; 4],
    bad: u64,
) -> Option<(usize, bool, [u64; 4])> {
    if bad != 0 {
        return None;
    }
    // No dot first or last, no two dots together (an empty label).
    let [d0, d1, d2, d3] = dots;
    let adjacent = (d0 & (d0 << 1))
        | (d1 & ((d1 << 1) | (d0 >> 63)))
        | (d2 & ((d2 << 1) | (d1 >> 63)))
        | (d3 & ((d3 << 1) | (d2 >> 63)));
    let labels = Labels { bytes, dots };
    let last_dot = labels.dot_before(len);
    if adjacent != 0 || d0 & 1 != 0 || last_dot == Some(len - 1) {
        return None;
    }
    // Labels of at most 63 octets (only a longer name can have one).
    if len > 63 {
        let mut end = len;
        loop {
            let start = labels.dot_before(end).map_or(0, |d| d + 1);
            if end - start > 63 {
                return None;
            }
            if start == 0 {
                break;
            }
            end = start - 1;
        }
    }
    // A last label starting with a digit may be numeric: the general path.
    let first = last_dot.map_or(0, |d| d + 1);
    if bytes.get(first).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some((len, upper, dots))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halves(x: [u8; 16]) -> (u64, u64) {
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = x;
        (
            u64::from_le_bytes([a, b, c, d, e, f, g, h]),
            u64::from_le_bytes([i, j, k, l, m, n, o, p]),
        )
    }

    /// The SSE2 classifier (on x86-64) against the integer one, which
    /// every other target uses: every byte value at every position, among
    /// bytes of each class.
    #[test]
    fn the_classifiers_agree_on_every_byte_in_every_position() {
        for fill in [b'a', b'Z', b'.', b'0', b'-', b'_', b'@', 0x80, 0xff] {
            for b in 0..=255u8 {
                for pos in 0..16 {
                    let mut x = [fill; 16];
                    if let Some(slot) = x.get_mut(pos) {
                        *slot = b;
                    }
                    let (lo, hi) = halves(x);
                    assert_eq!(
                        classes(lo, hi),
                        classify16_swar(lo, hi),
                        "byte {b:#04x} at {pos} among {fill:#04x}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_classifiers_agree_on_random_chunks(lo: u64, hi: u64) {
            proptest::prop_assert_eq!(classes(lo, hi), classify16_swar(lo, hi));
        }

        #[test]
        fn the_scans_agree_on_random_hosts(
            parts in proptest::collection::vec(0usize..40, 0..300)
        ) {
            const ALPHABET: &[u8] = b"abcxyzABCXYZ0123456789-_.....\x00 :[]@/*%#?\x7f";
            let s: String = parts
                .iter()
                .filter_map(|&i| ALPHABET.get(i % ALPHABET.len()))
                .map(|&b| char::from(b))
                .collect();
            proptest::prop_assert_eq!(fast_scan(&s), fast_scan_with(&s, classify16_swar));
        }
    }
}
