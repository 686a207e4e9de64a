//! Policy bombs: the parser's entry point and `policyc check` / `fmt`
//! report each with its code, never a crash.

/// The bombs of the browser tests (wasm/tests/hostile.test.mjs), through the
/// library's parser entry point and through `policyc check` and `policyc
/// fmt`: each gets its diagnostic, in one run, with no stack overflow.
fn bombs() -> Vec<(String, &'static str)> {
    let braces = "{".repeat(20_000);
    vec![
        (
            format!("policy p {{\n  network {{\n    allow domain x.example {braces}\n  }}\n}}\n"),
            "too_deeply_nested",
        ),
        (
            format!(
                "policy p {{\n  guardian {{\n    deny command ~ r\"a\\\";{braces}\"\n  }}\n}}\n"
            ),
            "too_deeply_nested",
        ),
        (
            format!("policy p {{ network {{ allow domain \"ar\" {braces}\n}} }}\n"),
            "too_deeply_nested",
        ),
        (
            format!("policy p {{ network {{ allow domain \"x {braces}\n}} }}\n"),
            "too_deeply_nested",
        ),
        (
            "# padding\n".repeat(9 * 1024 * 1024 / 10 + 1),
            "source_too_large",
        ),
    ]
}

#[test]
fn the_parser_entry_point_enforces_the_limits() {
    for (text, code) in bombs() {
        let (file, diags) = gatehouse::testing::parse_file(gatehouse::source::FileId(0), &text);
        assert!(file.items.is_empty());
        let got: Vec<_> = diags.iter().map(|d| d.code).collect();
        assert_eq!(got, [code]);
        let mut map = gatehouse::source::SourceMap::new();
        let id = map.add("bomb.policy", text.as_str());
        let src = map.get(id).unwrap();
        match gatehouse::fmt::format_source(id, src) {
            Err(gatehouse::fmt::FormatError::Syntax(d)) => {
                assert_eq!(d.iter().map(|d| d.code).collect::<Vec<_>>(), [code]);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn policyc_check_and_fmt_report_the_bombs() {
    let dir = std::env::temp_dir().join(format!("gatehouse-bombs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (text, code)) in bombs().into_iter().enumerate() {
        let path = dir.join(format!("bomb{i}.policy"));
        std::fs::write(&path, &text).unwrap();
        for cmd in ["check", "fmt"] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_policyc"))
                .args([cmd, path.to_str().unwrap()])
                .output()
                .unwrap();
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            assert_eq!(o.status.code(), Some(1), "{cmd} {i}: {all}");
            assert!(all.contains(&format!("error[{code}]")), "{cmd} {i}: {all}");
            assert!(
                !all.contains("overflow") && !all.contains("panicked"),
                "{all}"
            );
        }
        // `fmt` left the file as it was.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
