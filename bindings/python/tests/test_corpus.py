"""The decision corpus (tests/corpus/*.jsonl; tests/corpus.rs says what it
holds) through the Python package: every case's outcome, reason and
deciding rule (file:line) must be the corpus's."""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List, Tuple

import gatehouse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def set_files(name: str) -> List[str]:
    full = os.path.join(ROOT, name)
    if not os.path.isdir(full):
        return [name]
    return sorted(f"{name}/{f}" for f in os.listdir(full) if f.endswith(".policy"))


def test_the_binding_decides_every_case_of_the_corpus() -> None:
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "*.jsonl"))):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    case = json.loads(line)
                    groups.setdefault(case["set"], []).append(case)
    compared = 0
    for name, cases in groups.items():
        sources: List[Tuple[str, str]] = []
        for file in set_files(name):
            with open(os.path.join(ROOT, file), encoding="utf-8") as fh:
                sources.append((file, fh.read()))
        policies = gatehouse.PolicySet.from_sources(sources)
        for case in cases:
            d = policies[case["policy"]].decide(case["query"])
            rule = None if d.rule is None else f"{d.rule.file}:{d.rule.line}"
            got = (d.outcome, d.reason, rule)
            assert got == (case["decision"], case["reason"], case["rule"]), (name, case["query"], got)
            compared += 1
    assert compared > 500, compared
