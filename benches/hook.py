#!/usr/bin/env python3
"""`policyc hook` as a harness runs it: a whole process per tool call.

Writes a policy of RULES rules (network domains and command rules, about
half each), then runs `policyc hook claude-code POLICY` RUNS times, each
with one PreToolUse event on standard input (a stream of distinct Bash
commands, edits and fetches), and prints the wall time per call — start to
exit, as the harness waits for it — at p50, p90, p99 and max.

    python3 benches/hook.py target/release/policyc [RULES] [RUNS] [artifact]

With `artifact`, the policy is compiled once (`policyc compile`) and the
hook loads the artifact (`--artifact`) instead of the source.
"""

import json
import os
import subprocess
import sys
import tempfile
import time


def policy(rules: int) -> str:
    half = rules // 2
    lines = ["policy agent {", "  sandbox workspace-write", "  approvals on-request", "  network {"]
    lines += [f"    allow domain h{i}.example{i % 7}.com" for i in range(half)]
    lines += ["  }", "  commands {"]
    lines += [f"    prompt tool{i} deploy" for i in range(rules - half)]
    lines += ["    forbid rm -rf", "  }", "}", ""]
    return "\n".join(lines)


def events(cwd: str, n: int):
    for i in range(n):
        k = i % 3
        if k == 0:
            tool, inp = "Bash", {"command": f"cd src && tool{i % 500} deploy --env e{i} && git status"}
        elif k == 1:
            tool, inp = "Edit", {"file_path": f"{cwd}/src/m{i}.rs", "old_string": "a", "new_string": "b"}
        else:
            tool, inp = "WebFetch", {"url": f"https://h{i % 500}.example{i % 7}.com/p{i}", "prompt": "p"}
        yield json.dumps({
            "session_id": "bench", "tool_use_id": f"c{i}", "cwd": cwd,
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": inp,
        }).encode()


def main() -> None:
    binary = sys.argv[1]
    rules = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "agent.policy")
        with open(path, "w") as f:
            f.write(policy(rules))
        check = subprocess.run([binary, "check", path], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"the generated policy does not check:\n{check.stderr}")
        source = [path]
        if len(sys.argv) > 4 and sys.argv[4] == "artifact":
            art = os.path.join(d, "agent.ghc")
            subprocess.run([binary, "compile", "-o", art, path], check=True, capture_output=True)
            source = ["--artifact", art]
        times, answers = [], {}
        for ev in events(d, runs):
            t = time.perf_counter()
            p = subprocess.run([binary, "hook", "claude-code", *source], input=ev, capture_output=True)
            times.append((time.perf_counter() - t) * 1000)
            if p.returncode != 0 or not p.stdout:
                sys.exit(f"no answer: exit {p.returncode}: {p.stderr.decode()}")
            d_ = json.loads(p.stdout)["hookSpecificOutput"]["permissionDecision"]
            answers[d_] = answers.get(d_, 0) + 1
        times.sort()
        q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
        print(f"policyc hook ({' '.join(source[:1]) if len(source) > 1 else 'source'}), {rules} rules, {runs} calls ({answers}):"
              f" p50 {q(0.50):.2f} ms, p90 {q(0.90):.2f} ms, p99 {q(0.99):.2f} ms, max {times[-1]:.2f} ms")


if __name__ == "__main__":
    main()
