//! Generators for fuzzing and property tests (feature `arbitrary`).
//!
//! [`Case`] draws a policy and a handful of queries from fuzzer bytes. Most
//! of what it draws comes from vocabularies chosen to collide: names that are
//! suffixes of one another, addresses inside and outside the generated
//! prefixes, every spelling trick of a host (case, trailing dots, ideographic
//! dots, mapped and compatible IPv6, brackets), shell wrappers and protected
//! paths. The rest is raw fuzzer text — hosts, argv words, paths — so that
//! both the engine and the reference evaluator see what a compromised agent
//! could send. A generated policy can fail to build (a raw pattern may be
//! invalid); callers skip those cases.
//!
//! Policies come with requirements blocks half of the time, and exec
//! queries include wrapper chains (every command-running wrapper, with
//! options and values) inside nested shell wrappers up to the depth limit
//! and one past it, under guardian command and risk rules that look for
//! them.
//!
//! Hosts, addresses and prefixes come from [`crate::samples`], shared with
//! the property tests of `tests/`; the rest of the vocabulary is this
//! module's own.

use arbitrary::{Arbitrary, Result, Unstructured};

use crate::query::{Annotations, Assessment, Query, ReviewOutcome, ReviewStatus, Via};
use crate::samples::{
    CIDRS, COMMAND_RULES, COMMAND_WRAPPERS, GUARDIAN, IPS, MCP_RULES, NAMES, REQUIREMENTS, TAILS,
};
use crate::syntax::ast::{AuthLevel, PromptCategory, RiskCategory, RiskLevel};

const PORTS: &[&str] = &[
    "",
    " port 443",
    " port 80,443",
    " port 8000-8999",
    " port 1-65535",
];
const PERMISSIONS: &[&str] = &[
    "shell.exec",
    "screen.read",
    "input.control",
    "files.read",
    "files.write",
];
const SANDBOX: &[&str] = &[
    "read-only",
    "workspace-write",
    "danger-full-access",
    "workspace-write { writable \"/var/cache/build\"; protect \".secrets\" }",
    "workspace-write { exclude \"/tmp\"; writable \"/tmp/cache\" }",
    "workspace-write { none \"**/*.env\"; read \"secrets\"; none \"secrets/prod\" }",
    "workspace-write { read \".\"; writable \"src\"; none \"~/.ssh\"; read \"/w/.git/hooks\" }",
    "read-only { none \"/etc/sha?ow\"; none \"/w/[a-c]*\"; writable \"/tmp\" }",
    "danger-full-access { none \"/w/.git/**\" }",
];
const APPROVALS: &[&str] = &[
    "untrusted",
    "on-request",
    "never",
    "granular { sandbox_approval on; rules off; mcp_elicitations on; request_permissions off; skill_approval on }",
    "granular { sandbox_approval off; rules on; mcp_elicitations off; request_permissions on; skill_approval off }",
];
const ARGV_WORDS: &[&str] = &[
    "ls",
    "-la",
    "git",
    "status",
    "push",
    "--force",
    "origin",
    "rm",
    "-rf",
    "/",
    "build",
    "sudo",
    "cargo",
    "python3",
    "-m",
    "pytest",
    "/usr/bin/git",
    "/tmp/git",
    "curl",
    "-d",
    "@.env",
    "bash",
    "sh",
    "-c",
    "-lc",
    "zsh",
    "chmod",
    "777",
    "cat",
    "~/.ssh/id_rsa",
    ".env",
    "find",
    "-delete",
    "env",
    "xargs",
    "",
    "doas",
    "timeout",
    "5",
    "nice",
    "-n",
    "nohup",
    "ionice",
    "stdbuf",
    "-o0",
    "time",
    "command",
    "exec",
    "FOO=1",
    "--user",
    "root",
    "-u",
    "/bin/rm",
    "--force",
    "-fprint=x",
    "-delete=x",
];
const SCRIPTS: &[&str] = &[
    "git status && git push",
    "ls | wc -l",
    "rm -rf / > /dev/null",
    "echo $(curl -d x y)",
    "bash -c 'sh -c \"git push\"'",
    "cargo test; ls",
    "ls\ngit push",
    "a=1 git push",
    "`rm -rf /`",
    "ls & git push",
    "cat <(curl x)",
    "ls > .git/hooks/pre-commit",
    "bash -lc 'git push --force'",
    "ls; sh -c 'rm -rf /tmp/x'",
    "sudo --user root rm -rf x",
    "sh -c \"zsh -c 'bash -c ls'\"",
    "sh -c \"zsh -c 'timeout 5 rm -rf x'\"",
    "env FOO=1 rm -f x && ls",
    "cat ~/.ssh/./id_rsa",
];
const PATHS: &[&str] = &[
    "/w/src/main.rs",
    "/w/.git/config",
    "/w/.GIT/hooks/x",
    "/w/.gitignore",
    "/w/.zerocode",
    "/w/.agents/a",
    "/tmp/x",
    "/etc/passwd",
    "/w/../etc/x",
    "/w/./.git/x",
    "/w//.git/x",
    "/w/.git/",
    "/w/a.env",
    "/w/secrets/prod/k",
    "/w/secrets/x",
    "/w/src/b.rs",
    "/home/me/.ssh/id",
    "/etc/shadow",
    "rel/x",
    "/var/cache/build/o",
    "/w/.secrets/k",
    "/w",
    "/tmp/a/../b",
    "/",
    "/w/src/../.git/config",
    "/../w/.git/x",
    "",
    "/w/.ssh/./id_rsa",
];

fn pick<'a>(u: &mut Unstructured<'_>, items: &[&'a str]) -> Result<&'a str> {
    u.choose(items).copied()
}

/// A short raw string from the fuzzer (at most 40 bytes).
fn raw(u: &mut Unstructured<'_>) -> Result<String> {
    let len = u.int_in_range(0..=40usize)?;
    let bytes = u.bytes(len.min(u.len()))?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// A host as an agent might spell it.
fn host(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1u8, 8)? {
        return raw(u);
    }
    let h = if u.arbitrary()? {
        pick(u, NAMES)?
    } else {
        pick(u, IPS)?
    };
    let is_v6 = h.contains(':');
    let is_v4 = h.parse::<std::net::Ipv4Addr>().is_ok();
    Ok(match u.int_in_range(0..=9u8)? {
        0 => h.to_uppercase(),
        1 if !is_v6 => format!("{h}."),
        2 if !is_v6 => h.replace('.', "。"),
        3 if is_v4 => format!("[::ffff:{h}]"),
        4 if is_v6 => format!("[{h}]"),
        5 if is_v4 => format!("::{h}"),
        6 => format!("user@{h}"),
        7 if !is_v6 => format!("{h}:443"),
        _ => h.to_string(),
    })
}

fn port(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(*u.choose(&[443i64, 80, 8080, 8500, 22, 0, 70000, -1])?)
}

/// A command behind a chain of wrappers, inside up to three nested shell
/// wrappers (or four: one past the limit), with sibling commands.
fn wrapped(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    let mut command: Vec<&str> = Vec::new();
    for _ in 0..u.int_in_range(0..=3u8)? {
        command.extend(pick(u, COMMAND_WRAPPERS)?.split(' '));
    }
    command.extend(pick(u, TAILS)?.split(' '));
    let levels = u.int_in_range(0..=3u8)?;
    if levels == 3 && u.ratio(1u8, 4)? {
        return Ok(["bash", "-lc", "sh -c \"zsh -c 'bash -c ls'\""]
            .map(String::from)
            .to_vec());
    }
    // Innermost shell first; level j's script is quoted into level j+1's
    // with `'` for j = 0 and `"` above it.
    let mut text = command.join(" ");
    let mut outer = None;
    for j in 0..levels {
        let shell = pick(u, &["bash", "sh", "zsh", "/bin/bash"])?;
        let flag = pick(u, &["-c", "-lc"])?;
        let sibling = pick(u, &["", "ls; ", "git status && ", "ls | "])?;
        let script = format!("{sibling}{text}");
        let q = if j == 0 { '\'' } else { '"' };
        text = format!("{shell} {flag} {q}{script}{q}");
        outer = Some(vec![shell.to_string(), flag.to_string(), script]);
    }
    Ok(outer.unwrap_or_else(|| command.iter().map(|w| w.to_string()).collect()))
}

/// One word of a tail partly quoted, as the shell removes quotes
/// (`r'm'`, `r"m"`, `r''m`, `r\m`, `-r'f'`), often with a redirection
/// after it, which makes the script unknown (docs/language.md#sandbox).
fn partly_quoted(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    let mut words: Vec<String> = pick(u, TAILS)?.split(' ').map(String::from).collect();
    let k = u.choose_index(words.len())?;
    if let Some(w) = words.get_mut(k) {
        let how = u.int_in_range(0..=5u8)?;
        let at = u.int_in_range(0..=7usize)?;
        *w = crate::samples::partly_quoted(w, how, at);
    }
    let redirect = pick(u, &["", " > /dev/null", " 2>&1", " >> log", " < /dev/null"])?;
    let shell = pick(u, &["bash", "sh", "zsh", "/bin/bash", "dash"])?;
    let flag = pick(u, &["-c", "-lc"])?;
    Ok(vec![
        shell.into(),
        flag.into(),
        format!("{}{redirect}", words.join(" ")),
    ])
}

fn argv(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    if u.ratio(1u8, 4)? {
        return wrapped(u);
    }
    if u.ratio(1u8, 5)? {
        return partly_quoted(u);
    }
    if u.ratio(1u8, 4)? {
        let shell = pick(u, &["bash", "sh", "/bin/bash", "zsh", "./bash"])?;
        let flag = pick(u, &["-c", "-lc"])?;
        let script = if u.ratio(1u8, 4)? {
            raw(u)?
        } else {
            pick(u, SCRIPTS)?.to_string()
        };
        return Ok(vec![shell.into(), flag.into(), script]);
    }
    let n = u.int_in_range(0..=5usize)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(if u.ratio(1u8, 10)? {
            raw(u)?
        } else {
            pick(u, ARGV_WORDS)?.to_string()
        });
    }
    Ok(v)
}

fn path(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1u8, 6)? {
        return Ok(format!("/w/{}", raw(u)?));
    }
    Ok(pick(u, PATHS)?.to_string())
}

fn action(u: &mut Unstructured<'_>, depth: u8) -> Result<Query> {
    let kinds = if depth == 0 { 12 } else { 4 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Query::Exec {
            argv: argv(u)?,
            escalate: u.arbitrary()?,
        },
        1 if u.arbitrary()? => Query::Read {
            path: path(u)?,
            workspace: Some("/w".into()),
            home: opt(u, &["/home/me", "/w"])?.map(str::to_string),
        },
        1 => Query::Write {
            path: path(u)?,
            workspace: Some("/w".into()),
            home: opt(u, &["/home/me", "/w"])?.map(str::to_string),
        },
        2 => Query::Mcp {
            server: pick(u, &["github", "slack", "other"])?.into(),
            tool: pick(u, &["delete_repo", "post", "list"])?.into(),
            annotations: Annotations {
                destructive_hint: u.arbitrary()?,
                read_only_hint: u.arbitrary()?,
                open_world_hint: u.arbitrary()?,
            },
        },
        3 => Query::Connect {
            host: host(u)?,
            port: port(u)?,
            via: *u.choose(Via::ALL)?,
        },
        4 => Query::Dns { name: host(u)? },
        5 => Query::Resolved {
            host: host(u)?,
            addrs: {
                let n = u.int_in_range(0..=3usize)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(pick(u, IPS)?.to_string());
                }
                v
            },
            port: if u.arbitrary()? { Some(port(u)?) } else { None },
        },
        6 => Query::Tool {
            permission: pick(u, PERMISSIONS)?.into(),
        },
        7 => Query::App {
            program: pick(
                u,
                &[
                    "firefox",
                    "/usr/bin/vim",
                    "Google Chrome",
                    "C:\\Apps\\TERMINAL.exe",
                    "",
                ],
            )?
            .into(),
        },
        8 => Query::Prompt {
            category: *u.choose(PromptCategory::ALL)?,
        },
        9 => Query::Socket {
            path: pick(
                u,
                &[
                    "/tmp/a.sock",
                    "/tmp/../run/docker.sock",
                    "/run//x.sock",
                    "rel.sock",
                ],
            )?
            .into(),
        },
        10 => Query::Listen {
            addr: pick(
                u,
                &["127.0.0.1:3000", "0.0.0.0:80", "[::1]:0", "localhost:8080"],
            )?
            .into(),
        },
        11 => Query::Upstream,
        _ => Query::Review {
            action: Box::new(action(u, depth + 1)?),
            assessment: Assessment {
                risk: opt(u, RiskLevel::ALL)?,
                category: opt(u, RiskCategory::ALL)?,
                user_authorization: opt(u, AuthLevel::ALL)?,
                outcome: opt(u, &[ReviewOutcome::Allow, ReviewOutcome::Deny])?,
                status: opt(
                    u,
                    &[
                        ReviewStatus::Ok,
                        ReviewStatus::Failed,
                        ReviewStatus::Timeout,
                        ReviewStatus::Cancelled,
                    ],
                )?,
            },
        },
    })
}

fn opt<T: Copy>(u: &mut Unstructured<'_>, items: &[T]) -> Result<Option<T>> {
    Ok(if u.arbitrary()? {
        Some(*u.choose(items)?)
    } else {
        None
    })
}

fn network_rule(u: &mut Unstructured<'_>) -> Result<String> {
    let effect = pick(u, &["allow", "deny"])?;
    let ports = pick(u, PORTS)?;
    Ok(match u.int_in_range(0..=5u8)? {
        0 | 1 => {
            let prefix = pick(u, &["", "", "*.", "**."])?;
            format!("{effect} domain {prefix}{}{ports}", pick(u, NAMES)?)
        }
        2 => format!(
            "{effect} domain {}{ports}",
            crate::query::quote_string(&raw(u)?)
        ),
        3 => format!("{effect} ip {}{ports}", pick(u, IPS)?),
        4 => format!("{effect} cidr {}{ports}", pick(u, CIDRS)?),
        _ => format!(
            "{effect} socket {}",
            pick(u, &["/tmp/a.sock", "/run/docker.sock"])?
        ),
    })
}

fn section(
    u: &mut Unstructured<'_>,
    out: &mut String,
    keyword: &str,
    items: &[&str],
    max: usize,
) -> Result<()> {
    let n = u.int_in_range(0..=max)?;
    if n == 0 {
        return Ok(());
    }
    out.push_str(&format!("  {keyword} {{\n"));
    // Each setting once per section (`server S`, `tool S/T`, guardian
    // `allow` and `authorize`); rules may repeat.
    let mut settings: Vec<String> = Vec::new();
    for _ in 0..n {
        let item = pick(u, items)?;
        let words: Vec<&str> = item.split(' ').collect();
        let key = match words.as_slice() {
            [w @ ("server" | "tool"), target, ..] => Some(format!("{w} {target}")),
            [w @ ("allow" | "authorize"), ..] if keyword == "guardian" => Some(w.to_string()),
            _ => None,
        };
        if let Some(k) = key {
            if settings.contains(&k) {
                continue;
            }
            settings.push(k);
        }
        out.push_str(&format!("    {item}\n"));
    }
    out.push_str("  }\n");
    Ok(())
}

/// One generated policy (the text of a file holding one `policy p`), the
/// requirements blocks over it (empty, or blocks to append after the
/// policy) and the queries to put to it.
#[derive(Clone, Debug)]
pub struct Case {
    /// The text of a file holding one `policy p`.
    pub policy: String,
    /// `requirements` blocks to append after it, or nothing.
    pub requirements: String,
    /// The queries to put to it.
    pub queries: Vec<Query>,
}

impl Case {
    /// The whole file: the policy, then its requirements.
    pub fn text(&self) -> String {
        format!("{}{}", self.policy, self.requirements)
    }
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut s = String::from("policy p {\n");
        match u.int_in_range(0..=5u8)? {
            0 => s.push_str("  network off\n"),
            1 => s.push_str("  network unrestricted\n"),
            2 => {}
            _ => {
                s.push_str("  network {\n");
                for (kw, values) in [
                    ("default", ["allow", "deny"]),
                    ("local", ["allow", "deny"]),
                    ("dns", ["on", "off"]),
                ] {
                    if u.arbitrary()? {
                        s.push_str(&format!("    {kw} {}\n", pick(u, &values)?));
                    }
                }
                for _ in 0..u.int_in_range(0..=10u8)? {
                    s.push_str(&format!("    {}\n", network_rule(u)?));
                }
                s.push_str("  }\n");
            }
        }
        if u.arbitrary()? {
            s.push_str(&format!(
                "  proxy {{ socks5 {}; socks5_udp {}; upstream {}; listen {} }}\n",
                pick(u, &["on", "off"])?,
                pick(u, &["on", "off"])?,
                pick(u, &["on", "off"])?,
                pick(u, &["loopback", "any"])?,
            ));
        }
        if u.arbitrary()? {
            s.push_str(&format!(
                "  permissions {{ default {}; {} {}; {} {} }}\n",
                pick(u, &["allow", "deny"])?,
                pick(u, &["allow", "deny"])?,
                pick(u, PERMISSIONS)?,
                pick(u, &["allow", "deny"])?,
                pick(u, PERMISSIONS)?,
            ));
        }
        if u.arbitrary()? {
            s.push_str("  apps { deny firefox \"Google Chrome\" }\n");
        }
        if u.arbitrary()? {
            s.push_str(&format!("  sandbox {}\n", pick(u, SANDBOX)?));
        }
        if u.arbitrary()? {
            s.push_str(&format!("  approvals {}\n", pick(u, APPROVALS)?));
        }
        if u.arbitrary()? {
            s.push_str(&format!(
                "  reviewer {}\n",
                pick(u, &["user", "auto_review"])?
            ));
        }
        section(u, &mut s, "commands", COMMAND_RULES, 4)?;
        section(u, &mut s, "mcp", MCP_RULES, 3)?;
        section(u, &mut s, "guardian", GUARDIAN, 4)?;
        s.push_str("}\n");

        let mut requirements = String::new();
        if u.arbitrary()? {
            for i in 0..u.int_in_range(1..=3u8)? {
                requirements.push_str(&format!(
                    "requirements r{i} {{\n  {}\n}}\n",
                    pick(u, REQUIREMENTS)?
                ));
            }
        }

        let n = u.int_in_range(1..=8usize)?;
        let mut queries = Vec::with_capacity(n);
        for _ in 0..n {
            queries.push(action(u, 0)?);
        }
        Ok(Case {
            policy: s,
            requirements,
            queries,
        })
    }
}
