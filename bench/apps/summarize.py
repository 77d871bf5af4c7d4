#!/usr/bin/python3
"""Medians (min-max) per mode of bench/apps/redis.sh's results.tsv."""
import json
import statistics
import sys

rows = {}
for line in open(sys.argv[1]):
    mode, rep, res, stats = (line.rstrip("\n").split("\t") + [""])[:4]
    r = json.loads(res)
    if stats:
        s = json.loads(stats)
        r["faults"] = s.get("faults")
        r["ws_pages"] = s.get("ws_pages")
        r["anon_huge_kib"] = sum(t["kib"] for t in s.get("anon_huge_kib", []))
    rows.setdefault(mode, []).append(r)


def cell(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    m = statistics.median(vals)
    return (fmt % m) + " (" + (fmt % min(vals)) + "-" + (fmt % max(vals)) + ")"


order = [m for m in ("eager", "stock", "ours", "ours+ws") if m in rows]
print("| mode | first correct reply (ms) | p50 first s (us) | p99 first s (us) | requests first s | faults | ws pages |")
print("|---|---|---|---|---|---|---|")
for m in order:
    rs = rows[m]
    print("| %s | %s | %s | %s | %s | %s | %s |" % (
        m, cell([r["first_reply_s"] * 1e3 for r in rs], "%.1f"), cell([r["p50_us"] for r in rs], "%.0f"),
        cell([r["p99_us"] for r in rs], "%.0f"), cell([r["requests"] for r in rs], "%d"),
        cell([r.get("faults") for r in rs], "%d"), cell([r.get("ws_pages") for r in rs], "%d")))
base = {m: statistics.median([r["first_reply_s"] for r in rows[m]]) for m in order}
if "eager" in base and "ours+ws" in base:
    print("first reply ours+ws / eager: %.2f" % (base["ours+ws"] / base["eager"]))
if "stock" in rows and "ours+ws" in rows:
    p = lambda m: statistics.median([r["p99_us"] for r in rows[m]])
    print("p99 first second ours+ws / stock: %.2f" % (p("ours+ws") / p("stock")))
