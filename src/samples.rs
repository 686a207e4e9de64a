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
        // A trailing backslash is a literal backslash: escape a letter.
        3 if b.is_empty() => format!("\\{a}"),
        3 => format!("{a}\\{b}"),
        4 => format!("'{a}'{b}"),
        _ => format!("{a}\"\"{b}"),
    }
}

/// `commands` rules for generated policies (the generators of
/// `gatehouse::arbitrary` and the agent differential test share them).
pub const COMMAND_RULES: &[&str] = &[
    "allow git status",
    "prompt git push because \"publishing\"",
    "forbid rm -rf / because \"never\"",
    "allow [python3 python] -m pytest",
    "allow cargo",
    "forbid /usr/bin/git push --force because \"no\"",
    "prompt curl",
    "allow ls -la",
    "prompt sudo",
    "forbid env because \"no\"",
    "prompt timeout",
    "prompt curl because \"network\"",
    "prompt sudo because \"root\"",
    "forbid env because \"no environment games\"",
    "allow nice -n 5",
    "prompt cargo publish because \"releases\"",
    "allow sed -n",
    "allow /usr/bin/make",
];

/// `mcp` statements for generated policies.
pub const MCP_RULES: &[&str] = &[
    "server github auto",
    "server github prompt",
    "server slack approve",
    "tool github/delete_repo prompt",
    "tool slack/post approve",
    "server slack off",
    "tool github/delete_repo off",
    "server github approve_destructive",
    "tool github/delete_repo approve_destructive",
    "server github writes",
    "tool github/list writes",
];

/// `guardian` statements for generated policies.
pub const GUARDIAN: &[&str] = &[
    "risk critical exfiltration command ~ r\"curl\\s.*(-d|--data)\\b\"",
    "risk high credential_probing path \"**/.ssh/**\" \"**/.env\"",
    "risk high destructive command rm -rf",
    "risk medium security_weakening command ~ r\"chmod\\s+777\"",
    "risk high destructive tool github/delete_repo",
    "risk low exfiltration host **.pastebin.com",
    "deny category exfiltration",
    "deny command git push --force",
    "risk high destructive command sudo rm",
    "risk medium destructive command timeout",
    "risk critical destructive command bash -lc",
    "risk high destructive command ~ r\"rm\\s+-f\"",
    "deny command env",
    "deny tool */delete_repo",
    "risk medium destructive tool github/*",
    "allow medium",
    "allow low",
    "authorize high with high",
    "risk high destructive command ~ r\"rm\\s+-rf\"",
    "allow low medium",
    "authorize high with low",
];

/// Command-running wrappers with options and values (docs/language.md#sandbox).
pub const COMMAND_WRAPPERS: &[&str] = &[
    "sudo",
    "sudo -u root",
    "sudo --user root",
    "sudo --chdir /tmp",
    "sudo --command-timeout 5",
    "sudo -E",
    "/usr/bin/sudo",
    "doas",
    "doas -u root",
    "env",
    "env FOO=1",
    "env -i PATH=/bin",
    "timeout 5",
    "timeout -s KILL 5",
    "nice -n 5",
    "nohup",
    "ionice -c 3",
    "stdbuf -o0",
    "time",
    "command",
    "exec",
    "sudo --close-from 3",
    "nice",
];

/// Command tails that rules and the known-safe tables must judge.
pub const TAILS: &[&str] = &[
    "rm -rf x",
    "rm -f x",
    "rm x",
    "/bin/rm --force x",
    "ls -la",
    "git push --force",
    "git status",
    "find . -fprint=x",
    "rm --fo x",
    "cat /home/u/.ssh/./id_rsa",
];

/// Requirement sections (docs/language.md#requirements), one per generated `requirements` block:
/// every cap, every kind of joined rule, and domain allow lists of every
/// pattern form over the same names as the policies' rules, so that
/// coverage is tried in every combination.
pub const REQUIREMENTS: &[&str] = &[
    "network { default deny; local deny }",
    "network { dns off }",
    "network { deny domain **.pastebin.com }",
    "network { allow domain **.example.com }",
    "network { allow domain *.example.com }",
    "network { allow domain example.com; allow domain *.a.example.com }",
    "network { allow domain * }",
    "network { allow domain github.com; allow domain **.github.com }",
    "network { allow domain *.localhost; allow domain localhost }",
    "network { allow socket * }",
    "network { allow socket \"/tmp/a.sock\" }",
    "network { deny cidr 10.0.0.0/8; deny ip 8.8.8.8 }",
    "network { deny cidr ::/0 }",
    "network off",
    "proxy { socks5 off; listen loopback }",
    "proxy { socks5_udp off; upstream off }",
    "permissions { default deny; deny shell.exec }",
    "apps { deny firefox }",
    "commands { forbid rm -rf because \"managed\"; prompt sudo }",
    "guardian { deny command git push --force; deny category destructive }",
    "sandbox read-only",
    "sandbox workspace-write",
    "sandbox danger-full-access",
    "approvals never untrusted",
    "approvals on-request granular",
    "approvals untrusted on-request never",
    "reviewer auto_review user",
    "reviewer user",
    "approvals granular never",
    "approvals never",
    "reviewer auto_review",
    "commands { forbid git push because \"managed\" }",
    "commands { prompt cargo because \"managed\" }",
    "guardian { deny category destructive }",
    "guardian { deny command ls }",
    "approvals untrusted on-request never granular",
    "approvals never untrusted on-request",
    "reviewer user auto_review",
    "permissions { deny shell.exec }",
    "commands { forbid rm -rf because \"managed\" }",
    "commands { prompt sudo because \"managed\" }",
    "guardian { deny command git push --force }",
    "guardian { deny command sudo }",
    "guardian { deny category exfiltration }",
    "approvals on-request untrusted",
    "approvals on-request never",
];

#[cfg(test)]
mod tests {
    #[test]
    fn partly_quoted_words_read_back_as_the_word() {
        for word in ["rm", "-rf", "git", "x", "/bin/rm", "--force"] {
            for how in 0..6 {
                for at in 0..4 {
                    let q = super::partly_quoted(word, how, at);
                    assert_ne!(q, word);
                    let shell = crate::eval::words::texts(&q);
                    assert!(shell.iter().any(|w| w == word), "{q}: {shell:?}");
                }
            }
        }
    }
}
