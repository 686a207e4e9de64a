#!/usr/bin/env python3
"""Prints the benchmark tables of BENCHMARKS.md from criterion's results
(target/criterion/*/new/estimates.json): medians, by group and rule count."""
import glob, json, os, sys

base = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"
rows = {}
for est in glob.glob(os.path.join(base, "**", "new", "estimates.json"), recursive=True):
    bench = json.load(open(os.path.join(os.path.dirname(est), "benchmark.json")))
    rows[bench["full_id"]] = json.load(open(est))["median"]["point_estimate"]

def fmt(ns):
    return f"{ns / 1e6:.1f} ms" if ns >= 1e6 else f"{ns:.1f} ns"

sizes = ["10", "100", "1000", "10000", "100000"]
for group in ["connect_by_name", "connect_by_ip"]:
    names = sorted({k.split("/")[1] for k in rows if k.startswith(group + "/")})
    print(f"| {group} | " + " | ".join(sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for n in names:
        cells = [fmt(rows[f"{group}/{n}/{s}"]) if f"{group}/{n}/{s}" in rows else "—" for s in sizes]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
for group in ["kinds", "parts", "pipeline"]:
    for k in sorted(k for k in rows if k.startswith(group + "/")):
        print(f"{k}: {fmt(rows[k])}")
