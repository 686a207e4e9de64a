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

/// The fast path's scan: the common host (ASCII letters, digits, `-`, `_`
/// and dots; at most one trailing dot; labels of 1–63 octets; a last label
/// that does not start with a digit), eight bytes at a time: every byte
/// validated and every dot noted, without a branch or a store per byte.
/// Returns the name's length without the trailing dot, whether it has upper
/// case, and the bitmap of its dots; `None` sends the host to the general
/// path, which decides (and words the error) exactly as before.
#[inline]
pub(super) fn fast_scan(input: &str) -> Option<(usize, bool, [u64; 4])> {
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
    let (mut bad, mut upper_any) = (0u64, 0u64);
    let mut dots = [0u64; 4];
    let mut step = |at: usize, w: u64, inside: u64| -> Option<()> {
        let (valid, upper, dot) = classify(w);
        bad |= (w | !valid) & inside;
        upper_any |= upper & inside;
        *dots.get_mut(at / 64)? |= gather(dot & inside) << (at % 64);
        Some(())
    };
    // Whole words, then the last few bytes.
    let mut at = 0;
    while let Some(w) = bytes
        .get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
    {
        step(at, u64::from_le_bytes(w), HI)?;
        at += 8;
    }
    if at < len {
        let n = len - at;
        step(at, word(bytes, at, n), HI & ((1u64 << (8 * n)) - 1))?;
    }
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
    Some((len, upper_any != 0, dots))
}
