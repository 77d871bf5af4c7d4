#!/usr/bin/python3
"""Medians (min-max) per app and mode of bench/apps/run.sh's results.tsv, in
two tables per app (the start: the first 1 s and S s of the load; settled:
the window after the daemon's exit, with the huge pages at the end), and the
issue's ratios (first reply against eager, p99 of the first second against
stock, the settled window against the program never dumped)."""
import json
import statistics
import sys

MODES = ("live", "eager", "stock", "ours", "ours+ws")
rows, wins = {}, set()
for line in open(sys.argv[1]):
    app, mode, rep, res, thp, stats = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
    r = json.loads(res)
    r["anon_huge_kib"] = int(thp) if thp else None
    wins.update(k[len("p99_us_"):] for k in r if k.startswith("p99_us_") and k != "p99_us_settled")
    if stats:
        s = json.loads(stats)
        for k in ("faults", "ws_pages", "thp_collapsed", "thp_failed"):
            r[k] = s.get(k)
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


def ratio(app, what, key, a, b):
    x, y = med(app, a, key), med(app, b, key)
    if x is not None and y:
        print("%s %s / %s: %.2f" % (what, a, b, x / y))


def window_cells(rs, w):
    return [cell(vals(rs, "p50_us_" + w), "%.0f"), cell(vals(rs, "p99_us_" + w), "%.0f"),
            cell(vals(rs, "max_us_" + w), "%.0f"), cell(vals(rs, "on_time_" + w, 100), "%.1f")]


def table(app, cols, cells):
    print("| mode | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for m in [m for m in MODES if m in rows[app]] + sorted(set(rows[app]) - set(MODES)):
        rs = rows[app][m]
        print("| %s (%d) | %s |" % (m, len(rs), " | ".join(cells(rs))))
    print()


def win_cols(w):
    return ["p50 %s (us)" % w, "p99 %s (us)" % w, "max %s (us)" % w, "on time %s (%%)" % w]


for app in rows:
    print("\n%s, the start (windows from the restore's return):\n" % app)
    cols = ["restore returns (ms)", "first correct reply (ms)"]
    for w in wins:
        cols += win_cols("first " + w)
    table(app, cols, lambda rs: [cell(vals(rs, "restore_s", 1e3), "%.1f"), cell(vals(rs, "first_reply_s", 1e3), "%.1f")] +
          sum((window_cells(rs, w) for w in wins), []))
    print("%s, settled (from the daemon's exit, or 1 s):\n" % app)
    cols = ["settled at (s)"] + win_cols("settled") + ["faults", "ws pages", "collapsed", "collapse failed",
                                                       "AnonHugePages (kB)"]
    table(app, cols, lambda rs: [cell(vals(rs, "settle_at_s"), "%.2f")] + window_cells(rs, "settled") +
          [cell(vals(rs, k), "%d") for k in ("faults", "ws_pages", "thp_collapsed", "thp_failed", "anon_huge_kib")])
    ratio(app, "first reply", "first_reply_s", "ours+ws", "eager")
    ratio(app, "first reply", "first_reply_s", "ours", "eager")
    ratio(app, "p99 first 1s", "p99_us_1s", "ours+ws", "stock")
    ratio(app, "p99 first 1s", "p99_us_1s", "ours", "stock")
    for m in ("base+ws", "base"):  # an A/B of two builds (run.sh's LR_BASE)
        ratio(app, "p99 first 1s", "p99_us_1s", m, "stock")
    for m in ("ours+ws", "ours", "eager"):
        ratio(app, "p50 settled", "p50_us_settled", m, "live")
        ratio(app, "p99 settled", "p99_us_settled", m, "live")
