"""The real Codex and Claude Code, driven non-interactively against a
scripted model server on loopback (model.py: a stand-in for the model
only), with gatehouse's hook installed by `policyc init --agent`.

Each case is one session: the model asks for fixed tool calls, the real
harness runs its real hook (`policyc hook`) and then its real tool or
not, and the test checks on disk and on the wire (what the harness sent
back to the model, what reached a loopback server) that what the policy
denies did not happen and what it allows did. Then the failure cases: a
policy that stops loading, a policy too slow for the hook's deadline, a
malformed event; then managed installs (/etc/codex, /etc/claude-code,
taken out again); then every tool the installed versions offer is checked
to be in the hook's table.

usage: e2e.py POLICYC CODEX CLAUDE
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import model  # noqa: E402

POLICYC, CODEX, CLAUDE = (str(Path(p).resolve()) for p in sys.argv[1:4])
ONLY = set(sys.argv[4:])  # case names to run (all when empty)
SECRET = "gatehouse-secret-7f3a9c"
FAILURES = []
PASSED = []


def check(ok, what):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    (PASSED if ok else FAILURES).append(what)


# -- a loopback server that counts what reaches it (the denied fetch) -------
HITS = []


class Exfil(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        HITS.append(self.path)
        body = b"exfiltrated\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


exfil = ThreadingHTTPServer(("127.0.0.1", 0), Exfil)
threading.Thread(target=exfil.serve_forever, daemon=True).start()
EXFIL = f"http://127.0.0.1:{exfil.server_address[1]}/exfil"

ROOT = Path(tempfile.mkdtemp(prefix="gatehouse-agents-"))
MODEL_LOG = ROOT / "model.jsonl"
MARKS = ROOT / "marks"
MARKS.mkdir()


def project(name):
    """A git repository with a local 'origin', a tree to wipe, a secret and
    a file to edit."""
    p = ROOT / name
    p.mkdir()
    remote = ROOT / f"{name}-origin.git"
    run(["git", "init", "-q", "--bare", str(remote)])
    (p / "src").mkdir()
    (p / "src" / "main.txt").write_text("old line\n")
    (p / "victim").mkdir()
    (p / "victim" / "keep").write_text("keep\n")
    (p / "secrets").mkdir()
    (p / "secrets" / "token").write_text(SECRET + "\n")
    shutil.copy(HERE / "agent.policy", p / "agent.policy")
    git = ["git", "-C", str(p), "-c", "user.email=t@t", "-c", "user.name=t"]
    run(["git", "init", "-q", "-b", "main", str(p)])
    run(git + ["add", "."])
    run(git + ["commit", "-qm", "init"])
    run(git + ["remote", "add", "origin", str(remote)])
    return p, remote


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def init(harness, *args, env=None):
    r = subprocess.run([POLICYC, "init", "--agent", harness, *args],
                       capture_output=True, text=True, env=env, timeout=60)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
    check(r.returncode == 0, f"policyc init --agent {harness} {' '.join(args)}")
    return r


def model_turns(case):
    """What the harness sent the model in this case's session."""
    out = []
    if MODEL_LOG.exists():
        for line in MODEL_LOG.read_text().splitlines():
            e = json.loads(line)
            if e.get("case") == case:
                out.append(e)
    return out


def sent_back(case):
    """Everything the harness sent the model after the first turn (the
    tool results, the hook's refusals), as one string."""
    return json.dumps([e.get("input") or e.get("messages") for e in model_turns(case) if e.get("turn")])


# -- the harnesses ------------------------------------------------------------
class Codex:
    name = "codex"
    flag = "codex"

    def __init__(self, port):
        self.proj, self.remote = project("codex-proj")
        self.home = ROOT / "codex-home"
        self.home.mkdir()
        (self.home / "config.toml").write_text(f"""model = "gpt-5.5"
model_provider = "scripted"
[model_providers.scripted]
name = "scripted"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
[mcp_servers.things]
command = "python3"
args = ["{HERE / 'mcp_server.py'}", "{MARKS}"]
""")
        self.env = dict(os.environ, CODEX_HOME=str(self.home), HOME=str(ROOT / "codex-user"))

    def install(self):
        init("codex", "--log", str(ROOT / "hook.jsonl"), str(self.proj), env=self.env)

    def session(self, case, trust_bypass=True):
        argv = [CODEX, "exec", "--sandbox", "danger-full-access", "--skip-git-repo-check",
                "-C", str(self.proj)]
        if trust_bypass:
            argv.append("--dangerously-bypass-hook-trust")
        argv.append(f"gatehouse-case: {case}")
        return subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              timeout=120, stdin=subprocess.DEVNULL)

    def hooks_file(self):
        return self.home / "hooks.json"


class Claude:
    name = "claude-code"
    flag = "claude"

    def __init__(self, port):
        self.proj, self.remote = project("claude-proj")
        self.user = ROOT / "claude-user"
        self.user.mkdir()
        self.mcp = ROOT / "claude-mcp.json"
        self.mcp.write_text(json.dumps({"mcpServers": {"things": {
            "command": "python3", "args": [str(HERE / "mcp_server.py"), str(MARKS)]}}}))
        self.env = dict(
            os.environ, HOME=str(self.user), IS_SANDBOX="1",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}", ANTHROPIC_API_KEY="sk-scripted",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        self.env.pop("CLAUDE_CONFIG_DIR", None)

    def install(self):
        init("claude-code", "--project", "--log", str(ROOT / "hook.jsonl"), str(self.proj), env=self.env)

    def session(self, case, mode="bypassPermissions"):
        argv = [CLAUDE, "-p", f"gatehouse-case: {case}", "--permission-mode", mode,
                "--mcp-config", str(self.mcp), "--strict-mcp-config"]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, cwd=self.proj,
                              timeout=120, stdin=subprocess.DEVNULL)

    def hooks_file(self):
        return self.proj / ".claude" / "settings.json"


# Codex offers MCP tools only once a search has loaded them (in the
# namespace mcp__SERVER); Claude Code names them mcp__SERVER__TOOL at once.
SEARCH = {"type": "tool_search_call", "execution": "client", "status": "completed",
          "arguments": {"query": "things list delete"}}


def patch(*lines):
    return "*** Begin Patch\n" + "".join(l + "\n" for l in lines) + "*** End Patch\n"


def cases(c, x):
    """The fixed tool calls: (name, codex calls, claude calls, check)."""
    P, R = c.proj, c.remote
    git_hook = P / ".git" / "hooks" / "pre-commit"
    return [
        ("git_push",
         {"name": "exec_command", "arguments": {"cmd": "git push origin main"}},
         {"name": "Bash", "input": {"command": "git push origin main", "description": "push"}},
         lambda: check(subprocess.run(["git", "--git-dir", str(R), "rev-parse", "--verify", "-q", "main"],
                                      capture_output=True).returncode != 0,
                       "git push: the origin has no commit")),
        ("rm_rf",
         {"name": "exec_command", "arguments": {"cmd": "rm -rf victim"}},
         {"name": "Bash", "input": {"command": "rm -rf victim", "description": "wipe"}},
         lambda: check((P / "victim" / "keep").exists(), "rm -rf: the tree is still there")),
        ("git_hook",
         {"type": "custom_tool_call", "name": "apply_patch",
          "input": patch("*** Add File: .git/hooks/pre-commit", "+#!/bin/sh", "+echo owned")},
         {"name": "Write", "input": {"file_path": str(git_hook), "content": "#!/bin/sh\necho owned\n"}},
         lambda: check(not git_hook.exists(), "a write under .git/hooks: no file")),
        ("edit",
         {"type": "custom_tool_call", "name": "apply_patch",
          "input": patch("*** Update File: src/main.txt", "@@", "-old line", "+new line")},
         [{"name": "Read", "input": {"file_path": str(P / "src" / "main.txt")}},
          {"name": "Edit", "input": {"file_path": str(P / "src" / "main.txt"),
                                     "old_string": "old line", "new_string": "new line"}}],
         lambda: check((P / "src" / "main.txt").read_text() == "new line\n", "an edit in the workspace: made")),
        ("allowed_command",
         {"name": "exec_command", "arguments": {"cmd": "echo ran > ran.txt"}},
         {"name": "Bash", "input": {"command": "echo ran > ran.txt", "description": "run"}},
         lambda: check((P / "ran.txt").exists(), "an allowed command: ran")),
        ("read_secret",
         {"name": "view_image", "arguments": {"path": "secrets/token"}},
         {"name": "Read", "input": {"file_path": str(P / "secrets" / "token")}},
         lambda: check(SECRET not in sent_back(x("read_secret")) and bool(model_turns(x("read_secret"))),
                       "a read of a denied path: the secret never reached the model")),
        ("fetch_denied",
         {"name": "exec_command", "arguments": {"cmd": f"curl -s {EXFIL}"}},
         [{"name": "ToolSearch", "input": {"query": "select:WebFetch", "max_results": 1}},
          {"name": "WebFetch", "input": {"url": EXFIL, "prompt": "what is there"}}],
         lambda: check(not HITS, "a fetch of a denied host: nothing reached it")),
        ("mcp_read",
         [SEARCH, {"namespace": "mcp__things", "name": "list_things", "arguments": {}}],
         {"name": "mcp__things__list_things", "input": {}},
         lambda: check((MARKS / "called-list_things").exists(), "an allowed MCP tool: called")),
        ("mcp_destructive",
         [SEARCH, {"namespace": "mcp__things", "name": "delete_all", "arguments": {}}],
         {"name": "mcp__things__delete_all", "input": {}},
         lambda: check(not (MARKS / "called-delete_all").exists(), "a destructive MCP tool: never called")),
    ]


def hook_log():
    p = ROOT / "hook.jsonl"
    return [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []


def drive(c):
    print(f"== {c.name}: the fixed tool calls", flush=True)
    x = lambda case: f"{c.flag}_{case}"  # noqa: E731
    script = {}
    for name, codex_call, claude_call, _ in cases(c, x):
        script[x(name)] = {"codex": codex_call, "claude": claude_call}
    model.Handler.script.cases.update(script)
    for name, _, _, verify in cases(c, x):
        if ONLY and name not in ONLY:
            continue
        if name.startswith("mcp"):
            for m in MARKS.iterdir():
                m.unlink()
        before = len(hook_log())
        r = c.session(x(name))
        decisions = hook_log()[before:]
        print(f"  {name}: exit {r.returncode}; hook: "
              + ", ".join(f"{d['tool']} {d['decision']}" for d in decisions), flush=True)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:])
        verify()
    return x


def failures(c, x):
    print(f"== {c.name}: the hook's failure cases, through the harness", flush=True)
    policy = c.proj / "agent.policy"
    good = policy.read_text()
    model.Handler.script.cases[x("broken")] = {
        "codex": {"name": "exec_command", "arguments": {"cmd": "echo ran > broken.txt"}},
        "claude": {"name": "Bash", "input": {"command": "echo ran > broken.txt", "description": "run"}}}
    # A policy that no longer loads: every call is refused.
    policy.write_text(good.replace("policy agent {", "policy agent {\n  sandbox nonsense"))
    c.session(x("broken"))
    check(not (c.proj / "broken.txt").exists(), "a policy that does not load: the call was refused")
    check("does not load" in sent_back(x("broken")), "... and the model was told why")
    # A policy whose evaluation passes the deadline (40 000 rules, a 1 ms
    # deadline set in the installed hook): refused at the deadline.
    rules = "".join(f"    allow domain h{i}.example.com\n" for i in range(40000))
    policy.write_text(good.replace("  network {\n", "  network {\n" + rules, 1))
    settings = c.hooks_file()
    saved = settings.read_text()
    settings.write_text(saved.replace(" hook ", " hook --deadline-ms 1 "))
    model.Handler.script.cases[x("slow")] = model.Handler.script.cases[x("broken")]
    c.session(x("slow"))
    check(not (c.proj / "broken.txt").exists(), "a policy past the hook's deadline: the call was refused")
    check("deadline" in sent_back(x("slow")), "... and the model was told why")
    settings.write_text(saved)
    policy.write_text(good)
    # A malformed event (a harness never sends one; a compromised one
    # might): a deny in the harness's own form.
    for raw in [b"{not json", b"[]", json.dumps({"hook_event_name": "PreToolUse"}).encode()]:
        r = subprocess.run([POLICYC, "hook", c.name, str(policy)], input=raw, capture_output=True, timeout=30)
        out = json.loads(r.stdout or b"{}")
        deny = out.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"
        check(r.returncode == 0 and deny and out["hookSpecificOutput"].get("permissionDecisionReason"),
              f"a malformed event {raw[:20]!r}: a deny with a reason")


def ask_in_default_mode(c, x):
    """Claude Code in its default permission mode keeps the policy's `ask`
    (a prompt for a person; `-p` has none to show, so a block)."""
    print("== claude-code: `ask` in the default permission mode", flush=True)
    model.Handler.script.cases[x("ask_default")] = model.Handler.script.cases[x("git_push")]
    before = len(hook_log())
    c.session(x("ask_default"), mode="default")
    check([d["decision"] for d in hook_log()[before:]] == ["ask"], "the hook answered ask")
    check(subprocess.run(["git", "--git-dir", str(c.remote), "rev-parse", "--verify", "-q", "main"],
                         capture_output=True).returncode != 0, "... and -p, with no one to ask, did not push")


def managed(c, x):
    """A machine-wide install: the harness runs it with no trust step."""
    etc = Path("/etc/codex" if c.name == "codex" else "/etc/claude-code")
    if os.geteuid() != 0:
        print(f"== {c.name}: managed install skipped (not root)")
        return
    if etc.exists():
        print(f"== {c.name}: managed install skipped ({etc} exists; the test never touches an admin's settings)")
        return
    print(f"== {c.name}: a managed install in {etc}", flush=True)
    # The user's install out first: only the managed hook can decide.
    r = subprocess.run([POLICYC, "init", "--agent", c.name, *(["--project"] if c.name == "claude-code" else []),
                        "--remove", str(c.proj)], capture_output=True, text=True, env=c.env)
    check(r.returncode == 0, "policyc init --remove: the user's hook is out")
    try:
        init(c.name, "--managed", "--log", str(ROOT / "hook.jsonl"), str(c.proj))
        model.Handler.script.cases[x("managed")] = model.Handler.script.cases[x("rm_rf")]
        if c.name == "codex":
            r = c.session(x("managed"), trust_bypass=False)
        else:
            r = c.session(x("managed"))
        check((c.proj / "victim" / "keep").exists(), "the managed hook refused rm -rf (no trust step)")
        check(any(d.get("tool_use_id") and d["decision"] == "deny" for d in hook_log()[-1:]),
              "... and logged its decision")
        r = subprocess.run([POLICYC, "init", "--agent", c.name, "--managed", "--remove", str(c.proj)],
                           capture_output=True, text=True)
        check(r.returncode == 0, "policyc init --managed --remove")
    finally:
        shutil.rmtree(etc, ignore_errors=True)


def table(c):
    """Every tool the installed version offered the model is in the table."""
    offered = set()
    for e in [json.loads(l) for l in MODEL_LOG.read_text().splitlines()]:
        if e.get("api") == ("responses" if c.name == "codex" else "messages"):
            offered.update(t for t in e.get("tools") or [] if t)
            text = json.dumps(e.get("messages") or e.get("input"))
            m = re.search(r"calling them directly will fail[^:]*:((?:\\n[A-Za-z]+)+)", text)
            if m:
                offered.update(n for n in m.group(1).split("\\n") if n)
    offered = {t for t in offered if not t.startswith("mcp__")}
    print(f"== {c.name}: the {len(offered)} tools the installed version offers, in the hook's table", flush=True)
    missing = []
    for t in sorted(offered):
        ev = {"hook_event_name": "PreToolUse", "tool_name": t, "tool_input": {}, "cwd": str(c.proj),
              "session_id": "s"}
        r = subprocess.run([POLICYC, "hook", c.name, str(c.proj / "agent.policy")],
                           input=json.dumps(ev).encode(), capture_output=True, timeout=30)
        if b"not in gatehouse's table" in r.stdout:
            missing.append(t)
    check(not missing, f"{c.name}: every offered tool is in the table {sorted(offered)} (missing: {missing})")


def main():
    server = model.serve({}, str(MODEL_LOG))
    port = server.server_address[1]
    for cls in (Codex, Claude):
        c = cls(port)
        c.install()
        x = drive(c)
        if not ONLY:
            failures(c, x)
            if c.name == "claude-code":
                ask_in_default_mode(c, x)
            managed(c, x)
            table(c)
    decisions = hook_log()
    print(f"{len(decisions)} decisions logged by the hook", flush=True)
    print(f"{len(PASSED)} passed, {len(FAILURES)} failed")
    if FAILURES:
        print(f"{len(FAILURES)} failed:", *FAILURES, sep="\n  ")
        print(f"(left for a look: {ROOT})")
        sys.exit(1)
    shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
