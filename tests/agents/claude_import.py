"""Issue 60's check: the real Claude Code decides a set of tool calls by its
own settings, and then, with those settings imported by `policyc import
claude-code` and put in front of it as `policyc hook` (its own rules
gone), decides them again. The calls it blocks must be the same.

For each settings file of tests/data/import/claude-code named below, two
sessions of `claude -p` in a fresh git project, driven by the scripted
model (model.py) with the same tool calls:

  A. `.claude/settings.json` is the settings file as written;
  B. `.claude/settings.json` holds only the hook (`policyc init --agent
     claude-code --project`) answering with the imported policy, and the
     file's `defaultMode` (a mode, not a rule).

A call is blocked when the tool result Claude Code sends back to the model
says it did not run (a refusal, a prompt no one answered in `-p`, a tool
removed from the session); an allowed call's effect is checked too. `-p`
has no person: an `ask` of either side is a block, as the issue reads
it ("the calls Claude Code blocks by its own rules").

usage: claude_import.py POLICYC CLAUDE
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import model  # noqa: E402

POLICYC, CLAUDE = (str(Path(p).resolve()) for p in sys.argv[1:3])
CORPUS = HERE.parent / "data" / "import" / "claude-code"
ROOT = Path(tempfile.mkdtemp(prefix="gatehouse-claude-import-"))
MODEL_LOG = ROOT / "model.jsonl"
FAILURES, PASSED = [], []


def check(ok, what):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    (PASSED if ok else FAILURES).append(what)


def bash(cmd):
    return {"name": "Bash", "input": {"command": cmd, "description": "run"}}


def read(p):
    return {"name": "Read", "input": {"file_path": p}}


def write(p):
    return {"name": "Write", "input": {"file_path": p, "content": "written\n"}}


# The calls for each file, as (call, what Claude Code does by its rules).
# The expectation is there only to make the test fail should both sides
# agree on something wrong; the check is that A and B agree.
def calls(name, p):
    made = lambda n: f"touch {p}/made-{n}"  # noqa: E731
    return {
        "01-dotfiles-readonly-allow": [
            (bash("git status --short"), "allow"),
            (bash("ls -la"), "allow"),
            (bash(made(1)), "block"),
            (write(f"{p}/src/new.txt"), "block"),
            (read(f"{p}/src/main.txt"), "allow"),
        ],
        "03-secrets-and-downloads-denied": [
            (bash("curl -s http://127.0.0.1:9/"), "block"),
            (read(f"{p}/.env"), "block"),
            (read(f"{p}/src/main.txt"), "allow"),
            (bash("cd src && wget -q http://127.0.0.1:9/"), "block"),
            (bash(made(2)), "block"),
        ],
        "08-bypass-with-denies": [
            (bash("git push origin main"), "block"),
            # bypassPermissions from a settings file: Claude Code 2.1.332
            # still asks (only the command-line flag bypasses).
            (bash(made(3)), "block"),
            (read(f"{p}/.env"), "block"),
            (write(f"{p}/src/new.txt"), "block"),
            (bash("npm publish --dry-run"), "block"),
            (bash(f"{made(4)} && git push origin main"), "block"),
        ],
        "10-bare-tools-denied": [
            (bash("git status"), "block"),
            (write(f"{p}/src/new.txt"), "block"),
            (read(f"{p}/src/main.txt"), "allow"),
        ],
        "11-ask-every-command": [
            (bash("ls"), "block"),
            (bash("git status"), "block"),
            (bash("git push origin main"), "block"),
            (read(f"{p}/src/main.txt"), "allow"),
        ],
    }[name]


FILES = ["01-dotfiles-readonly-allow", "03-secrets-and-downloads-denied",
         "08-bypass-with-denies", "10-bare-tools-denied", "11-ask-every-command"]

SECRET = "gatehouse-claude-import-secret"


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def project(name):
    p = ROOT / name
    p.mkdir()
    remote = ROOT / f"{name}-origin.git"
    run(["git", "init", "-q", "--bare", str(remote)])
    (p / "src").mkdir()
    (p / "src" / "main.txt").write_text("main text\n")
    (p / ".env").write_text(f"TOKEN={SECRET}\n")
    git = ["git", "-C", str(p), "-c", "user.email=t@t", "-c", "user.name=t"]
    run(["git", "init", "-q", "-b", "main", str(p)])
    run(git + ["add", "."])
    run(git + ["commit", "-qm", "init"])
    run(git + ["remote", "add", "origin", str(remote)])
    (p / ".claude").mkdir()
    return p


def results(case):
    """The tool results Claude Code sent back in this session, in order."""
    last = None
    for line in MODEL_LOG.read_text().splitlines():
        e = json.loads(line)
        if e.get("case") == case:
            last = e
    out = []
    for m in (last or {}).get("messages") or []:
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    c = b.get("content")
                    text = c if isinstance(c, str) else json.dumps(c)
                    out.append((bool(b.get("is_error")), text))
    return out


REFUSED = re.compile(
    r"permission|denied|not allowed|requires approval|approve|No such tool|"
    r"gatehouse|blocked|haven't granted|has been denied", re.I)


def blocked(result):
    is_error, text = result
    return is_error and bool(REFUSED.search(text))


def session(p, case, env):
    return subprocess.run(
        [CLAUDE, "-p", f"gatehouse-case: {case}"], capture_output=True, text=True,
        env=env, cwd=p, timeout=180, stdin=subprocess.DEVNULL)


def main():
    server = model.serve({}, str(MODEL_LOG))
    port = server.server_address[1]
    user = ROOT / "claude-user"
    user.mkdir()
    env = dict(os.environ, HOME=str(user), IS_SANDBOX="1",
               ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}", ANTHROPIC_API_KEY="sk-scripted",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    env.pop("CLAUDE_CONFIG_DIR", None)
    for name in FILES:
        print(f"== {name}", flush=True)
        settings = json.loads((CORPUS / f"{name}.json").read_text())
        imported = subprocess.run([POLICYC, "import", "claude-code", str(CORPUS / f"{name}.json")],
                                  capture_output=True, text=True)
        check(imported.returncode == 0, f"{name}: imported")
        if imported.returncode != 0:
            print(imported.stderr)
            continue
        verdicts = {}
        for side in ("own", "hook"):
            p = project(f"{name}-{side}")
            script = calls(name, str(p))
            case = f"imp_{name.split('-')[0]}_{side}"
            model.Handler.script.cases[case] = {"claude": [c for c, _ in script]}
            if side == "own":
                (p / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
            else:
                (p / "agent.policy").write_text(imported.stdout)
                r = subprocess.run([POLICYC, "init", "--agent", "claude-code", "--project",
                                    "--log", str(ROOT / f"{name}.jsonl"), str(p)],
                                   capture_output=True, text=True, env=env)
                check(r.returncode == 0, f"{name}: the hook installed")
                hooked = json.loads((p / ".claude" / "settings.json").read_text())
                mode = (settings.get("permissions") or {}).get("defaultMode")
                if mode:
                    hooked.setdefault("permissions", {})["defaultMode"] = mode
                (p / ".claude" / "settings.json").write_text(json.dumps(hooked, indent=2))
            r = session(p, case, env)
            got = results(case)
            if len(got) != len(script):
                print(r.stdout[-1500:], r.stderr[-1500:])
            check(len(got) == len(script), f"{name} ({side} rules): every call answered ({len(got)}/{len(script)})")
            verdicts[side] = ["block" if blocked(g) else "allow" for g in got]
            for (call, _), g, v in zip(script, got, verdicts[side]):
                print(f"    {side:4} {v:5} {call['name']} {json.dumps(call['input'])[:70]} -> {g[1][:110]!r}")
            # What an allowed Read saw, and what a blocked one did not.
            secret_seen = any(SECRET in g[1] for g in got)
            expected_secret = any(c["name"] == "Read" and c["input"]["file_path"].endswith(".env")
                                  and e == "allow" for c, e in script)
            check(secret_seen == expected_secret, f"{name} ({side} rules): the .env secret reached the model only if a read of it is allowed")
        own, hook = verdicts.get("own", []), verdicts.get("hook", [])
        script = calls(name, "P")
        check(own == [e for _, e in script], f"{name}: Claude Code's own rules decide as expected {own}")
        check(own == hook, f"{name}: the imported policy blocks exactly what Claude Code blocks (own {own}, hook {hook})")
    print(f"{len(PASSED)} passed, {len(FAILURES)} failed")
    if FAILURES:
        print(f"{len(FAILURES)} failed:", *FAILURES, sep="\n  ")
        print(f"(left for a look: {ROOT})")
        sys.exit(1)
    shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
