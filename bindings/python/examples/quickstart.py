"""Decide a few questions with a shipped policy: run it from the repository
root after `pip install ./bindings/python`.

    python bindings/python/examples/quickstart.py
"""

from __future__ import annotations

import os

import gatehouse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def main() -> None:
    policies = gatehouse.PolicySet.from_files(
        [os.path.join(ROOT, "policies", "coding-agent.policy"), os.path.join(ROOT, "policies", "zerocode-auto.policy")]
    )
    agent = policies["coding-agent"]
    for host in ["github.com", "GitHub.COM.", "exfil.attacker.example", "169.254.169.254", "2130706433"]:
        print(f"connect {host}:443 ->", agent.connect(host, 443))
    auto = policies["auto"]
    print("exec git push ->", auto.exec(["git", "push", "origin", "main"]))
    print("write .git/hooks/pre-commit ->", auto.write("/work/.git/hooks/pre-commit", "/work"))
    print("mcp github/delete_repo ->", auto.mcp("github", "delete_repo", destructive=True))


if __name__ == "__main__":
    main()
