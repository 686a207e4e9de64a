"""gatehouse's Python package against cedarpy, in one run, on the same rule
sets and the same streams of distinct, realistic queries; and the package's
per-call overhead against the Rust call on that stream.

    python bindings/python/bench/compare_cedar.py [--quick]

Each engine gets its fastest fair form: gatehouse's typed `connect` and
cedarpy's `is_authorized` with a pre-parsed `PolicySet` and `Entities`
(no re-parse per call). Before timing, both decide every query of the
stream and must agree. Medians of 5 runs over the stream, per query.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Callable, List, Sequence, Set, Tuple

import cedarpy

import gatehouse
from gatehouse import _gatehouse

QUICK = "--quick" in sys.argv
RUNS = 3 if QUICK else 5
STREAM = 1024 if QUICK else 4096


def rules(n: int, rng: random.Random) -> Tuple[List[str], List[str]]:
    """n domain rules, a third of them wildcards: (exact names, suffixes)."""
    exact: List[str] = []
    suffixes: List[str] = []
    for i in range(n):
        name = f"svc{i}.{rng.choice(['api', 'cdn', 'pkg', 'ci'])}{i % 97}.example{i % 13}.com"
        (suffixes if i % 3 == 0 else exact).append(name)
    return exact, suffixes


def stream(exact: Sequence[str], suffixes: Sequence[str], rng: random.Random) -> List[str]:
    """Distinct names: exact hits, subdomain hits, misses sharing suffixes."""
    out: Set[str] = set()
    while len(out) < STREAM:
        k = rng.random()
        if k < 0.3 and exact:
            out.add(rng.choice(exact))
        elif k < 0.6 and suffixes:
            out.add(f"h{rng.randrange(10**6)}.{rng.choice(suffixes)}")
        else:
            base = rng.choice(list(exact) + list(suffixes))
            out.add(f"x{rng.randrange(10**6)}.{base.split('.', 1)[1]}")
    names = sorted(out)
    rng.shuffle(names)
    return names


def gatehouse_policy(exact: Sequence[str], suffixes: Sequence[str]) -> gatehouse.PolicySet:
    lines = [f"    allow domain {e}" for e in exact] + [f"    allow domain *.{s}" for s in suffixes]
    text = "policy p {\n  network {\n" + "\n".join(lines) + "\n  }\n}\n"
    return gatehouse.PolicySet.from_source("bench.policy", text)


def cedar_policy(exact: Sequence[str], suffixes: Sequence[str]) -> "cedarpy.PolicySet":
    out = []
    for e in exact:
        out.append(f'permit(principal, action == Action::"connect", resource) when {{ context.host == "{e}" }};')
    for s in suffixes:
        out.append(f'permit(principal, action == Action::"connect", resource) when {{ context.host like "*.{s}" }};')
    return cedarpy.PolicySet.from_str("\n".join(out))


def per_query(f: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(RUNS):
        t = time.perf_counter_ns()
        f()
        times.append((time.perf_counter_ns() - t) / n)
    return statistics.median(times)


def main() -> None:
    rng = random.Random(7)
    print(f"| rules | gatehouse (Python, typed) | gatehouse (Python, text query) | gatehouse (Rust, same stream) | Python overhead per call | cedarpy (pre-parsed) | cedarpy / gatehouse |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in [10, 100, 1000] if not QUICK else [10, 100]:
        exact, suffixes = rules(n, rng)
        names = stream(exact, suffixes, rng)
        gs = gatehouse_policy(exact, suffixes)
        p = gs["p"]
        cs = cedar_policy(exact, suffixes)
        entities = cedarpy.Entities.from_json_str("[]")

        def cedar(host: str) -> bool:
            req = {
                "principal": 'Sandbox::"s"',
                "action": 'Action::"connect"',
                "resource": 'Host::"h"',
                "context": {"host": host},
            }
            return cedarpy.is_authorized(req, cs, entities).allowed

        # Same answers first: gatehouse normalises (lowercase, trailing dot),
        # the stream is already canonical, so the two must agree exactly.
        for h in names:
            assert p.connect(h, 443).allowed == cedar(h), h

        connect = p.connect
        decide = p.decide
        texts = [f"connect {h}:443" for h in names]
        typed = per_query(lambda: [connect(h, 443) for h in names], len(names))
        text = per_query(lambda: [decide(t) for t in texts], len(names))
        rust_ns, _ = _gatehouse._bench_connect(gs._inner, 0, names, 20)
        rust = rust_ns / (20 * len(names))
        ced = per_query(lambda: [cedar(h) for h in names], len(names))
        print(
            f"| {n} | {typed:.0f} ns | {text:.0f} ns | {rust:.0f} ns | {typed - rust:.0f} ns | {ced:.0f} ns | {ced / typed:.0f}× |"
        )


def addresses() -> None:
    rng = random.Random(11)
    print()
    print("| prefixes | gatehouse (Python, typed) | cedarpy (pre-parsed) | cedarpy / gatehouse |")
    print("|---:|---:|---:|---:|")
    for n in [10, 100, 1000] if not QUICK else [10, 100]:
        nets = sorted({(rng.randrange(11, 99), rng.randrange(256), rng.randrange(256)) for _ in range(n)})
        text = "policy p {\n  network {\n" + "\n".join(f"    allow cidr {a}.{b}.{c}.0/24" for a, b, c in nets) + "\n  }\n}\n"
        p = gatehouse.PolicySet.from_source("bench.policy", text)["p"]
        cs = cedarpy.PolicySet.from_str(
            "\n".join(
                f'permit(principal, action, resource) when {{ ip(context.addr).isInRange(ip("{a}.{b}.{c}.0/24")) }};'
                for a, b, c in nets
            )
        )
        entities = cedarpy.Entities.from_json_str("[]")
        ips = []
        for i in range(STREAM):
            if i % 2 and nets:
                n1, n2, n3 = rng.choice(nets)
                ips.append(f"{n1}.{n2}.{n3}.{rng.randrange(256)}")
            else:
                ips.append(f"{rng.randrange(11, 99)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}")

        def cedar(addr: str) -> bool:
            req = {
                "principal": 'Sandbox::"s"',
                "action": 'Action::"connect"',
                "resource": 'Host::"h"',
                "context": {"addr": addr},
            }
            return cedarpy.is_authorized(req, cs, entities).allowed

        for addr in ips:
            assert p.connect(addr, 443).allowed == cedar(addr), addr
        connect = p.connect
        typed = per_query(lambda: [connect(x, 443) for x in ips], len(ips))
        ced = per_query(lambda: [cedar(x) for x in ips], len(ips))
        print(f"| {n} | {typed:.0f} ns | {ced:.0f} ns | {ced / typed:.0f}× |")


if __name__ == "__main__":
    main()
    addresses()
