"""`policyc export srt` under the real srt (issue 51, item 9).

For each policy of each file: export it, run the real srt on the settings
file over a fresh fixture (a workspace and a home of its own), and check
what srt enforces: srt accepts the file; a read of every exported
`denyRead` path fails and a write to every exported `denyWrite` path never
reaches the file on disk;
`allowRead` paths read again; on a fixed set of paths, whatever
`policyc eval` says the policy does not allow, srt stops too; and a plain
file of the workspace reads (and writes, where `allowWrite` lists "."), so
the checks can fail.

  python3 tests/srt/export.py NODE SRT_CLI POLICYC POLICY...
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

NODE, SRT, POLICYC = sys.argv[1:4]
FILES = sys.argv[4:]

# Paths (below the fixture's top) asked of the policy and probed under srt.
FIXED = [
    "ws/secrets/key", "ws/secrets/public/ca.pem", "ws/sub/prod.env",
    "ws/docs/generated/api.md", "ws/.github/workflows/ci.yml", "ws/private/notes",
    "ws/README.md", "home/.ssh/id_rsa", "home/.aws/credentials", "home/.cache/x",
    "home/notes.txt",
]


def policies(path):
    names = []
    for line in open(path):
        w = line.split()
        if len(w) >= 2 and w[0] == "policy":
            names.append(w[1])
    return names


def concrete(entry, ws, home):
    """An exported entry as a file to probe: a literal names itself (a
    directory gets a file inside), a glob gets a file it matches."""
    if entry.startswith("~/"):
        base, rest = home, entry[2:]
    elif entry.startswith("./"):
        base, rest = ws, entry[2:]
    elif entry == ".":
        base, rest = ws, ""
    else:
        base, rest = "", entry
    rest = rest.replace("**/", "deep/er/").replace("*", "probe")
    return os.path.join(base, rest) if base else rest


def main():
    checks = 0
    failures = []
    for f in FILES:
        for name in policies(f):
            out = subprocess.run([POLICYC, "export", "srt", f, "--policy", name],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"policyc export srt {f} --policy {name}:\n{out.stderr}")
            settings = json.loads(out.stdout)
            fs = settings["filesystem"]
            top = tempfile.mkdtemp(dir="/var/tmp", prefix="gatehouse-srt-export.")
            try:
                ws, home = os.path.join(top, "ws"), os.path.join(top, "home")
                os.makedirs(ws)
                os.makedirs(home)
                path = os.path.join(top, "settings.json")
                with open(path, "w") as fh:
                    fh.write(out.stdout)
                probes = []  # (kind, path, must_succeed)

                def plant(p, is_dir_hint):
                    # A literal entry may be a directory (srt hides or
                    # protects all of it): plant a file inside it.
                    target = os.path.join(p, "inside.txt") if is_dir_hint else p
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "w") as fh:
                        fh.write("planted\n")
                    return target

                for e in fs.get("denyRead", []):
                    t = plant(concrete(e, ws, home), "*" not in e)
                    probes.append(("read", t, False))
                for e in fs.get("denyWrite", []):
                    t = plant(concrete(e, ws, home), "*" not in e)
                    probes.append(("write", t, False))
                for e in fs.get("allowRead", []):
                    t = plant(concrete(e, ws, home), True)
                    probes.append(("read", t, True))
                # The policy's own word on a fixed set of paths: whatever it
                # does not allow, srt must stop too (srt may be stricter).
                for rel in FIXED:
                    t = plant(os.path.join(top, rel), False)
                    for kind in ("read", "write"):
                        q = f'{kind} "{t}" in "{ws}" home "{home}"'
                        ev = subprocess.run([POLICYC, "eval", f, "--policy", name, "--query", q],
                                            capture_output=True, text=True)
                        if ev.returncode not in (0, 1) or not ev.stdout.strip():
                            raise SystemExit(f"policyc eval {q}: {ev.stderr}")
                        allowed = json.loads(ev.stdout.splitlines()[0])["decision"] == "allow"
                        if not allowed:
                            probes.append((kind, t, False))
                plain = plant(os.path.join(ws, "src", "main.rs"), False)
                probes.append(("read", plain, True))
                probes.append(("write", plain, "." in fs.get("allowWrite", [])))
                script = ["set +e"]
                for i, (kind, p, _) in enumerate(probes):
                    op = f"cat '{p}' >/dev/null" if kind == "read" else f"echo x >> '{p}'"
                    script.append(f"{op} 2>/dev/null; echo \"probe {i} $?\"")
                env = dict(os.environ, HOME=home)
                r = subprocess.run([NODE, SRT, "--settings", path, "bash", "-c", "\n".join(script)],
                                   cwd=ws, env=env, capture_output=True, text=True, timeout=120)
                got = {}
                for line in r.stdout.splitlines():
                    w = line.split()
                    if len(w) == 3 and w[0] == "probe":
                        got[int(w[1])] = w[2] == "0"
                if len(got) != len(probes):
                    raise SystemExit(f"srt did not run the probes for {f} {name} (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
                for i, (kind, p, want) in enumerate(probes):
                    checks += 1
                    if kind == "write":
                        # A write counts when it reached the file on disk
                        # (srt may put an empty tmpfs over a hidden
                        # directory, where a write succeeds and is lost).
                        with open(p) as fh:
                            got[i] = fh.read() != "planted\n"
                    if got[i] != want:
                        failures.append(f"{f} {name}: {kind} {os.path.relpath(p, top)}: "
                                        f"{'succeeded' if got[i] else 'failed'} under srt, expected {'success' if want else 'failure'}")
            finally:
                shutil.rmtree(top, ignore_errors=True)
    for x in failures:
        print("FAIL", x)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
