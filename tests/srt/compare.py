#!/usr/bin/env python3
"""Side by side with sandbox-runtime (docs/run.md, "Beside sandbox-runtime").

Each settings file runs twice over a fresh copy of the same fixture (a
workspace, a home, a folder outside both): once under the real `srt
--settings FILE` (npm @anthropic-ai/sandbox-runtime with Debian's bubblewrap)
and once under `policyc import srt FILE` + `gatehouse-run --allow-weaker`.
The same probe script runs inside both; it reads every fixture file, appends
to every file and creates new ones, and asks both proxies for the same hosts.
What is compared is what the command could do: read a file's real content,
leave a write on the host (a write into a tmpfs that vanishes is no write),
get past the proxy (403 or no answer at all is blocked; any other answer,
502 included, as no network reaches the internet here, is let through).

A difference where gatehouse lets through what srt stops fails. One where
gatehouse is stricter fails unless it is one of the documented choices in
CHOICES below, each written in docs/run.md.

Usage: compare.py NODE SRT_CLI POLICYC GATEHOUSE_RUN SETTINGS.json...
"""
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

NODE, SRT, POLICYC, RUN = sys.argv[1:5]
WORK = os.environ["COMPARE_WORK"]
SETTINGS = sys.argv[5:]
signal.alarm(900)

# Fixture files: label -> path ({ws}, {home}, {out} are filled in per run).
FILES = [
    "{ws}/README.md", "{ws}/src/main.ts", "{ws}/src/generated/api.ts", "{ws}/test/t.js",
    "{ws}/secrets/prod.key", "{ws}/secrets/public/key.pub", "{ws}/config/production.json",
    "{ws}/.env", "{ws}/.bashrc", "{ws}/.mcp.json", "{ws}/.vscode/settings.json",
    "{ws}/.claude/agents/a.md", "{ws}/.github/workflows/ci.yml", "{ws}/Cargo.lock",
    "{ws}/package-lock.json", "{ws}/pyproject.toml", "{ws}/certs/server.pem",
    "{ws}/.git/HEAD", "{ws}/.git/config", "{ws}/.git/hooks/pre-commit", "{ws}/.git/description",
    "{home}/.ssh/id_rsa", "{home}/.aws/credentials", "{home}/.netrc", "{home}/.npmrc",
    "{home}/.config/gcloud/creds.json", "{home}/sensitive-folder/test.txt", "{home}/notes.txt",
    "{home}/.npm/cache.json", "{home}/.cache/pip/index.json", "{out}/o.txt",
]
NEW = [
    "{ws}/new.txt", "{ws}/src/new.ts", "{ws}/test/new.js", "{ws}/secrets/new.txt",
    "{ws}/src/generated/new.ts", "{ws}/.claude/notes.md", "{ws}/.git/new", "{ws}/.zshrc",
    "{home}/.npm/new.log", "{home}/.cache/pip/new", "{home}/new.txt", "{out}/new.txt",
    "{tmp}/new.txt",
]
HOSTS = [
    "github.com", "api.github.com", "lfs.github.com", "codeload.github.com", "example.com",
    "npmjs.org", "registry.npmjs.org", "telemetry.npmjs.org", "pypi.org",
    "files.pythonhosted.org", "malicious.com", "myapp.test", "api.example.com:443",
    "x.example.com:8443", "api.github.com:443", "169.254.169.254", "127.0.0.1:3000",
]

# Documented stricter choices: (name, test(settings, probe, path relative to
# the fixture)). Each name is a heading line in docs/run.md.
CHOICES = [
    ("all of .git is protected",
     lambda s, kind, rel, _: kind == "write" and rel.startswith("ws/.git/")),
    ("denyWrite globs are honoured",
     lambda s, kind, rel, _: kind == "write" and rel.startswith("ws/") and any(
         glob_matches(g, rel[3:]) for g in s.get("filesystem", {}).get("denyWrite", []))),
    # A name this machine's resolver answers with a reserved address
    # (203.0.113.0/24 and the like): srt connects, gatehouse's `local deny`
    # refuses every non-public address (docs/importing.md).
    ("non-public addresses are refused",
     lambda s, kind, rel, reason: kind == "reach" and reason == "non_public_resolution"),
]


def glob_matches(glob, rel):
    if not any(c in glob for c in "*?["):
        return False
    g = glob[3:] if glob.startswith("**/") else glob
    return fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(os.path.basename(rel), g)


def fixture(root):
    paths = {"ws": f"{root}/ws", "home": f"{root}/home", "out": f"{root}/outside",
             "tmp": f"/tmp/{os.path.basename(root)}-tmp"}
    for p in paths.values():
        os.makedirs(p, exist_ok=True)
    for f in FILES:
        p = f.format(**paths)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(f"original {f}\n")
    return paths


def probe_script(paths, mark):
    lines = ["cd \"$1\""]
    for f in FILES:
        p = f.format(**paths)
        lines.append(f"[ \"$(cat '{p}' 2>/dev/null)\" = 'original {f}' ] && echo 'read {f} yes' || echo 'read {f} no'")
    for f in FILES + NEW:
        p = f.format(**paths)
        lines.append(f"printf '%s\\n' '{mark}' >> '{p}' 2>/dev/null && echo 'inside {f} ok' || echo 'inside {f} fail'")
    for h in HOSTS:
        lines.append(f"echo \"reach {h} $(curl -s -m 10 --noproxy '' -o /dev/null -w '%{{http_code}} %header{{x-gatehouse-reason}}' 'http://{h}/')\"")
    lines.append("curl -s -m 3 --noproxy '*' -o /dev/null http://1.1.1.1/ && echo 'direct tcp yes' || echo 'direct tcp no'")
    return "\n".join(lines) + "\n"


def observe(paths, mark, out):
    """What the command could do, from its output and the host's files."""
    seen, reasons = {}, {}
    for line in out.splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == "read":
            seen[("read", parts[1])] = parts[2]
        elif len(parts) in (3, 4) and parts[0] == "reach":
            code = parts[2]
            if len(parts) == 4:
                reasons[parts[1]] = parts[3]
            # 403: the proxy said no. 000: no answer at all (srt leaves
            # local addresses to NO_PROXY, and inside the sandbox a direct
            # connection has nowhere to go). Anything else got past.
            seen[("reach", parts[1])] = "blocked" if code in ("403", "000", "") else "through"
        elif parts[:2] == ["direct", "tcp"]:
            seen[("direct", "tcp")] = parts[2]
    for f in FILES + NEW:
        p = f.format(**paths)
        try:
            with open(p) as fh:
                seen[("write", f)] = "yes" if mark in fh.read() else "no"
        except OSError:
            seen[("write", f)] = "no"
    return seen, reasons


def run_srt(settings, paths, script):
    env = dict(os.environ, HOME=paths["home"])
    return subprocess.run([NODE, SRT, "--settings", settings, "bash", script, paths["ws"]],
                          cwd=paths["ws"], env=env, capture_output=True, text=True, timeout=300)


def run_gatehouse(settings, paths, script, policy):
    env = dict(os.environ, HOME=paths["home"])
    imp = subprocess.run([POLICYC, "import", "srt", settings], capture_output=True, text=True)
    if imp.returncode != 0:
        raise SystemExit(f"policyc import srt {settings} failed:\n{imp.stderr}")
    with open(policy, "w") as fh:
        fh.write(imp.stdout)
    return subprocess.run([RUN, policy, "--allow-weaker", "--", "bash", script, paths["ws"]],
                          cwd=paths["ws"], env=env, capture_output=True, text=True, timeout=300)


def main():
    failures = probes = 0
    explained = {}
    for settings in SETTINGS:
        settings = os.path.abspath(settings)
        name = os.path.basename(settings)
        with open(settings) as fh:
            s = json.load(fh)
        results, why_blocked = {}, {}
        for who in ("srt", "gatehouse"):
            # Not under /tmp: a settings file that makes /tmp writable would
            # make the whole fixture writable.
            root = tempfile.mkdtemp(prefix=f"gh-cmp-{who}-", dir=WORK)
            try:
                paths = fixture(root)
                mark = f"written-by-{who}"
                script = os.path.join(root, "probe.sh")
                with open(script, "w") as fh:
                    fh.write(probe_script(paths, mark))
                if who == "srt":
                    r = run_srt(settings, paths, script)
                else:
                    r = run_gatehouse(settings, paths, script, os.path.join(root, "p.policy"))
                if "reach github.com" not in r.stdout:
                    print(f"FAIL  {name}: {who} did not run the probe (exit {r.returncode}):\n{r.stderr[-2000:]}")
                    failures += 1
                    break
                results[who], reasons = observe(paths, mark, r.stdout)
                if who == "gatehouse":
                    why_blocked = reasons
            finally:
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(paths["tmp"], ignore_errors=True)
        if len(results) != 2:
            continue
        same = 0
        for key in sorted(set(results["srt"]) | set(results["gatehouse"])):
            a, b = results["srt"].get(key), results["gatehouse"].get(key)
            if a == b:
                same += 1
                continue
            kind, what = key
            rel = what.replace("{", "").replace("}", "")
            looser = (a, b) in (("no", "yes"), ("blocked", "through"))
            stricter = (a, b) in (("yes", "no"), ("through", "blocked"))
            detail = why_blocked.get(what, "") if kind == "reach" else ""
            why = next((c for c, t in CHOICES if t(s, kind, rel, detail)), None) if stricter else None
            if why:
                explained[why] = explained.get(why, 0) + 1
                print(f"ok    {name}: {kind} {what}: srt {a}, gatehouse {b} (stricter: {why})")
            else:
                failures += 1
                print(f"FAIL  {name}: {kind} {what}: srt {a}, gatehouse {b}"
                      + (" (gatehouse lets through what srt stops)" if looser else " (unexplained)"))
        probes += len(results["srt"])
        print(f"ok    {name}: {same} of {len(results['srt'])} probes the same")
    print(f"{len(SETTINGS)} settings files, {probes} probes; stricter by documented choice: "
          + (", ".join(f"{k} ({v})" for k, v in explained.items()) or "none")
          + f"; {failures} unexplained differences")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
