//! Hosts, addresses and prefixes chosen to collide — names that are
//! suffixes of one another, addresses inside and outside the prefixes,
//! mapped, compatible and translated IPv6 — shared by the fuzzing
//! generators (`gatehouse::arbitrary`) and the property tests of `tests/`, so
//! that the two draw from one vocabulary (and explore it differently). Not
//! part of the API.

/// Domain names.
pub const NAMES: &[&str] = &[
    "example.com",
    "a.example.com",
    "b.a.example.com",
    "example.org",
    "localhost",
    "x.localhost",
    "com",
    "github.com",
    "api.github.com",
    "bücher.example",
    "xn--bcher-kva.example",
    "pastebin.com",
    "paste.pastebin.com",
];

/// Addresses, every one of which parses as an `IpAddr`.
pub const IPS: &[&str] = &[
    "10.0.0.1",
    "127.0.0.1",
    "169.254.169.254",
    "8.8.8.8",
    "93.184.215.14",
    "::1",
    "fd00::1",
    "2606:4700::1",
    "::ffff:8.8.8.8",
    "192.168.1.1",
    "64:ff9b::a00:1",
    "2002:808:808::1",
    "0.0.0.0",
    "::",
    "10.0.0.5",
    "::10.0.0.5",
    "::7f00:1",
    "::169.254.169.254",
];

/// Prefixes without host bits.
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "127.0.0.0/8",
    "8.8.8.0/24",
    "0.0.0.0/0",
    "fd00::/8",
    "2606:4700::/32",
    "::ffff:10.0.0.0/104",
    "::/0",
    "192.168.0.0/16",
    "8.0.0.0/7",
    "169.254.169.254/32",
    "::10.0.0.0/104",
];

/// A word partly quoted, as a shell removes the quotes again (`r'm'`,
/// `r"m"`, `r''m`, `r\m`, `'r'm`, `r""m` for `rm`): quoting `how` (0 to 5,
/// larger is 5) split after the `at`-th character (wrapping). Every form
/// reads as `word` with quote removal (docs/language.md#sandbox).
pub fn partly_quoted(word: &str, how: u8, at: usize) -> String {
    let cuts: Vec<usize> = word.char_indices().map(|(i, _)| i).skip(1).collect();
    let cut = match cuts.len() {
        0 => word.len(),
        n => cuts.get(at % n).copied().unwrap_or(word.len()),
    };
    let (a, b) = word.split_at_checked(cut).unwrap_or((word, ""));
    match how {
        0 => format!("{a}'{b}'"),
        1 => format!("{a}\"{b}\""),
        2 => format!("{a}''{b}"),
        3 => format!("{a}\\{b}"),
        4 => format!("'{a}'{b}"),
        _ => format!("{a}\"\"{b}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn partly_quoted_words_read_back_as_the_word() {
        for word in ["rm", "-rf", "git", "x", "/bin/rm", "--force"] {
            for how in 0..6 {
                for at in 0..4 {
                    let q = super::partly_quoted(word, how, at);
                    assert_ne!(q, word);
                    let shell = crate::eval::shell::script_words(&q);
                    assert!(shell.iter().any(|w| w == word), "{q}: {shell:?}");
                }
            }
        }
    }
}
