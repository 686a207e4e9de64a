"""Runs docs/tutorial.md as written (issue 37): every ```FORMAT file=NAME
block is written to a scratch folder, every ```console block's `$ COMMAND`
lines are run there with bash (standard error folded into standard output),
and each command's output must be the lines shown under it. A line `...`
stands for any number of lines. Usage: run.py TUTORIAL BIN_DIR [CWD]: with
CWD, the commands run there (docs/host.md's lab runs from the checkout)
instead of a scratch folder."""
import os, re, subprocess, sys, tempfile

tutorial, bindir = sys.argv[1], os.path.abspath(sys.argv[2])
text = open(tutorial).read()
blocks = re.findall(r"^```([^\n]*)\n(.*?)^```\s*$", text, re.M | re.S)
work = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="gatehouse-tutorial-")
env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"], NO_COLOR="1")
for k in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"]:
    env.pop(k, None)


def matches(expected, actual):
    """`...` in expected matches any run of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


ran, failures = 0, []
for info, body in blocks:
    m = re.search(r"file=(\S+)", info)
    if m:
        path = os.path.join(work, m.group(1))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write(body)
        continue
    if info.strip() != "console":
        continue
    steps, cur = [], None
    for line in body.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            cur = [line[2:], []]
            steps.append(cur)
        elif cur is not None:
            cur[1].append(line.rstrip())
    for cmd, expected in steps:
        ran += 1
        r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        actual = [l.rstrip() for l in r.stdout.rstrip("\n").split("\n")] if r.stdout.strip() else []
        while expected and expected[-1] == "":
            expected.pop()
        if not matches(expected, actual):
            failures.append(f"$ {cmd}\n--- the tutorial shows:\n" + "\n".join(expected) +
                            "\n--- it printed:\n" + "\n".join(actual))
subprocess.run(["bash", "-c", "[ -f proxy.pid ] && kill \"$(cat proxy.pid)\" 2>/dev/null; true"], cwd=work)
if failures:
    print("\n\n".join(failures))
    sys.exit(f"{tutorial}: {len(failures)} of {ran} commands differ from what the tutorial shows")
print(f"{tutorial}: all {ran} commands print what the tutorial shows")
