//! The oracle for `read` and `write` (docs/language.md#file-rules), read
//! straight off the reference: every rule is tried against every prefix of
//! the path as a string, globs through a byte regex built here — nothing of
//! the engine's segment matcher.

use gatehouse::testing::ast::*;

use super::{RefDecision, RefPolicy, d};

/// Absolute and NUL-free, then lexically normalised (a stack of segments;
/// `..` at the root stays at the root).
fn normal(p: &str) -> Option<String> {
    if !p.starts_with('/') || p.contains('\0') {
        return None;
    }
    let mut stack: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        if seg == ".." {
            stack.pop();
        } else if !seg.is_empty() && seg != "." {
            stack.push(seg);
        }
    }
    Some(format!("/{}", stack.join("/")))
}

/// Rule access, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Access {
    None,
    Read,
    Write,
}

struct Rule {
    access: Access,
    text: String,
    at: u32,
}

/// `text` anchored: `/x`, `~/x` against the home, else against the root.
/// `None` when it is a home rule and no home is bound.
fn anchored(text: &str, root: &str, home: Option<&str>) -> Option<String> {
    let (base, rest) = if text.starts_with('/') {
        ("", text)
    } else if text == "~" || text.starts_with("~/") {
        (home?, &text[1..])
    } else {
        (root, text)
    };
    let segs: Vec<&str> = base
        .split('/')
        .chain(rest.split('/'))
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    Some(format!("/{}", segs.join("/")))
}

fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// A byte regex for an anchored glob: `**` segments any number of
/// segments, `*` any bytes but `/`, `?` one, classes as written.
fn regex_of(anchored: &str) -> regex_automata::meta::Regex {
    let mut re = String::from("^");
    for seg in anchored.split('/').filter(|s| !s.is_empty()) {
        if seg == "**" {
            re.push_str("(?:/[^/]+)*");
            continue;
        }
        re.push('/');
        let b = seg.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'*' => {
                    re.push_str("[^/]*");
                    i += 1;
                }
                b'?' => {
                    re.push_str("[^/]");
                    i += 1;
                }
                b'[' => {
                    // Members up to the first `]` that is not first.
                    let mut j = i + 1;
                    let neg = j < b.len() && (b[j] == b'!' || b[j] == b'^');
                    if neg {
                        j += 1;
                    }
                    let start = j;
                    if j < b.len() && b[j] == b']' {
                        j += 1;
                    }
                    while b[j] != b']' {
                        j += 1;
                    }
                    let members = &b[start..j];
                    let mut set = vec![false; 256];
                    let mut k = 0;
                    while k < members.len() {
                        if k + 2 < members.len() && members[k + 1] == b'-' {
                            for c in members[k]..=members[k + 2] {
                                set[c as usize] = true;
                            }
                            k += 3;
                        } else {
                            set[members[k] as usize] = true;
                            k += 1;
                        }
                    }
                    let alts: Vec<String> = (0..256usize)
                        .filter(|c| set[*c] != neg)
                        .map(|c| format!("\\x{c:02x}"))
                        .collect();
                    if alts.is_empty() {
                        re.push_str("[^\\x00-\\xff]");
                    } else {
                        re.push_str(&format!("(?:{})", alts.join("|")));
                    }
                    i = j + 1;
                }
                c => {
                    re.push_str(&format!("\\x{c:02x}"));
                    i += 1;
                }
            }
        }
    }
    re.push('$');
    regex_automata::meta::Builder::new()
        .syntax(
            regex_automata::util::syntax::Config::new()
                .unicode(false)
                .utf8(false),
        )
        .build(&re)
        .unwrap()
}

/// The path and each of its ancestors, as strings (`/` is `""`).
fn prefixes(path: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut cur = String::new();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        cur.push('/');
        cur.push_str(seg);
        out.push(cur.clone());
    }
    out
}

fn depth(p: &str) -> usize {
    p.split('/').filter(|s| !s.is_empty()).count()
}

impl RefPolicy<'_> {
    fn file_rules(&self) -> (Vec<Rule>, Vec<String>, bool) {
        let mut rules = Vec::new();
        let mut protect = vec![".git".to_string(), ".agents".into(), ".zerocode".into()];
        let mut no_tmp = false;
        for k in self.sections() {
            if let SectionKind::Sandbox(s) = k {
                for st in s.block.iter().flatten() {
                    let (access, v, span) = match st {
                        SandboxStmt::Writable(v, sp) => (Access::Write, v, sp),
                        SandboxStmt::Read(v, sp) => (Access::Read, v, sp),
                        SandboxStmt::None(v, sp) => (Access::None, v, sp),
                        SandboxStmt::Protect(v, _) => {
                            protect.extend(v.iter().map(|x| x.node.clone()));
                            continue;
                        }
                        SandboxStmt::Exclude(v, _) => {
                            no_tmp |= v.iter().any(|x| x.node == "/tmp");
                            continue;
                        }
                    };
                    for x in v {
                        rules.push(Rule {
                            access,
                            text: x.node.clone(),
                            at: span.start,
                        });
                    }
                }
            }
        }
        (rules, protect, no_tmp)
    }

    /// (access, the deciding rule, whether it was the `/` base).
    fn access(&self, path: &str, root: &str, home: Option<&str>) -> (Access, Option<u32>, bool) {
        let write_mode = self.sandbox() == SandboxMode::WorkspaceWrite;
        let (rules, _, no_tmp) = self.file_rules();
        let prefixes = prefixes(path);
        let covers_literal = |p: &str| {
            prefixes
                .iter()
                .any(|x| x == p || (p == "/" && x.is_empty()))
        };
        // (depth, access, rule, base)
        let mut lits: Vec<(usize, Access, Option<u32>, bool)> = vec![(0, Access::Read, None, true)];
        let implicit = if write_mode {
            Access::Write
        } else {
            Access::Read
        };
        if covers_literal(root) {
            lits.push((depth(root), implicit, None, false));
        }
        if write_mode && !no_tmp && covers_literal("/tmp") {
            lits.push((1, Access::Write, None, false));
        }
        for r in rules.iter().filter(|r| !is_glob(&r.text)) {
            let Some(a) = anchored(&r.text, root, home) else {
                continue;
            };
            if covers_literal(&a) {
                let access = if write_mode {
                    r.access
                } else {
                    r.access.min(Access::Read)
                };
                lits.push((depth(&a), access, Some(r.at), false));
            }
        }
        let top = lits.iter().map(|l| l.0).max().unwrap();
        let (_, mut access, mut rule, mut base) = *lits
            .iter()
            .filter(|l| l.0 == top)
            .min_by_key(|l| l.1)
            .unwrap();
        for r in rules.iter().filter(|r| is_glob(&r.text)) {
            let Some(a) = anchored(&r.text, root, home) else {
                continue;
            };
            let re = regex_of(&a);
            if r.access < access && prefixes.iter().any(|p| re.is_match(p.as_bytes())) {
                (access, rule, base) = (r.access, Some(r.at), false);
            }
        }
        (access, rule, base)
    }

    pub fn read(&self, path: &str, root: &str, home: Option<&str>) -> RefDecision {
        let Some(path) = normal(path) else {
            return d("deny", "invalid_path", None);
        };
        if self.sandbox() == SandboxMode::DangerFullAccess {
            return d("allow", "unsandboxed", None);
        }
        let Some(root) = normal(root) else {
            return d("deny", "invalid_path", None);
        };
        let home = home.and_then(normal);
        match self.access(&path, &root, home.as_deref()) {
            (Access::None, rule, _) => {
                self.prompt(PromptCategory::SandboxApproval, "no_access", rule)
            }
            (_, rule, _) => d("allow", "readable", rule),
        }
    }

    pub fn write(&self, path: &str, root: &str, home: Option<&str>) -> RefDecision {
        let Some(path) = normal(path) else {
            return d("deny", "invalid_path", None);
        };
        let untrusted = self.approvals() == ApprovalMode::Untrusted;
        let r = match self.sandbox() {
            SandboxMode::DangerFullAccess => return d("allow", "unsandboxed", None),
            SandboxMode::ReadOnly => {
                self.prompt(PromptCategory::SandboxApproval, "read_only_sandbox", None)
            }
            SandboxMode::WorkspaceWrite => {
                let Some(root) = normal(root) else {
                    return d("deny", "invalid_path", None);
                };
                let home = home.and_then(normal);
                self.workspace_write(&path, &root, home.as_deref())
            }
        };
        if untrusted && r.outcome == "allow" {
            d("ask", "untrusted", None)
        } else {
            r
        }
    }

    fn workspace_write(&self, path: &str, root: &str, home: Option<&str>) -> RefDecision {
        let sandbox = |reason, rule| self.prompt(PromptCategory::SandboxApproval, reason, rule);
        match self.access(path, root, home) {
            (Access::None, rule, _) => return sandbox("no_access", rule),
            (Access::Read, rule, true) => return sandbox("outside_writable_roots", rule),
            (Access::Read, rule, false) => return sandbox("read_only_path", rule),
            (Access::Write, ..) => {}
        }
        let (rules, protect, no_tmp) = self.file_rules();
        let mut roots = vec![root.to_string()];
        if !no_tmp {
            roots.push("/tmp".into());
        }
        for r in rules
            .iter()
            .filter(|r| r.access == Access::Write && !is_glob(&r.text))
        {
            roots.extend(anchored(&r.text, root, home));
        }
        for r in &roots {
            let r = r.trim_end_matches('/');
            if path == r || path.starts_with(&format!("{r}/")) {
                let first = path[r.len()..]
                    .trim_start_matches('/')
                    .split('/')
                    .next()
                    .unwrap_or("");
                if protect.iter().any(|p| p.eq_ignore_ascii_case(first)) {
                    return sandbox("protected_path", None);
                }
                // Spec §9 (2026-12-06): `.git/hooks/**` and `.git/config` of
                // a repository at any depth below the root.
                let segs: Vec<&str> = path[r.len()..].trim_start_matches('/').split('/').collect();
                for w in segs.windows(2) {
                    let nested = w[0].eq_ignore_ascii_case(".git")
                        && (w[1].eq_ignore_ascii_case("hooks")
                            || (w[1].eq_ignore_ascii_case("config") && segs.last() == Some(&w[1])));
                    if nested {
                        return sandbox("protected_path", None);
                    }
                }
            }
        }
        let (_, rule, _) = self.access(path, root, home);
        d("allow", "writable_root", rule)
    }
}
