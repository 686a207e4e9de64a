use super::*;

fn t(s: &str) -> Vec<String> {
    read(s)
        .into_iter()
        .map(|w| match w {
            Word::Text(t) => t,
            Word::Opaque => "<opaque>".to_string(),
        })
        .collect()
}

fn opaque(s: &str) -> bool {
    read(s).contains(&Word::Opaque)
}

/// `needle` shows in `hay` in order (not necessarily adjacent).
fn shows(hay: &[String], needle: &[&str]) -> bool {
    let mut it = hay.iter();
    needle.iter().all(|n| it.any(|h| h == n))
}

#[test]
fn quote_removal_at_the_top() {
    assert_eq!(t("r'm' -rf x > /dev/null"), ["rm", "-rf", "x", "/dev/null"]);
    assert_eq!(t("g'it' push"), ["git", "push"]);
    assert_eq!(t("rm -r'f'"), ["rm", "-rf"]);
    assert_eq!(t("r\"m\" r''m r\\m"), ["rm", "rm", "rm"]);
    assert_eq!(t("$'\\x72m' $'r\\155'"), ["rm", "rm"]);
    assert_eq!(t("''"), [""]);
    assert_eq!(t(""), Vec::<String>::new());
}

#[test]
fn one_quote_deeper() {
    // The spellings: every one shows `rm -rf` or `git push`.
    for (s, want) in [
        (
            "bash -lc \"r'm' -rf x\" > /dev/null",
            &["rm", "-rf", "x"][..],
        ),
        ("echo \"$(g'it' push)\"", &["git", "push"]),
        ("bash -lc \"g'it' push\" > /dev/null", &["git", "push"]),
        ("bash -lc \"rm -r'f' x\" &", &["rm", "-rf"]),
        ("bash -lc \"r''m -rf x\" > y", &["rm", "-rf"]),
        ("bash -lc 'r\"m\" -rf x' > y", &["rm", "-rf"]),
        ("bash -lc 'r\\m -rf x' > y", &["rm", "-rf"]),
        ("sh -c \"r'm' -rf x\" > y", &["rm", "-rf"]),
        ("zsh -c \"r'm' -rf x\" > y", &["rm", "-rf"]),
        ("dash -c \"r'm' -rf x\"", &["rm", "-rf"]),
        ("./bash -c \"r'm' -rf x\"", &["rm", "-rf"]),
        ("/tmp/bash -c \"g'it' push\"", &["git", "push"]),
        ("coproc bash -lc \"r'm' -rf x\"", &["rm", "-rf"]),
        ("{ bash -lc \"r'm' -rf x\"; }", &["rm", "-rf"]),
        ("x=$(bash -c \"r'm' -rf x\")", &["rm", "-rf"]),
        (
            "bash -lc \"bash -lc \\\"rm -rf x\\\"\"",
            &["rm", "-rf", "x"],
        ),
        ("bash -lc \"r\\\\m -rf x\"", &["rm", "-rf", "x"]),
        (
            "bash -lc \"bash -lc \\\"r'm' -rf x\\\" > /dev/null\" > /dev/null",
            &["rm", "-rf"],
        ),
        ("echo `g'it' push`", &["git", "push"]),
        ("echo \"`g\\\"i\\\"t push`\"", &["git", "push"]),
        ("cat <(r'm' -rf x)", &["rm", "-rf"]),
        ("{r,}m -rf x", &["rm", "-rf"]),
        ("{rm,-rf,x}", &["rm", "-rf", "x"]),
        ("echo ${x:-$(g'it' push)}", &["git", "push"]),
    ] {
        let w = t(s);
        assert!(shows(&w, want), "{s}: {w:?}");
        assert!(!opaque(s), "{s}: {w:?}");
    }
}

#[test]
fn what_cannot_be_decoded_is_opaque() {
    for s in [
        "echo 'open",
        "echo \"open",
        "echo $(open",
        "echo `open",
        "$X -rf /",
        "${X} push",
        "$(echo rm) -rf x",
        "`echo rm` -rf x",
        "a=1 $X",
        "eval \"$y\"",
        "x; eval r m",
        "cat <<EOF\nrm -rf x\nEOF",
        "bash -c \"$X\"",
        "sudo $X",
        "env FOO=1 $(echo rm) -rf /",
        "bash -lc \"echo 'unbalanced\"",
        "bash -lc \"\\$X -rf /\"",
    ] {
        assert!(opaque(s), "{s}: {:?}", t(s));
    }
}

#[test]
fn what_is_only_an_argument_is_not_opaque() {
    for s in [
        "git commit -m \"don't\" > x",
        "awk '$1 > 5' data > out",
        "echo $HOME > x",
        "echo \"$(date)\" >> log",
        "find . -name '*.rs' > list",
        "echo \"cout << 'a b'\" > x",
        "jq '.[] | $x' f > y",
        "grep -E 'a$' f 2>&1",
        "echo 'x' # it's a comment",
        "cat <<< \"rm -rf x\"",
    ] {
        assert!(!opaque(s), "{s}: {:?}", t(s));
    }
    // A here-string's text still shows its words.
    assert!(shows(&t("bash <<< \"rm -rf x\""), &["rm", "-rf"]));
}

#[test]
fn brace_expansion() {
    assert_eq!(t("a{b,c}d"), ["abd", "acd"]);
    assert_eq!(t("x{1..3}"), ["x1", "x2", "x3"]);
    assert_eq!(t("{a..c}"), ["a", "b", "c"]);
    assert_eq!(t("{01..03}"), ["01", "02", "03"]);
    assert_eq!(t("{5..1..2}"), ["5", "3", "1"]);
    assert_eq!(t("'{a,b}'"), ["{a,b}", "a", "b"]);
    assert_eq!(t("{a}"), ["{a}"]);
    assert_eq!(t("a{,b}"), ["a", "ab"]);
    assert_eq!(t("{a,{b,c}}"), ["a", "b", "c"]);
    assert!(opaque("{1..100000}"));
    assert!(opaque("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"));
}

#[test]
fn fds_comments_and_assignments() {
    assert_eq!(t("2>/dev/null rm -rf x"), ["/dev/null", "rm", "-rf", "x"]);
    assert_eq!(t("ls # rm -rf x"), ["ls"]);
    assert_eq!(t("a#b"), ["a#b"]);
    // `$X` after an assignment but not in command position is no command.
    assert!(!opaque("X=1 ls $X"));
    assert!(opaque("X=1 $X"));
}

#[test]
fn bounded_on_hostile_input() {
    let deep = "\"$(".repeat(5000);
    assert!(opaque(&deep));
    let nested = (0..20).fold("rm -rf x".to_string(), |s, _| format!("echo $({s})"));
    assert!(opaque(&nested));
    let many = "a ".repeat(MAX_WORDS + 10);
    let w = read(&many);
    assert_eq!(w.len(), MAX_WORDS + 1);
    assert_eq!(w.last(), Some(&Word::Opaque));
    for s in [
        "$'\\", "$'\\c", "$'\\x", "\\", "{", "}", "${", "$((", "<(", "a=(", "'",
    ] {
        let _ = read(s);
    }
}
