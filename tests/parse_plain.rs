//! The hand reader of plain `network` bodies (src/syntax/parse/plain.rs)
//! against the grammar: on every policy of the repository and on thousands
//! of mutations of their network blocks, parsing with the reader and
//! parsing with the grammar alone give the same AST, spans included, and
//! the same diagnostics, in the same order.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use gatehouse::source::FileId;
use gatehouse::testing::{parse_file, parse_file_by_grammar};

use crate::bless::repo;

/// Both parses of `text`, in a form that shows every span (`Span`'s
/// equality ignores them).
fn agree(text: &str) -> bool {
    let fast = parse_file(FileId(3), text);
    let slow = parse_file_by_grammar(FileId(3), text);
    format!("{fast:?}") == format!("{slow:?}")
}

fn policies() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![repo().join("policies"), repo().join("tests/data")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "policy") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    out.sort();
    out
}

/// Statements that exercise the reader's edges: each is spliced into a
/// network block as it is and after mutations.
const EDGES: &[&str] = &[
    "allow domain api.github.com",
    "allow domain *.example.com port 443",
    "deny domain **.evil.test port 1-1024, 8080 ,9000",
    "allow ip 10.0.0.5 port 22",
    "allow ip fd00::1",
    "allow ip 010.0.0.5",
    "allow ip 10.0.0.5/24",
    "allow ip fe80::1%eth0",
    "allow cidr 10.0.0.0/8 port 5432",
    "allow cidr 10.0.0.1/8",
    "allow cidr 10.0.0.0/33",
    "allow cidr 10.0.0.0/08",
    "allow cidr 10.0.0.0",
    "allow cidr fd00::/+8",
    "allow socket /var/run/docker.sock",
    "allow socket *",
    "deny socket * port 1",
    "default deny",
    "default allw",
    "dns off",
    "dns of",
    "local allow",
    "local allow extra",
    "allow domain a.com port 0",
    "allow domain a.com port 65536",
    "allow domain a.com port 080",
    "allow domain a.com port 9-1",
    "allow domain a.com port 443 80",
    "allow domain a.com port 443,",
    "allow domain a.com port ,443",
    "allow domain a.com port",
    "allow domain port port 443",
    "allow domain a.com,b.com",
    "allow domain a[1].com",
    "allow domain bücher.example",
    "allow domain a#b.com",
    "allow domain a.com # a comment; deny domain b.com",
    "allow domain a.com; deny domain b.com",
    "Allow domain a.com",
    "allow domian a.com",
    "allow domain",
    "allow",
    "alow domain a.com",
    "allow!domain a.com",
    "allow domain=a.com",
    "allow\tdomain\ta.com\tport\t443",
    "allow domain a.com port 1-2-3",
    "allow domain a.com port 443-",
    "allow domain a.com\u{c}",
    "allow domain a.com port 443 # trailing",
    "  ;; allow domain a.com ;",
];

/// The bytes a mutation inserts: separators, comment and string marks,
/// braces, list marks, blanks, digits, letters, a non-ASCII letter.
const INSERTS: &[&str] = &[
    " ", "\t", "\n", "\r", "\r\n", ";", "#", ",", "\"", "{", "}", "[", "]", "-", ".", "/", "*",
    "0", "9", ":", "x", "é", "\u{c}", "port", "allow", "domain", "cidr", "ip", "socket", "dns",
    "default", "local", "on", "r\"", "\\",
];

/// A small deterministic generator (xorshift), so that a failure is the
/// same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to three edits of `text` inside `[lo, hi)`: an insertion, a
/// deletion of a few bytes, or a word doubled.
fn mutate(text: &str, lo: usize, hi: usize, rng: &mut Rng) -> String {
    let mut s = text.to_string();
    let mut hi = hi;
    for _ in 0..1 + rng.below(3) {
        let mut at = lo + rng.below(hi - lo + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(3) {
            0 => {
                let ins = INSERTS[rng.below(INSERTS.len())];
                s.insert_str(at, ins);
                hi += ins.len();
            }
            1 => {
                let mut end = (at + 1 + rng.below(4)).min(hi);
                while !s.is_char_boundary(end) {
                    end += 1;
                }
                s.replace_range(at..end, "");
                hi -= end - at;
            }
            _ => {
                let word: String = s[at..].chars().take_while(|c| !c.is_whitespace()).collect();
                s.insert_str(at, &format!("{word} "));
                hi += word.len() + 1;
            }
        }
    }
    s
}

/// Where the first network block's braces are: `(after "{", at "}")`.
fn network_body(text: &str) -> Option<(usize, usize)> {
    let open = text.find("network {")? + "network {".len();
    let close = open + text[open..].find('}')?;
    Some((open, close))
}

#[test]
fn plain_reader_agrees_with_the_grammar_on_every_policy() {
    let all = policies();
    assert!(all.len() > 30, "{} policies found", all.len());
    let mut with_network = 0;
    for (path, text) in &all {
        assert!(agree(text), "{path}: the reader and the grammar differ");
        with_network += usize::from(network_body(text).is_some());
    }
    assert!(
        with_network > 10,
        "only {with_network} policies with a network block"
    );
}

#[test]
fn plain_reader_agrees_with_the_grammar_on_edge_statements() {
    for edge in EDGES {
        for text in [
            format!("policy p {{\n  network {{\n    {edge}\n  }}\n}}\n"),
            format!("policy p {{ network {{ default deny; {edge} }} }}"),
            format!(
                "policy p {{\n  network {{\n    allow domain x.test\n    {edge}\n    deny ip 10.1.1.1 # after\n  }}\n  commands {{ allow git }}\n}}\n"
            ),
        ] {
            assert!(agree(&text), "they differ on:\n{text}");
        }
    }
}

#[test]
fn plain_reader_agrees_with_the_grammar_on_mutated_network_blocks() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Each policy's first network block alone (a small file parses fast
    // in a debug build), then all of the edges in one block.
    let mut bases: Vec<String> = policies()
        .into_iter()
        .filter_map(|(_, t)| {
            let (lo, hi) = network_body(&t)?;
            Some(format!("policy p {{\n  network {{{}}}\n}}\n", &t[lo..hi]))
        })
        .collect();
    bases.push(format!(
        "policy p {{\n  network {{\n    {}\n  }}\n}}\n",
        EDGES.join("\n    ")
    ));
    let mut differ = Vec::new();
    let mut valid = 0;
    let runs = 2_500;
    for i in 0..runs {
        let base = &bases[i % bases.len()];
        let (lo, hi) = network_body(base).unwrap();
        let text = mutate(base, lo, hi, &mut rng);
        if !agree(&text) {
            differ.push(text);
        } else if parse_file(FileId(3), &text).1.is_empty() {
            valid += 1;
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {runs} mutations parse differently; the first:\n{}",
        differ.len(),
        differ[0]
    );
    // The mutations reach both sides: many stay valid, many do not.
    assert!(valid > runs / 10, "only {valid} stayed valid");
}
