//! Decoding inside a word: bash's ANSI-C quoting (`$'…'`) and brace
//! expansion (`a{b,c}`, `{1..3}`).

use super::{Ch, MAX_BRACE, Undecodable};

/// `$'…'` from `i` (after the opening quote): bash's ANSI-C quoting,
/// decoded into `out`; returns the index after the closing quote. A NUL
/// ends the string, as in bash.
pub(super) fn ansi_c(s: &[char], mut i: usize, out: &mut Vec<Ch>) -> Result<usize, Undecodable> {
    let mut ended = false;
    let mut push = |c: char, ended: &mut bool| {
        if c == '\0' {
            *ended = true;
        }
        if !*ended {
            out.push((c, true));
        }
    };
    loop {
        match s.get(i) {
            None => return Err(Undecodable),
            Some('\'') => return Ok(i + 1),
            Some('\\') => {
                i += 1;
                let Some(&e) = s.get(i) else {
                    return Err(Undecodable);
                };
                i += 1;
                let simple = match e {
                    'a' => Some('\x07'),
                    'b' => Some('\x08'),
                    'e' | 'E' => Some('\x1b'),
                    'f' => Some('\x0c'),
                    'n' => Some('\n'),
                    'r' => Some('\r'),
                    't' => Some('\t'),
                    'v' => Some('\x0b'),
                    '\\' | '\'' | '"' | '?' => Some(e),
                    _ => None,
                };
                if let Some(c) = simple {
                    push(c, &mut ended);
                    continue;
                }
                let (radix, max) = match e {
                    '0'..='7' => (8, 3),
                    'x' => (16, 2),
                    'u' => (16, 4),
                    'U' => (16, 8),
                    'c' => {
                        // A control character: \cx.
                        let Some(&x) = s.get(i) else {
                            return Err(Undecodable);
                        };
                        i += 1;
                        let code = (x.to_ascii_uppercase() as u32) & 0x1f;
                        push(char::from_u32(code).unwrap_or('\0'), &mut ended);
                        continue;
                    }
                    _ => {
                        push('\\', &mut ended);
                        push(e, &mut ended);
                        continue;
                    }
                };
                let mut value: u32 = 0;
                let mut digits = 0;
                if radix == 8 {
                    value = e.to_digit(8).unwrap_or(0);
                    digits = 1;
                }
                while digits < max {
                    match s.get(i).and_then(|d| d.to_digit(radix)) {
                        Some(d) => {
                            value = value.saturating_mul(radix).saturating_add(d);
                            digits += 1;
                            i += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    // `\x` with no digit stays as written.
                    push('\\', &mut ended);
                    push(e, &mut ended);
                    continue;
                }
                if radix == 8 || e == 'x' {
                    // One byte; bash writes a byte above 0x7f raw, which is
                    // no character of a UTF-8 word: read it as U+FFFD.
                    let byte = value & 0xff;
                    push(
                        char::from_u32(if byte < 0x80 { byte } else { 0xfffd })
                            .unwrap_or('\u{fffd}'),
                        &mut ended,
                    );
                } else {
                    push(char::from_u32(value).unwrap_or('\u{fffd}'), &mut ended);
                }
            }
            Some(&c) => {
                push(c, &mut ended);
                i += 1;
            }
        }
    }
}

/// Bash's brace expansion of a word: `a{b,c}d` is `abd acd`, `{1..3}` is
/// `1 2 3`, `{a..c}` is `a b c`; quoted characters take no part. `None`
/// when it would make more than [`MAX_BRACE`] words.
pub(super) fn brace_expand(chars: &[Ch]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    expand_into(chars, &mut out)?;
    Some(out)
}

fn expand_into(chars: &[Ch], out: &mut Vec<String>) -> Option<()> {
    // The first `{` that opens a valid expansion.
    let mut from = 0;
    while let Some(open) = chars
        .iter()
        .skip(from)
        .position(|&(c, q)| c == '{' && !q)
        .map(|p| p + from)
    {
        if let Some((close, items)) = brace_items(chars, open) {
            let pre = chars.get(..open).unwrap_or_default();
            let post = chars.get(close + 1..).unwrap_or_default();
            for item in items {
                let mut w: Vec<Ch> = pre.to_vec();
                w.extend(item);
                w.extend_from_slice(post);
                expand_into(&w, out)?;
                if out.len() > MAX_BRACE {
                    return None;
                }
            }
            return Some(());
        }
        from = open + 1;
    }
    out.push(chars.iter().map(|(c, _)| c).collect());
    (out.len() <= MAX_BRACE).then_some(())
}

/// The items of the brace group opened at `open`, and where it closes:
/// comma-separated alternatives or a sequence; `None` when it is neither.
fn brace_items(chars: &[Ch], open: usize) -> Option<(usize, Vec<Vec<Ch>>)> {
    let mut depth = 0usize;
    let mut commas = Vec::new();
    let mut close = None;
    for (k, &(c, q)) in chars.iter().enumerate().skip(open) {
        if q {
            continue;
        }
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    close = Some(k);
                    break;
                }
            }
            ',' if depth == 1 => commas.push(k),
            _ => {}
        }
    }
    let close = close?;
    let inner = chars.get(open + 1..close)?;
    if commas.is_empty() {
        return sequence(inner).map(|items| (close, items));
    }
    let mut items = Vec::new();
    let mut start = open + 1;
    for k in commas.into_iter().chain(std::iter::once(close)) {
        items.push(chars.get(start..k)?.to_vec());
        start = k + 1;
    }
    Some((close, items))
}

/// `x..y` or `x..y..step` of integers or single letters.
fn sequence(inner: &[Ch]) -> Option<Vec<Vec<Ch>>> {
    if inner.iter().any(|&(_, q)| q) {
        return None;
    }
    let text: String = inner.iter().map(|(c, _)| c).collect();
    let parts: Vec<&str> = text.split("..").collect();
    let (a, b, step) = match parts.as_slice() {
        [a, b] => (*a, *b, 1i64),
        [a, b, s] => (*a, *b, s.parse::<i64>().ok()?.checked_abs()?.max(1)),
        _ => return None,
    };
    let quoted = |s: String| s.chars().map(|c| (c, false)).collect::<Vec<Ch>>();
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let n = (x.abs_diff(y) / step.unsigned_abs()) + 1;
        if n > MAX_BRACE as u64 {
            return Some(vec![Vec::new(); MAX_BRACE + 1]);
        }
        let width = if [a, b].iter().any(|s| {
            s.trim_start_matches('-').starts_with('0') && s.trim_start_matches('-').len() > 1
        }) {
            a.len().max(b.len())
        } else {
            0
        };
        let mut v = Vec::new();
        let mut k = x;
        for _ in 0..n {
            let s = if k < 0 && width > 0 {
                format!("-{:0w$}", k.unsigned_abs(), w = width.saturating_sub(1))
            } else {
                format!("{k:0width$}")
            };
            v.push(quoted(s));
            k = if x <= y { k + step } else { k - step };
        }
        return Some(v);
    }
    let (mut ca, mut cb) = (a.chars(), b.chars());
    match (ca.next(), ca.next(), cb.next(), cb.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (x, y) = (x as u32, y as u32);
            let mut v = Vec::new();
            let mut k = x;
            loop {
                v.push(quoted(char::from_u32(k)?.to_string()));
                if k == y {
                    break;
                }
                let s = u32::try_from(step).ok()?;
                k = if x < y {
                    if k + s > y {
                        break;
                    }
                    k + s
                } else {
                    if k < y + s {
                        break;
                    }
                    k - s
                };
            }
            Some(v)
        }
        _ => None,
    }
}
