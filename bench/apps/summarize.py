#!/usr/bin/python3
"""Medians (min-max) per app and mode of bench/apps/run.sh's results.tsv,
and the issue's ratios (first reply against eager, p99 against stock, the
whole window against the live program)."""
import json
import statistics
import sys

rows, wins = {}, set()
for line in open(sys.argv[1]):
    app, mode, rep, res, thp, stats = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
    r = json.loads(res)
    r["anon_huge_kib"] = int(thp) if thp else None
    wins.update(k[len("p99_us_"):] for k in r if k.startswith("p99_us_"))
    if stats:
        s = json.loads(stats)
        r["faults"] = s.get("faults")
        r["ws_pages"] = s.get("ws_pages")
        r["thp_collapsed"] = s.get("thp_collapsed")
    rows.setdefault(app, {}).setdefault(mode, []).append(r)
wins = sorted(wins, key=lambda w: float(w[:-1]))


def vals(rs, key, scale=1):
    return [r[key] * scale for r in rs if r.get(key) is not None]


def cell(v, fmt):
    if not v:
        return "-"
    return (fmt % statistics.median(v)) + " (" + (fmt % min(v)) + "-" + (fmt % max(v)) + ")"


def med(app, mode, key):
    v = vals(rows[app].get(mode, []), key)
    return statistics.median(v) if v else None


def ratio(what, a, b):
    if a is not None and b:
        print("%s: %.2f" % (what, a / b))


cols = ["restore returns (ms)", "first correct reply (ms)"]
for w in wins:
    cols += ["p50 first %s (us)" % w, "p99 first %s (us)" % w]
cols += ["faults", "ws pages", "AnonHugePages (kB)"]
for app in rows:
    print("\n%s:\n" % app)
    print("| mode | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for m in [m for m in ("live", "eager", "stock", "ours", "ours+ws") if m in rows[app]]:
        rs = rows[app][m]
        c = [cell(vals(rs, "restore_s", 1e3), "%.1f"), cell(vals(rs, "first_reply_s", 1e3), "%.1f")]
        for w in wins:
            c += [cell(vals(rs, "p50_us_" + w), "%.0f"), cell(vals(rs, "p99_us_" + w), "%.0f")]
        c += [cell(vals(rs, "faults"), "%d"), cell(vals(rs, "ws_pages"), "%d"), cell(vals(rs, "anon_huge_kib"), "%d")]
        print("| %s (%d) | %s |" % (m, len(rs), " | ".join(c)))
    print()
    ratio("first reply ours+ws / eager", med(app, "ours+ws", "first_reply_s"), med(app, "eager", "first_reply_s"))
    ratio("first reply ours / eager", med(app, "ours", "first_reply_s"), med(app, "eager", "first_reply_s"))
    ratio("p99 first 1s ours+ws / stock", med(app, "ours+ws", "p99_us_1s"), med(app, "stock", "p99_us_1s"))
    if wins[-1] != "1s":
        w = wins[-1]
        ratio("p50 first %s ours+ws / live" % w, med(app, "ours+ws", "p50_us_" + w), med(app, "live", "p50_us_" + w))
        ratio("p99 first %s ours+ws / live" % w, med(app, "ours+ws", "p99_us_" + w), med(app, "live", "p99_us_" + w))
