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

Besides the fixed fixture, the probes are made from each settings file: every
path its lists name gets a file (or a folder with a file and an executable
script) in the fixture, read, appended to, created in and executed; every
host its domain lists name (a wildcard's subdomain too) is asked for; every
unix socket it allows is served and connected to. The fixture also holds
nested repositories (depth 1, 3 and 4), a symbolic link to a folder of the
home with a `.env` in it, and unix sockets no file allows.

A difference where gatehouse lets through what srt stops fails. One where
gatehouse is stricter fails unless it is one of the documented choices in
CHOICES below, each written in docs/run.md.

Usage: compare.py NODE SRT_CLI POLICYC GATEHOUSE_RUN SETTINGS.json...
"""
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import contextlib
import threading
import sys
import tempfile
import time

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
    # Nested repositories: srt protects hooks and config to depth 3.
    "{ws}/sub/.git/hooks/pre-commit", "{ws}/sub/.git/config", "{ws}/sub/.git/HEAD",
    "{ws}/packages/lib/vendor/.git/hooks/pre-push", "{ws}/packages/lib/vendor/.git/config",
    "{ws}/a/b/c/d/.git/hooks/post-merge",
    # Through a symbolic link to a folder of the home.
    "{ws}/link-home/project.env", "{ws}/link-home/notes.md",
]
# Executables: run from the command.
EXECS = ["{ws}/tools/run.sh", "{home}/bin/run.sh", "{out}/run.sh", "{tmp}/run.sh"]
# Unix sockets no settings file allows.
SOCKETS = ["{home}/agent.sock", "{ws}/app.sock"]
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
    ("nested repositories are protected at any depth",
     lambda s, kind, rel, _: kind == "write" and re.match(r"ws/(.+/)?[^/]+/\.git/(hooks/|config$)", rel) is not None),
    ("denyRead and allowWrite of one path: none wins",
     lambda s, kind, rel, _: overlap(s, rel)),
    ("non-public addresses are refused",
     lambda s, kind, rel, reason: kind == "reach" and reason == "non_public_resolution"),
]


def overlap(settings, rel):
    """`rel` lies in a path both denyRead and allowWrite name."""
    fs = settings.get("filesystem", {}) or {}
    both = {to_fixture(e, None) for e in fs.get("denyRead", []) or []} & \
        {to_fixture(e, None) for e in fs.get("allowWrite", []) or []}
    both = {b.replace("{", "").replace("}", "") for b in both if b}
    return any(rel == b or rel.startswith(b + "/") for b in both)


def glob_matches(glob, rel):
    if not any(c in glob for c in "*?["):
        return False
    g = glob[3:] if glob.startswith("**/") else glob
    return fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(os.path.basename(rel), g)


# Names of files (not folders) among what settings files name.
DOT_FILES = {".env", ".bashrc", ".zshrc", ".zprofile", ".zshenv", ".profile", ".bash_profile",
             ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".gitconfig", ".pgpass",
             ".bash_history", ".zsh_history", ".node_repl_history"}
PLAIN_FILES = {"config", "credentials", "kubeconfig", "fish_history"}


def synth(entry):
    """A path a glob entry matches: ** a two-level folder, * and ? a name."""
    return entry.replace("**", "deep/er").replace("*", "x").replace("?", "q")


def looks_like_dir(entry):
    e = entry.rstrip("/")
    if entry.endswith("/") or entry.endswith("/**") or e in (".", "~", "") or e.endswith("/*"):
        return True
    base = os.path.basename(synth(e))
    if base in DOT_FILES or base in PLAIN_FILES or base.startswith(".env"):
        return False
    return "." not in base[1:]


def to_fixture(entry, paths):
    """The fixture label for a path a settings file names: `{ws}/…`,
    `{home}/…`, `{tmp}/…`, or None for a path elsewhere on the machine."""
    e = synth(entry.rstrip("/")) if entry not in ("/",) else "/"
    if e in ("~", ""):
        return "{home}"
    if e.startswith("~/"):
        return "{home}/" + e[2:]
    if e == "/tmp" or e.startswith("/tmp/"):
        return "{tmp}" + e[4:]
    if e.startswith("/"):
        return None
    e = e[2:] if e.startswith("./") else e
    return "{ws}" if e == "." else "{ws}/" + e


def named(settings, paths):
    """What the settings file names: (labels of files, labels of folders,
    system paths to read, socket labels or absolute socket paths, hosts)."""
    fs = settings.get("filesystem", {}) or {}
    files, dirs, system = [], [], []
    for key in ("denyRead", "allowRead", "allowWrite", "denyWrite"):
        for entry in fs.get(key, []) or []:
            label = to_fixture(entry, paths)
            if label is None:
                if not any(c in entry for c in "*?["):
                    system.append(entry.rstrip("/") or "/")
                continue
            if entry.startswith("**/"):
                # Reached through the link too (srt's expansion follows it).
                extra = "{ws}/link-home/" + synth(entry[3:])
                (dirs if looks_like_dir(entry) else files).append(extra)
            (dirs if looks_like_dir(entry) else files).append(label)
    sockets = []
    for entry in (settings.get("network", {}) or {}).get("allowUnixSockets", []) or []:
        if any(c in entry for c in "*?["):
            continue
        label = to_fixture(entry, paths)
        if label is not None:
            sockets.append(label)
        elif entry.endswith(".sock") or ".s.PGSQL." in entry:
            sockets.append(entry)
    hosts = []
    net = settings.get("network", {}) or {}
    for d in (net.get("allowedDomains", []) or []) + (net.get("deniedDomains", []) or []):
        for h in ([d[2:], "sub." + d[2:]] if d.startswith("*.") else [d]):
            if h not in hosts and h not in HOSTS:
                hosts.append(h)
    uniq = lambda xs: list(dict.fromkeys(xs))
    return uniq(files), uniq(dirs), uniq(system), uniq(sockets), hosts


def readable_file(path):
    """A regular file at or (first, sorted) in `path` on this machine."""
    if os.path.isfile(path):
        return path
    try:
        for n in sorted(os.listdir(path)):
            p = os.path.join(path, n)
            if os.path.isfile(p) and not os.path.islink(p):
                return p
    except OSError:
        pass
    return None


# A server on each unix socket path given: says unix-ok to each connection.
SERVE = """import os, select, socket, sys
ls = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.bind(p); os.chmod(p, 0o777); s.listen(8); ls.append(s)
while True:
    for s in select.select(ls, [], [])[0]:
        c, _ = s.accept()
        try:
            c.sendall(b"unix-ok")
        except OSError:
            pass
        c.close()
"""


def fixture(root, extra_files=(), extra_dirs=()):
    paths = {"ws": f"{root}/ws", "home": f"{root}/home", "out": f"{root}/outside",
             "tmp": f"/tmp/{os.path.basename(root)}-tmp"}
    for p in paths.values():
        os.makedirs(p, exist_ok=True)
    os.makedirs(f"{paths['home']}/project", exist_ok=True)
    os.symlink(f"{paths['home']}/project", f"{paths['ws']}/link-home")
    made_dirs = []
    for d in extra_dirs:
        p = d.format(**paths)
        if os.path.isfile(p):
            continue
        os.makedirs(p, exist_ok=True)
        made_dirs.append(d)
        with open(f"{p}/f.txt", "w") as fh:
            fh.write(f"original {d}/f.txt\n")
        with open(f"{p}/tool.sh", "w") as fh:
            fh.write("#!/bin/sh\necho exec-ok\n")
        os.chmod(f"{p}/tool.sh", 0o755)
    made_files = []
    for f in list(FILES) + list(extra_files):
        p = f.format(**paths)
        if os.path.isdir(p):
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write(f"original {f}\n")
        made_files.append(f)
    for e in EXECS:
        p = e.format(**paths)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as fh:
            fh.write("#!/bin/sh\necho exec-ok\n")
        os.chmod(p, 0o755)
    return paths, made_files, made_dirs


UNIX_PROBE = """import socket, sys
for label, path in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(path)
        print("unix", label, "yes" if b"unix-ok" in s.recv(64) else "no")
    except OSError:
        print("unix", label, "no")
"""


def q(text):
    return "'" + text.replace("'", "'\\''") + "'"


def probe_script(paths, mark, files, dirs, system, sockets, hosts):
    lines = ["cd \"$1\""]
    for f in files:
        p = f.format(**paths)
        lines.append(f"[ \"$(cat {q(p)} 2>/dev/null)\" = {q('original ' + f)} ] && echo {q('read ' + f + ' yes')} || echo {q('read ' + f + ' no')}")
    for d in dirs:
        p = d.format(**paths)
        lines.append(f"[ \"$(cat {q(p + '/f.txt')} 2>/dev/null)\" = {q('original ' + d + '/f.txt')} ] && echo {q('read ' + d + '/f.txt yes')} || echo {q('read ' + d + '/f.txt no')}")
        lines.append(f"[ \"$({q(p + '/tool.sh')} 2>/dev/null)\" = exec-ok ] && echo {q('exec ' + d + '/tool.sh yes')} || echo {q('exec ' + d + '/tool.sh no')}")
    for e in EXECS:
        p = e.format(**paths)
        lines.append(f"[ \"$({q(p)} 2>/dev/null)\" = exec-ok ] && echo {q('exec ' + e + ' yes')} || echo {q('exec ' + e + ' no')}")
    for path, real in system:
        # Its real content (a file hidden under /dev/null reads empty).
        want = hashlib.sha256(open(real, "rb").read()).hexdigest()
        lines.append(f"[ \"$(sha256sum < {q(real)} 2>/dev/null | cut -d' ' -f1)\" = {want} ] && echo {q('read ' + path + ' yes')} || echo {q('read ' + path + ' no')}")
    targets = files + [d + "/f.txt" for d in dirs] + [d + "/new-probe.txt" for d in dirs] + NEW
    for f in targets:
        p = f.format(**paths)
        lines.append(f"printf '%s\\n' {q(mark)} >> {q(p)} 2>/dev/null")
    if sockets:
        args = " ".join(f"{q(label)} {q(label.format(**paths))}" for label in sockets)
        lines.append(f"python3 -c {q(UNIX_PROBE)} {args}")
    for h in HOSTS + hosts:
        lines.append(f"echo \"reach {h} $(curl -s -m 10 --noproxy '' -o /dev/null -w '%{{http_code}} %header{{x-gatehouse-reason}}' 'http://{h}/')\"")
    lines.append("curl -s -m 3 --noproxy '*' -o /dev/null http://1.1.1.1/ && echo 'direct tcp yes' || echo 'direct tcp no'")
    return "\n".join(lines) + "\n"


def observe(paths, mark, out, targets):
    """What the command could do, from its output and the host's files."""
    seen, reasons = {}, {}
    for line in out.splitlines():
        parts = line.rsplit(" ", 1)
        head = parts[0].split(" ", 1)
        if len(parts) == 2 and len(head) == 2 and head[0] in ("read", "exec", "unix"):
            seen[(head[0], head[1])] = parts[1]
            continue
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
    for f in targets:
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


HOST_SOCKETS = threading.Lock()


def compare_file(settings):
    """One settings file under srt and under gatehouse: the lines to print,
    the unexplained differences, the probes, and the differences explained
    by each documented choice."""
    out, failures, probes, explained = [], 0, 0, {}

    def print(line):
        out.append(line)

    if True:
        settings = os.path.abspath(settings)
        name = os.path.basename(settings)
        with open(settings) as fh:
            s = json.load(fh)
        # The lists sandbox-runtime requires, added empty where the file
        # leaves them out (tests/data/import/srt-public/SOURCES.md).
        filled = json.loads(json.dumps(s))
        # A file's own proxy ports name a proxy of its user's that this
        # machine has not: left out, so that srt filters with its own proxy
        # as gatehouse does with its own.
        for k in ("httpProxyPort", "socksProxyPort"):
            filled.get("network", {}).pop(k, None)
        for part, keys in (("filesystem", ("denyRead", "allowWrite", "denyWrite")),
                           ("network", ("allowedDomains", "deniedDomains"))):
            section = filled.setdefault(part, {})
            for k in keys:
                section.setdefault(k, [])
        used = os.path.join(WORK, name)
        with open(used, "w") as fh:
            json.dump(filled, fh)
        results, why_blocked = {}, {}
        # A socket at a path of the machine (`/var/run/docker.sock`) is made
        # and served by the file that names it: two files naming one path
        # take their turns.
        shared = any(not label.startswith("{") for label in named(s, None)[3])
        with HOST_SOCKETS if shared else contextlib.nullcontext():
            for who in ("srt", "gatehouse"):
                # Not under /tmp: a settings file that makes /tmp writable would
                # make the whole fixture writable.
                root = tempfile.mkdtemp(prefix=f"gh-cmp-{who}-", dir=WORK)
                server, made_sockets = None, []
                paths = {"tmp": f"/tmp/{os.path.basename(root)}-tmp"}
                try:
                    files, dirs, system, sockets, hosts = named(s, None)
                    paths, files, dirs = fixture(root, files, dirs)
                    system = [(p, readable_file(p)) for p in system]
                    system = [(p, r) for p, r in system if r]
                    socks = []
                    for label in SOCKETS + sockets:
                        path = label.format(**paths)
                        if len(path.encode()) >= 104:
                            # Longer than a socket address holds (the fixture's
                            # folder makes `~/Library/Group Containers/…` too
                            # long): no socket can be there, under either.
                            continue
                        if label.startswith("{"):
                            os.makedirs(os.path.dirname(path), exist_ok=True)
                        elif os.path.lexists(path) or not os.path.isdir(os.path.dirname(path)):
                            continue
                        else:
                            made_sockets.append(path)
                        socks.append(label)
                    server = subprocess.Popen([sys.executable, "-c", SERVE] + [l.format(**paths) for l in socks])
                    for _ in range(100):
                        if all(os.path.exists(l.format(**paths)) for l in socks):
                            break
                        time.sleep(0.05)
                    mark = f"written-by-{who}"
                    script = os.path.join(root, "probe.sh")
                    with open(script, "w") as fh:
                        fh.write(probe_script(paths, mark, files, dirs, system, socks, hosts))
                    if who == "srt":
                        r = run_srt(used, paths, script)
                    else:
                        r = run_gatehouse(used, paths, script, os.path.join(root, "p.policy"))
                    if "reach github.com" not in r.stdout:
                        print(f"FAIL  {name}: {who} did not run the probe (exit {r.returncode}):\n{r.stderr[-2000:]}")
                        failures += 1
                        break
                    targets = files + [d + "/f.txt" for d in dirs] + [d + "/new-probe.txt" for d in dirs] + NEW
                    results[who], reasons = observe(paths, mark, r.stdout, targets)
                    if who == "gatehouse":
                        why_blocked = reasons
                finally:
                    if server:
                        server.kill()
                        server.wait()
                    for p in made_sockets:
                        try:
                            os.unlink(p)
                        except OSError:
                            pass
                    shutil.rmtree(root, ignore_errors=True)
                    shutil.rmtree(paths["tmp"], ignore_errors=True)
        if len(results) != 2:
            return out, failures, probes, explained
        same = 0
        for key in sorted(set(results["srt"]) | set(results["gatehouse"])):
            a, b = results["srt"].get(key), results["gatehouse"].get(key)
            if a == b:
                same += 1
                if os.environ.get("COMPARE_VERBOSE"):
                    print(f"same  {name}: {key[0]} {key[1]}: {a}")
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
    return out, failures, probes, explained


def main():
    # The files run side by side (each in its own fixture, with its own
    # proxies): most of a probe's time is waiting (a name that does not
    # resolve here, a connection refused), not the processor.
    from concurrent.futures import ThreadPoolExecutor
    failures = probes = 0
    explained = {}
    with ThreadPoolExecutor(max_workers=int(os.environ.get("COMPARE_JOBS", "6"))) as pool:
        for out, f, n, ex in pool.map(compare_file, SETTINGS):
            for line in out:
                print(line, flush=True)
            failures += f
            probes += n
            for k, v in ex.items():
                explained[k] = explained.get(k, 0) + v
    print(f"{len(SETTINGS)} settings files, {probes} probes; stricter by documented choice: "
          + (", ".join(f"{k} ({v})" for k, v in explained.items()) or "none")
          + f"; {failures} unexplained differences")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
