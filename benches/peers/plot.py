#!/usr/bin/env python3
"""The peers' results: markdown tables, the issue-19 targets (met or
missed, with the measured number) and an SVG plot of decision time against
rule count, one line per engine, from criterion's results.

    python3 benches/peers/plot.py [target/criterion] [benches/peers/peers.svg]

Reads target/criterion/{stream,peers}_*/**/new/estimates.json (medians) as
written by `cargo bench -p gatehouse-peers`. The realistic streams
(`stream_*`, 4 096 distinct queries a measurement) come first and are
reported per query (the median divided by the group's throughput); the
single hot queries (`peers_*`) follow. No third-party Python packages."""
import glob, json, math, os, sys

base = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"
out = sys.argv[2] if len(sys.argv) > 2 else "benches/peers/peers.svg"

rows = {}  # (group, engine, n) -> median ns per query
for pattern in ("stream_*", "peers_*"):
    for est in glob.glob(os.path.join(base, pattern, "**", "new", "estimates.json"), recursive=True):
        bench = json.load(open(os.path.join(os.path.dirname(est), "benchmark.json")))
        group, engine, n = bench["full_id"].rsplit("/", 2)
        per = (bench.get("throughput") or {}).get("Elements", 1)
        rows[(group, engine, int(n))] = json.load(open(est))["median"]["point_estimate"] / per
if not rows:
    sys.exit(f"no peers results under {base}: run `cargo bench -p gatehouse-peers` first")

ENGINES = ["gatehouse", "gatehouse_dns", "hashmap", "interval_table", "globset", "linear",
           "ip_network_table", "cedar", "regorus"]
COLORS = {"gatehouse": "#1b7f3b", "gatehouse_dns": "#5fbf7f", "hashmap": "#111111",
          "interval_table": "#b8860b", "globset": "#1f5fbf", "linear": "#888888",
          "ip_network_table": "#8a4fbf", "cedar": "#d9822b", "regorus": "#c0392b"}
ORDER = ["stream_name/all", "stream_name/exact_hit", "stream_name/subdomain_hit",
         "stream_name/miss", "stream_name/deny", "stream_addr/all", "stream_ip/all"]
groups = sorted({g for g, _, _ in rows}, key=lambda g: (ORDER.index(g) if g in ORDER else 99, g))
sizes = sorted({n for _, _, n in rows})


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"


# Tables, and the ratios the README quotes.
for g in groups:
    engines = [e for e in ENGINES if any((g, e, n) in rows for n in sizes)]
    unit = "per query, stream of 4 096" if g.startswith("stream_") else "one hot query"
    print(f"| {g} ({unit}) | " + " | ".join(f"{n:,}" for n in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for e in engines:
        cells = [fmt(rows[(g, e, n)]) if (g, e, n) in rows else "—" for n in sizes]
        print(f"| {e} | " + " | ".join(cells) + " |")
    print()
print("Ratios (peer median / gatehouse median):")
for g in groups:
    for n in sizes:
        gh = rows.get((g, "gatehouse", n))
        if not gh:
            continue
        parts = [f"{e} {rows[(g, e, n)] / gh:,.1f}x" for e in ENGINES[1:] if (g, e, n) in rows]
        print(f"  {g} @ {n:,}: " + ", ".join(parts))
print()

# The targets of issue 19, each met or missed with the measured number.
def get(g, e, n):
    return rows.get((g, e, n))

checks = []
def target(what, ok, measured):
    checks.append((what, ok, measured))

for eng, label in (("gatehouse", "connect"), ("gatehouse_dns", "dns")):
    a, b = get("stream_name/all", eng, 1000), get("stream_name/all", eng, 100000)
    if a:
        target(f"`{label}` by name ≤ 60 ns at 1 000 rules", a <= 60, fmt(a))
    if b:
        target(f"`{label}` by name ≤ 90 ns at 100 000 rules", b <= 90, fmt(b))
    if a and b:
        target(f"`{label}` growth 1 000 → 100 000 ≤ 1.3×", b / a <= 1.3, f"{b / a:.2f}×")
    for n in sizes:
        g, h = get("stream_name/all", eng, n), get("stream_name/all", "hashmap", n)
        if g and h:
            target(f"`{label}` no slower than the hash-map peer at {n:,} rules", g <= h,
                   f"{fmt(g)} against {fmt(h)} ({h / g:.2f}×)")
for cat in ("exact_hit", "subdomain_hit", "miss", "deny"):
    for n in sizes:
        g, o = get(f"stream_name/{cat}", "gatehouse", n), get(f"stream_name/{cat}", "globset", n)
        if g and o:
            target(f"≥ 3× globset, {cat}, {n:,} rules", o / g >= 3, f"{o / g:.2f}×")
a = get("stream_addr/all", "gatehouse", 100000)
if a:
    target("`connect_addr` ≤ 15 ns at 100 000 prefixes", a <= 15, fmt(a))
for n in sizes:
    g, i = get("stream_addr/all", "gatehouse", n), get("stream_addr/all", "interval_table", n)
    if g and i:
        target(f"`connect_addr` no slower than the interval table at {n:,}", g <= i,
               f"{fmt(g)} against {fmt(i)} ({i / g:.2f}×)")
for slow in ("cedar", "regorus"):
    for g_ in ("stream_name/all", "stream_ip/all"):
        for n in sizes:
            g, o = get(g_, "gatehouse", n), get(g_, slow, n)
            if g and o:
                target(f"≥ 1 000× {slow}, {g_}, {n:,} rules", o / g >= 1000, f"{o / g:,.0f}×")
print("| target | measured | |")
print("|---|---|---|")
for what, ok, measured in checks:
    print(f"| {what} | {measured} | {'met' if ok else '**missed**'} |")
print()

# The plot shows the realistic streams only.
groups = [g for g in groups if g.startswith("stream_")] or groups

# The plot: one panel per group, log-log.
W, H, PAD_L, PAD_B, PAD_T, PAD_R = 420, 300, 64, 44, 34, 32
cols = 2
rows_n = math.ceil(len(groups) / cols)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * cols}" height="{H * rows_n + 40}" '
       f'font-family="sans-serif" font-size="11">',
       f'<rect width="100%" height="100%" fill="white"/>']
ys = [v for v in rows.values() if v > 0]
lo, hi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
xlo, xhi = min(sizes), max(sizes)


def px(n):
    return PAD_L + (math.log10(n) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo)) * (W - PAD_L - PAD_R)


def py(v):
    return PAD_T + (1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))) * (H - PAD_T - PAD_B)


for i, g in enumerate(groups):
    ox, oy = (i % cols) * W, (i // cols) * H
    svg.append(f'<g transform="translate({ox},{oy})">')
    svg.append(f'<text x="{W / 2}" y="18" text-anchor="middle" font-weight="bold">{g}</text>')
    d = lo
    while d <= hi:
        y = py(d)
        svg.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        svg.append(f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end">{fmt(d)}</text>')
        d *= 10
    for n in sizes:
        x = px(n)
        svg.append(f'<text x="{x:.1f}" y="{H - PAD_B + 16}" text-anchor="middle">{n:,}</text>')
    svg.append(f'<text x="{(W + PAD_L) / 2}" y="{H - 8}" text-anchor="middle">rules</text>')
    for e in ENGINES:
        pts = [(px(n), py(rows[(g, e, n)])) for n in sizes if (g, e, n) in rows]
        if not pts:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[e]}" stroke-width="2"/>')
        for x, y in pts:
            svg.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{COLORS[e]}"/>')
    svg.append('</g>')
# Legend.
x = 20
for e in ENGINES:
    svg.append(f'<rect x="{x}" y="{H * rows_n + 14}" width="12" height="12" fill="{COLORS[e]}"/>')
    svg.append(f'<text x="{x + 16}" y="{H * rows_n + 24}">{e}</text>')
    x += 30 + 7 * len(e)
svg.append('</svg>')
open(out, "w").write("\n".join(svg) + "\n")
print(f"wrote {out}")
