#!/usr/bin/python3
"""One raw.tsv row from a result file's touch lines ("latency_ns faulted").
usage: summarize.py SIZE PROGRAM DAEMON REP T0 T1 T2 < touches"""
import statistics, sys

size, program, daemon, rep = sys.argv[1:5]
t0, t1, t2 = (float(x) for x in sys.argv[5:8])
touches = [tuple(map(int, line.split())) for line in sys.stdin if line.strip()]
lat = sorted(t[0] for t in touches)
flt = sorted(t[0] for t in touches if t[1] == 1)


def pct(v, p):
    return v[min(len(v) - 1, int(len(v) * p))] / 1000 if v else float("nan")


print(f"{size}\t{program}\t{daemon}\t{rep}\t{t1 - t0:.4f}\t{t2 - t0:.4f}\t{pct(lat, .5):.1f}\t{pct(lat, .99):.1f}\t"
      f"{pct(flt, .5):.1f}\t{pct(flt, .99):.1f}\t{len(flt)}")
