//! The words of an unknown script (spec §9 step 1), read here with the
//! oracle's own code, not the engine's.

/// Spec §9 step 1, written out for the oracle (the engine's reader is
/// `gatehouse::testing::script_words`): the words of an unknown script, read
/// loosely (split at blanks, quotes, backslashes and punctuation, so quoted
/// words show) and with quote removal (as the shell reads a word), in the
/// order they start, each (start, word) once.
pub(crate) fn script_words(script: &str) -> Vec<String> {
    let chars: Vec<(usize, char)> = script.char_indices().collect();
    let punct = |c: char| "`$(){}[]<>;&|!#=".contains(c) || c.is_whitespace();
    // (start, reading, word)
    let mut all: Vec<(usize, u8, String)> = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for &(i, c) in &chars {
        if punct(c) || "'\"\\".contains(c) {
            if let Some((s, w)) = cur.take() {
                all.push((s, 0, w));
            }
        } else {
            cur.get_or_insert((i, String::new())).1.push(c);
        }
    }
    if let Some((s, w)) = cur.take() {
        all.push((s, 0, w));
    }
    let mut k = 0;
    let mut cur: Option<(usize, String)> = None;
    while k < chars.len() {
        let (i, c) = chars[k];
        k += 1;
        if punct(c) {
            if let Some((s, w)) = cur.take() {
                all.push((s, 1, w));
            }
            continue;
        }
        let w = &mut cur.get_or_insert((i, String::new())).1;
        if c == '\'' {
            while k < chars.len() && chars[k].1 != '\'' {
                w.push(chars[k].1);
                k += 1;
            }
            k += 1;
        } else if c == '"' {
            while k < chars.len() && chars[k].1 != '"' {
                let x = chars[k].1;
                let next = chars.get(k + 1).map(|p| p.1);
                if x == '\\' && matches!(next, Some('$' | '`' | '"' | '\\')) {
                    w.push(next.unwrap());
                    k += 2;
                } else if x == '\\' && next == Some('\n') {
                    k += 2;
                } else {
                    w.push(x);
                    k += 1;
                }
            }
            k += 1;
        } else if c == '\\' {
            if k < chars.len() {
                if chars[k].1 != '\n' {
                    w.push(chars[k].1);
                }
                k += 1;
            }
        } else {
            w.push(c);
        }
    }
    if let Some((s, w)) = cur.take() {
        all.push((s, 1, w));
    }
    all.retain(|x| !x.2.is_empty());
    all.sort_by_key(|x| (x.0, x.1));
    all.dedup_by(|b, a| a.0 == b.0 && a.2 == b.2);
    all.into_iter().map(|x| x.2).collect()
}
