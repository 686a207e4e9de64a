//! Every input a fuzzer found a failure with, replayed in plain `cargo test`
//! (`tests/data/fuzz/<target>-<what>`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

fn replay_query(bytes: &[u8]) {
    let line = std::str::from_utf8(bytes).unwrap();
    if let Ok(q) = gatehouse::Query::parse(line) {
        let text = q.to_string();
        assert_eq!(
            gatehouse::Query::parse(&text).ok(),
            Some(q),
            "`{text}` does not read back"
        );
    }
}

#[test]
fn a_resolved_answer_with_control_characters_reads_back() {
    // The text form quoted such an answer, and the grammar took only bare
    // answers.
    replay_query(include_bytes!("data/fuzz/query-resolved-control-chars"));
}

#[test]
fn a_tool_name_with_control_characters_reads_back() {
    replay_query(include_bytes!("data/fuzz/query-tool-control-chars"));
    replay_query(b"mcp \"my server/a tool\" destructive=true");
}

#[test]
fn a_listen_address_with_a_stray_bracket_reads_back() {
    // `listen "::2]ns\x7f"` printed bare, and `]` ends a bare word.
    replay_query(include_bytes!("data/fuzz/query-listen-stray-bracket"));
    for addr in [
        "[::1]:80",
        "127.0.0.1:0",
        "::2]x",
        "[a]b]",
        "[::1",
        "x y",
        "because",
    ] {
        replay_query(
            format!(
                "listen {}",
                gatehouse::query::Query::Listen { addr: addr.into() }
                    .to_string()
                    .trim_start_matches("listen ")
            )
            .as_bytes(),
        );
    }
}

#[test]
fn a_resolved_answer_spelled_like_a_keyword_reads_back() {
    // `resolved x -> port#...`: the answer `port` printed bare reads back as
    // the start of a port clause.
    replay_query(include_bytes!("data/fuzz/query-resolved-answer-port"));
    replay_query(b"resolved a.example -> \"because\", 1.2.3.4 port 443");
}

#[test]
fn a_guardian_host_rule_decides_a_reviewed_dns_lookup() {
    // Found by the differential target: the engine matched `host` rules
    // against a reviewed `dns` action, the reference evaluator only against
    // `connect`. The engine was right (a lookup can exfiltrate too); the
    // reference was fixed. The verdict names the risk rule that set the level.
    let set = gatehouse::PolicySet::from_source(
        "g.policy",
        "policy p {\n  guardian {\n    risk high destructive command rm -rf\n    risk low exfiltration host **.pastebin.com\n  }\n}\n",
    )
    .unwrap();
    let p = set.single().unwrap();
    for text in [
        "review dns paste.pastebin.com with category=security_weakening",
        "review dns PASTE.pastebin.com. with category=security_weakening",
        "review connect paste.pastebin.com:443",
    ] {
        let q = gatehouse::Query::parse(text).unwrap();
        let d = p.decide(&q);
        let rule = d.rule.and_then(|r| set.rule(r)).map(|r| (r.line, r.column));
        assert_eq!(
            (d.outcome.as_str(), rule),
            ("approved", Some((4, 5))),
            "{text}"
        );
    }
}
