//! The command line, declared once: parsing, `--help`, usage errors, shell
//! completions and docs/cli.md (generated from `--help` by a test) all come
//! from these definitions.

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Examples:
  policyc check policies/
  policyc eval policies/coding-agent.policy --query 'connect github.com:443'
  policyc test --coverage policies/
  policyc fmt --check policies/

PATH is a .policy file or a directory, read recursively for *.policy.
`policyc COMMAND --help` documents each command and its options.

Exit codes:
  0    success (warnings allowed unless --deny-warnings)
  1    errors in the policies, failed tests, unformatted files with --check
  2    usage errors
  3    eval: some query lines could not be read
  141  standard output closed early (as a tool stopped by SIGPIPE)";

/// Check, test, evaluate and format gatehouse policies.
#[derive(Parser)]
#[command(
    name = "policyc",
    version,
    arg_required_else_help = true,
    disable_help_subcommand = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Report every error and warning in policy files, in one run
    #[command(after_help = "\
Examples:
  policyc check policies/
  policyc check --deny-warnings --exclude 'policies/drafts/**' policies/
  policyc check --format sarif policies/ > gatehouse.sarif
  policyc check --format github policies/      # annotations in a GitHub workflow

Human diagnostics go to standard error, machine formats to standard output.

Exit codes: 0 no errors, 1 errors (or warnings with --deny-warnings), 2 usage.")]
    Check(CheckArgs),
    /// Decide queries with a policy: one JSON decision per query line
    #[command(after_help = "\
Examples:
  policyc eval policies/coding-agent.policy --query 'connect github.com:443'
  policyc eval policies/ --policy coding-agent --query 'exec git push' --query 'tool shell.exec'
  echo '{\"kind\":\"dns\",\"name\":\"x.example\"}' | policyc eval policies/observer.policy --queries -
  policyc eval --artifact set.ghc --policy ci --queries traffic.txt

Queries (text form, one per line; `#` starts a comment):
  connect HOST:PORT [via http|https|socks5]    dns NAME
  resolved NAME -> ADDR, ADDR... [port N]       socket PATH
  listen ADDR:PORT    upstream    tool PERMISSION    app PROGRAM
  write PATH [in WORKSPACE]     exec WORD... [escalate]
  mcp SERVER/TOOL [destructive=true] [read_only=true] [open_world=true]
  prompt CATEGORY    web_search
  review ACTION with risk=LEVEL auth=LEVEL ...   (docs/language.md)
or one JSON object per line: {\"kind\":\"connect\",\"host\":\"github.com\",\"port\":443}

Exit codes: 0 decided (whatever the decisions), 1 policy errors, 2 usage,
3 some query lines could not be read (each answered with {\"error\": ...}).")]
    Eval(EvalArgs),
    /// Run the `test` blocks of policy files
    #[command(after_help = "\
Examples:
  policyc test policies/
  policyc test --format junit policies/ > gatehouse-tests.xml
  policyc test --coverage --fail-under 80 policies/

Exit codes: 0 every test passed, 1 a failure (or coverage under
--fail-under), 2 usage.")]
    Test(TestArgs),
    /// What a change of policy lets through or refuses: exact regions
    #[command(after_help = "\
Compares every policy present on both sides: each region of queries whose
decision changed, described in the language's words, with a witness query
inside it and both sides' decisions (reason, deciding rule). A region
*opens* (refused or asked before, allowed now; refused before, asked now),
*closes*, or changes its *reason* (the same outcome for another reason or
escalation: a deny a person could be asked about becoming one nobody can
override). Exact for connect, dns, resolved, listen, socket, upstream,
tool, prompt, web_search, mcp, app, write and read (paths in the
workspace /workspace/project, home /home/agent), exec (every command
line but a shell wrapper's script) and review (every action but a
wrapper's, when no guardian has a regular expression): every query whose
decision changed lies in a region, and every query in a region changed
(docs/diff.md). Scripts (bash -lc SCRIPT, reviewed or not) and the
reviews of a guardian with a regular expression are compared on queries
drawn from both sides' rules and a shared vocabulary: their regions are
real and marked sampled, but a change no drawn query meets is missed, and
the output says so.

Examples:
  policyc diff old/agent.policy policies/agent.policy
  policyc diff --base origin/main policies/
  policyc diff --base HEAD~1 --format markdown --fail-on opened policies/

Exit codes: 0 compared (and nothing --fail-on names), 1 policy errors or
what --fail-on names was found, 2 usage.")]
    Diff(DiffArgs),
    /// Prove properties of a policy set, or that two sets agree, with counterexamples
    #[command(after_help = "\
PATH...: every claim of every `properties` block (`never allow connect
169.254.169.254:*`, `always deny dns *.internal`) is proved for its policy
(or every policy of the set) over every query of its pattern: `proved` over
connect, dns, socket, upstream, web_search, tool, prompt, app, mcp, write,
read and exec; `not refuted (sampled N)` where a shell wrapper's script
may follow the words (exec bash *), whose scripts are drawn; a failed
claim gives a counterexample query and the rule that decided it
(docs/language.md#properties).

--equivalent A B: every query is decided alike (outcome, reason,
escalation) by A and B. --implies A B: every query A allows, B allows.
Each policy present in both is proved over the query kinds `policyc diff`
compares exactly (connect, dns, socket, upstream, tool, prompt,
web_search, mcp, app, write, read, exec, resolved, listen), and the other kinds on drawn queries, which the
output names; a failed proof gives a counterexample query with both sides'
decisions (docs/diff.md).

Examples:
  policyc prove policies/
  policyc prove --equivalent policies/agent.policy refactored/agent.policy
  policyc prove --implies strict.policy lenient.policy

Exit codes: 0 proved (over the kinds compared, or sampled without a
counterexample), 1 a counterexample (or, with --fail-on unproved, anything
not proved exactly) or policy errors, 2 usage.")]
    Prove(ProveArgs),
    /// Rewrite policy files in the canonical layout, comments kept
    #[command(after_help = "\
Examples:
  policyc fmt policies/
  policyc fmt --check policies/      # exit 1 and name the files that would change
  policyc fmt - < a.policy           # stdin to stdout, as editors pipe it")]
    Fmt(FmtArgs),
    /// Write the compiled policy set as a checksummed artifact, or a signed bundle
    #[command(after_help = "\
Examples:
  policyc compile policies/ -o set.ghc
  policyc eval --artifact set.ghc --policy coding-agent --query 'dns github.com'
  policyc compile policies/ -o set.ghb --sign fleet.key     # a bundle for a fleet (docs/bundles.md)")]
    Compile(CompileArgs),
    /// Write a starter policy for a folder, as the ZeroCode seed recommends
    #[command(after_help = "\
Looks at DIR (default: the current folder): in a version-controlled folder
(a .git directory or file there or above) it recommends what ZeroCode does,
workspace-write with on-request approvals; elsewhere read-only. The policy
denies the network by default, with the package registries commented in,
and holds a test block; it passes `check`, `test` and `fmt --check` as
written. An existing file is never overwritten without --force.

With --agent codex|claude-code it also puts `policyc hook` in front of
that harness (docs/agents.md): every tool call the agent makes is answered
by the policy in DIR (an existing policy file is kept, a missing one is
written as above). The harness's settings are edited in place, atomically,
keeping every other setting; running it again changes nothing; --remove
takes the hook out. Where: the user's settings (~/.codex/hooks.json or
$CODEX_HOME/hooks.json; ~/.claude/settings.json), the project's (--project:
DIR/.codex/hooks.json, DIR/.claude/settings.json), or the machine's
(--managed: /etc/codex/hooks.json with `[features] hooks = true` pinned in
/etc/codex/requirements.toml; /etc/claude-code/managed-settings.json).

Examples:
  policyc init
  policyc init ~/src/my-repo --name my-agent
  policyc check agent.policy && policyc test agent.policy
  policyc init --agent claude-code --project ~/src/my-repo
  sudo policyc init --agent codex --managed /etc/gatehouse")]
    Init(InitArgs),
    /// Make an Ed25519 key pair for signing bundles
    #[command(after_help = "\
Writes PREFIX.key (the secret key, mode 0600) and PREFIX.pub (the public
key, for every machine that must trust the bundles). Existing files are
never overwritten.

Examples:
  policyc keygen --out fleet
  policyc compile policies/ -o set.ghb --sign fleet.key")]
    Keygen {
        /// The files' path without extension
        #[arg(long, value_name = "PREFIX")]
        out: String,
    },
    /// Check a bundle's signature against trusted public keys
    #[command(after_help = "\
Exit codes: 0 the bundle is signed by a trusted key and loads, 1 it is
refused (unsigned, untrusted key, bad signature, invalid artifact), 2 usage.

Examples:
  policyc verify --trusted-key fleet.pub set.ghb")]
    Verify {
        /// A public key to trust (repeatable)
        #[arg(long = "trusted-key", value_name = "FILE", required = true)]
        trusted_key: Vec<String>,
        /// The bundle
        #[arg(value_name = "BUNDLE")]
        bundle: String,
    },
    /// Translate another system's configuration into policy text
    #[command(subcommand)]
    Import(Import),
    /// Write a policy in another system's format
    #[command(subcommand)]
    Export(Export),
    /// Print a shell completion script
    #[command(after_help = "\
Examples:
  policyc completions bash > ~/.local/share/bash-completion/completions/policyc
  policyc completions zsh > ~/.zfunc/_policyc
  policyc completions fish > ~/.config/fish/completions/policyc.fish")]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Answer one permission hook of an agent harness (Codex, Claude Code)
    #[command(after_help = "\
Examples:
  policyc hook claude-code /etc/gatehouse/agent.policy < event.json
  policyc hook codex --log ~/.codex/gatehouse.jsonl ~/agent.policy

Reads one hook event (PreToolUse or PermissionRequest) as JSON on standard
input, decides its tool call with the policy, and answers on standard
output in the form that harness enforces (docs/agents.md). It never fails
open: unreadable input, an unknown tool, a policy that does not load, any
internal error, or no decision within --deadline-ms is a deny with its
reason. `policyc init --agent` installs it.

Exit codes: 0 answered (the answer is on standard output), 2 usage.")]
    Hook(HookArgs),
    /// Run the language server (LSP over standard input and output)
    #[command(after_help = "\
Examples:
  policyc lsp      # started by an editor: editors/vscode/ does it for VS Code

Diagnostics as you type (the same as `policyc check`, each document checked
with the other .policy files of its directory), formatting, hover
documentation, completion, go-to-definition from a test's `policy NAME`,
document symbols, and a \"Run test\" code lens on every test block.")]
    Lsp,
}

/// The shells `completions` writes for.
#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `check --format`.
#[derive(Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Diagnostics with source lines and carets, on standard error
    #[default]
    Human,
    /// A JSON array of diagnostics
    Json,
    /// SARIF 2.1.0, for code scanning
    Sarif,
    /// GitHub Actions workflow commands (annotations)
    Github,
}

/// `test --format`.
#[derive(Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// One block per failure, then a summary
    #[default]
    Human,
    /// One JSON object: every case, its result, and coverage if asked
    Json,
    /// JUnit XML, one testsuite per test block
    Junit,
}

/// Paths to read, with exclusions.
#[derive(Args)]
pub struct Paths {
    /// Policy files or directories (read recursively for *.policy)
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<String>,
    /// Skip files and directories matching GLOB (`*`, `**`, `?`; a GLOB
    /// without `/` matches a name at any depth). Repeatable
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t)]
    pub format: CheckFormat,
    /// Fail (exit 1) on warnings too
    #[arg(long)]
    pub deny_warnings: bool,
    #[command(flatten)]
    pub paths: Paths,
}

#[derive(Args)]
#[command(group = clap::ArgGroup::new("input").required(true).args(["query", "queries"]))]
pub struct EvalArgs {
    /// The policy to ask (may be left out when the set holds one)
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
    /// The workspace of `write` queries that name none [default: the
    /// current directory]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<String>,
    /// Also write each decision, masked, as a JSON line to FILE
    #[arg(long, value_name = "FILE")]
    pub log: Option<String>,
    /// Load a compiled artifact or bundle instead of policy files
    #[arg(long, value_name = "FILE", conflicts_with = "paths")]
    pub artifact: Option<String>,
    /// With --artifact: accept only a bundle signed by this public key
    /// (repeatable)
    #[arg(long = "trusted-key", value_name = "FILE", requires = "artifact")]
    pub trusted_key: Vec<String>,
    /// A query in the text form or as JSON. Repeatable
    #[arg(long, value_name = "TEXT", conflicts_with = "queries")]
    pub query: Vec<String>,
    /// Read queries from FILE, one per line (`-` for standard input)
    #[arg(long, value_name = "FILE|-")]
    pub queries: Option<String>,
    /// Policy files or directories (read recursively for *.policy)
    #[arg(value_name = "PATH", required_unless_present = "artifact")]
    pub paths: Vec<String>,
    /// Export each decision over OpenTelemetry with these settings (a TOML
    /// file; docs/telemetry.md). The OTEL_EXPORTER_OTLP_* variables work
    /// too
    #[arg(long = "otel", value_name = "FILE")]
    pub otel: Option<String>,
    /// OpenTelemetry exporter: none, otlp-http or otlp-grpc
    #[arg(long = "otel-exporter", value_name = "KIND")]
    pub otel_exporter: Option<String>,
    /// OpenTelemetry collector URL (http://127.0.0.1:4318 for otlp-http)
    #[arg(long = "otel-endpoint", value_name = "URL")]
    pub otel_endpoint: Option<String>,
    /// Also export command lines and paths (as the policy's masks leave
    /// them); off by default
    #[arg(long = "otel-log-commands")]
    pub otel_log_commands: bool,
}

#[derive(Args)]
pub struct TestArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t)]
    pub format: TestFormat,
    /// Report the rules no test decided, per file and line
    #[arg(long)]
    pub coverage: bool,
    /// With --coverage: fail when fewer than PERCENT of the rules decided a
    /// test
    #[arg(long, value_name = "PERCENT", requires = "coverage", value_parser = percent)]
    pub fail_under: Option<f64>,
    #[command(flatten)]
    pub paths: Paths,
}

fn percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("`{s}` is not a percentage from 0 to 100")),
    }
}

#[derive(Args)]
pub struct FmtArgs {
    /// Change nothing; exit 1 and name the files that are not formatted
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub paths: Paths,
}

#[derive(Args)]
pub struct CompileArgs {
    /// Where to write the artifact
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: String,
    /// Sign it with this secret key (from `policyc keygen`): write a bundle
    #[arg(long, value_name = "KEY")]
    pub sign: Option<String>,
    /// The bundle's serial (with --sign): fleets refuse a bundle whose
    /// serial is below one they accepted [default: the clock, in
    /// milliseconds since 1970]
    #[arg(long, value_name = "N", requires = "sign")]
    pub serial: Option<u64>,
    #[command(flatten)]
    pub paths: Paths,
}

#[derive(Subcommand)]
pub enum Import {
    /// A ZeroCode config.toml (with its requirements and profile)
    #[command(after_help = "\
Examples:
  policyc import zerocode ~/.zerocode/config.toml > agent.policy
  policyc import zerocode config.toml --requirements /etc/zerocode/requirements.toml --profile ci
  policyc import zerocode config.toml --telemetry telemetry.toml > agent.policy

The policy text goes to standard output; warnings and errors, each with its
file and line, to standard error. The output is checked before it is
written: an import never succeeds with text that `policyc check` refuses.")]
    Zerocode {
        /// The config.toml
        #[arg(value_name = "CONFIG.toml")]
        config: String,
        /// The administrator's requirements.toml
        #[arg(long, value_name = "REQUIREMENTS.toml")]
        requirements: Option<String>,
        /// A profile: a `[profiles.NAME]` table of the config, or a profile
        /// file
        #[arg(long, value_name = "NAME|FILE")]
        profile: Option<String>,
        /// Also write the config's `[otel]` block as gatehouse's telemetry
        /// settings to FILE (docs/telemetry.md); header tokens stay
        /// environment references
        #[arg(long, value_name = "FILE")]
        telemetry: Option<String>,
    },
    /// A Zoo sandbox service policy (JSON)
    #[command(after_help = "\
Examples:
  policyc import zoo zoo-policy.json > zoo.policy")]
    Zoo {
        /// The policy document
        #[arg(value_name = "POLICY.json")]
        policy: String,
    },
    /// sandbox-runtime settings (JSON)
    #[command(after_help = "\
Examples:
  policyc import srt ~/.srt-settings.json > srt.policy")]
    Srt {
        /// The settings file
        #[arg(value_name = "SETTINGS.json")]
        settings: String,
    },
    /// Claude Code settings files (user, project, local, managed), layered
    #[command(after_help = "\
Examples:
  policyc import claude-code .claude/settings.json > agent.policy
  policyc import claude-code ~/.claude/settings.json .claude/settings.json .claude/settings.local.json

Each file's layer comes from its name and place: `managed-settings.json`
(or a file in `managed-settings.d`) is managed, `settings.local.json` local,
a file in `$CLAUDE_CONFIG_DIR` or `~/.claude` the user's, anything else the
project's. Rule lists are joined; a single value comes from the highest
layer that sets it (managed, local, project, user).")]
    ClaudeCode {
        /// The settings files, in any order
        #[arg(value_name = "SETTINGS.json", required = true)]
        settings: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum Export {
    /// The address layer of a policy as an nftables ruleset
    #[command(after_help = "\
Examples:
  policyc export nftables policies/egress-demo.policy > gatehouse.nft
  policyc export nftables policies/ --policy coding-agent --proxy 127.0.0.1:3128 --resolver none")]
    Nftables {
        /// The policy to export (may be left out when the set holds one)
        #[arg(long, value_name = "NAME")]
        policy: Option<String>,
        /// The proxy the sandbox may reach, or `none`
        #[arg(long, value_name = "IP:PORT|none", default_value = "127.0.0.1:3128")]
        proxy: String,
        /// The resolver the sandbox may reach, or `none`
        #[arg(long, value_name = "IP:PORT|none", default_value = "127.0.0.1:5353")]
        resolver: String,
        #[command(flatten)]
        paths: Paths,
    },
    /// The network rules of a policy as a CiliumNetworkPolicy (Cilium 1.19 or later)
    #[command(after_help = "\
Rules Cilium cannot express exactly (`default allow`, a `deny domain` that
carves names out of an allowed one) are an error naming each of them; the
export never widens the policy.

Examples:
  policyc export cilium policies/egress-demo.policy > egress.cnp.yaml
  policyc export cilium policies/ --policy coding-agent --namespace agents --selector app=agent")]
    Cilium {
        /// The policy to export (may be left out when the set holds one)
        #[arg(long, value_name = "NAME")]
        policy: Option<String>,
        /// metadata.namespace of the CiliumNetworkPolicy
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// A pod label the policy applies to (repeatable); none: every pod of the namespace
        #[arg(long, value_name = "KEY=VALUE")]
        selector: Vec<String>,
        #[command(flatten)]
        paths: Paths,
    },
    /// A policy as sandbox-runtime settings (JSON)
    #[command(after_help = "\
Writes ~/.srt-settings.json: its `network` part, and the `filesystem` part
srt requires (the sandbox mode and file rules as allowWrite, denyWrite,
denyRead and allowRead; what srt cannot say is a note on stderr). Network
rules sandbox-runtime cannot express exactly (`allow domain *`, prefixes in
allow rules, wide port ranges, `local allow`) are an error naming each.

Examples:
  policyc export srt policies/egress-demo.policy > ~/.srt-settings.json")]
    Srt {
        /// The policy to export (may be left out when the set holds one)
        #[arg(long, value_name = "NAME")]
        policy: Option<String>,
        #[command(flatten)]
        paths: Paths,
    },
}

/// `policyc diff`'s arguments.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Read the old side from this git revision (the same paths as
    /// NEW); OLD is then left out
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t)]
    pub format: DiffFormat,
    /// Exit 1 when the change opens something (`opened`), or changes
    /// anything (`changed`)
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// OLD then NEW (policy files or folders), or with --base the paths
    /// of both
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<String>,
}

/// `policyc prove`'s arguments.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("claim").args(["equivalent", "implies", "paths"])))]
pub struct ProveArgs {
    /// Policy files or folders whose `properties` blocks to prove
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// A and B decide every query alike
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub equivalent: Option<Vec<String>>,
    /// Every query A allows, B allows
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub implies: Option<Vec<String>>,
    /// Output format
    #[arg(long, value_enum, default_value_t)]
    pub format: ProveFormat,
    /// Also exit 1 when something is not proved exactly: a query kind only
    /// sampled, or a property only sampled (`unproved`)
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<ProveFailOn>,
}

/// `policyc prove --format`.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProveFormat {
    /// For a terminal
    #[default]
    Text,
    /// One JSON document
    Json,
}

/// `policyc prove --fail-on`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProveFailOn {
    /// Anything short of a proof over every query kind
    Unproved,
}

/// `policyc diff --format`.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiffFormat {
    /// For a terminal
    #[default]
    Text,
    /// One JSON document
    Json,
    /// For a pull-request comment
    Markdown,
}

/// `policyc diff --fail-on`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// Something refused or asked before is allowed now (or a policy added)
    Opened,
    /// Any region, or a policy added or removed
    Changed,
}

/// `policyc init`'s arguments.
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// The folder to write for [default: the current folder]
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    /// The policy's name
    #[arg(long, value_name = "NAME", default_value = "agent")]
    pub name: String,
    /// The file to write, in DIR [default: NAME.policy]
    #[arg(long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Overwrite the file if it exists
    #[arg(long)]
    pub force: bool,
    /// Install `policyc hook` in this harness's settings, answering every
    /// tool call with the policy in DIR (written first when missing)
    #[arg(long, value_name = "HARNESS")]
    pub agent: Option<Harness>,
    /// With --agent: the project's settings in DIR (.codex/hooks.json,
    /// .claude/settings.json) instead of the user's
    #[arg(long, requires = "agent", conflicts_with = "managed")]
    pub project: bool,
    /// With --agent: the machine's managed settings (/etc/codex,
    /// /etc/claude-code), which no user setting switches off
    #[arg(long, requires = "agent")]
    pub managed: bool,
    /// With --agent: take gatehouse's hook out of those settings again
    /// (every other setting, and the policy file, stay)
    #[arg(long, requires = "agent")]
    pub remove: bool,
    /// With --agent: the hook appends each decision to FILE
    #[arg(long, value_name = "FILE", requires = "agent")]
    pub log: Option<std::path::PathBuf>,
    /// The folder that stands for `/` in --managed paths (tests)
    #[arg(long, hide = true, value_name = "DIR", default_value = "/")]
    pub managed_root: std::path::PathBuf,
}

/// The agent harnesses `policyc hook` answers.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Harness {
    /// OpenAI's Codex CLI (hooks.json: PreToolUse, PermissionRequest)
    Codex,
    /// Anthropic's Claude Code (settings.json hooks: PreToolUse,
    /// PermissionRequest)
    ClaudeCode,
}

/// `policyc hook`'s arguments.
#[derive(Args, Clone, Debug)]
pub struct HookArgs {
    /// The harness whose event this is, and whose answer form to use
    #[arg(value_name = "HARNESS")]
    pub harness: Harness,
    /// The policy to ask (may be left out when the set holds one)
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
    /// Append each decision as a JSON line to FILE (session and tool-use
    /// ids, the tool, the decision and its reason)
    #[arg(long, value_name = "FILE")]
    pub log: Option<String>,
    /// Answer a deny when no decision is made within this many
    /// milliseconds (well under the harness's own hook timeout)
    #[arg(long = "deadline-ms", value_name = "MS", default_value_t = 2000)]
    pub deadline_ms: u64,
    /// Load a compiled artifact or bundle instead of policy files
    #[arg(long, value_name = "FILE", conflicts_with = "paths")]
    pub artifact: Option<String>,
    /// With --artifact: accept only a bundle signed by this public key
    /// (repeatable)
    #[arg(long = "trusted-key", value_name = "FILE", requires = "artifact")]
    pub trusted_key: Vec<String>,
    /// Policy files or directories (read recursively for *.policy)
    #[arg(value_name = "POLICY", required_unless_present = "artifact")]
    pub paths: Vec<String>,
}
