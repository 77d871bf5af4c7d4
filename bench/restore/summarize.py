#!/usr/bin/python3
"""bench/restore's figures.
  summarize.py SIZE PROGRAM DAEMON REP T0 T1 T2 < touches
      one raw.tsv row from a result file's touch lines ("latency_ns faulted")
  summarize.py tables RAW_TSV FLOOR_TSV
      the restore table (ours against stock) and the copy-floor table"""
import csv
import statistics
import sys


def pct(v, p):
    return v[min(len(v) - 1, int(len(v) * p))] / 1000 if v else float("nan")


def row(argv):
    size, program, daemon, rep = argv[:4]
    t0, t1, t2 = (float(x) for x in argv[4:7])
    touches = [tuple(map(int, line.split())) for line in sys.stdin if line.strip()]
    lat = sorted(t[0] for t in touches)
    flt = sorted(t[0] for t in touches if t[1] == 1)
    print(f"{size}\t{program}\t{daemon}\t{rep}\t{t1 - t0:.4f}\t{t2 - t0:.4f}\t{pct(lat, .5):.1f}\t{pct(lat, .99):.1f}\t"
          f"{pct(flt, .5):.1f}\t{pct(flt, .99):.1f}\t{len(flt)}")


def mmm(vals):
    """(min, median, max) of vals, NaNs if none."""
    if not vals:
        return (float("nan"),) * 3
    return min(vals), statistics.median(vals), max(vals)


def fmt(v, nd):
    lo, med, hi = v
    return f"{med:.{nd}f} ({lo:.{nd}f}-{hi:.{nd}f})"


def spread(v):
    lo, med, hi = v
    return (hi - lo) / med * 100 if med else float("nan")


def size_name(mib):
    return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"


def floor_cells(floor):
    """{(size, kind, step, threads): [seconds...]}"""
    cells = {}
    for r in floor:
        key = (int(r["size_mib"]), r["kind"], int(r["step_kib"]), int(r["threads"]))
        cells.setdefault(key, []).append(float(r["seconds"]))
    return cells


def floor_tables(floor):
    cells = floor_cells(floor)
    best = {}
    for size in sorted({k[0] for k in cells}):
        mine = {k: mmm(v) for k, v in cells.items() if k[0] == size}
        threads = sorted({k[3] for k in mine})
        print(f"\nUFFDIO_COPY floor, {size_name(size)} (bench/copyfloor: the dump's pages file in page cache into a "
              f"fresh registered region); per thread count: median s (min-max), GB/s of the median")
        print("| source | step | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads) + " |")
        print("|---|---|" + "---|" * len(threads))
        kinds = []
        for k in mine:
            if k[1] not in kinds:
                kinds.append(k[1])
        for kind in kinds:
            for step in sorted({k[2] for k in mine if k[1] == kind}):
                out = []
                for t in threads:
                    v = mine.get((size, kind, step, t))
                    out.append(f"{fmt(v, 3)} {size / 1024 * 1.073741824 / v[1]:.2f} GB/s" if v else "-")
                print(f"| {kind} | {step} KiB | " + " | ".join(out) + " |")
        ranked = sorted(mine.items(), key=lambda kv: kv[1][1])
        n = min(len(v) for v in cells.values())
        print(f"best rows of {size_name(size)} (lowest median of {n}+ runs; spread = (max-min)/median):")
        for i, (k, v) in enumerate(ranked[:5]):
            print(f"  {i + 1}. {k[1]}, {k[2]} KiB steps, {k[3]} thread{'s' if k[3] > 1 else ''}: {fmt(v, 3)} s, "
                  f"{size / 1024 * 1.073741824 / v[1]:.2f} GB/s, spread {spread(v):.0f}%")
        best[size] = ranked[0]
    return best


def restore_tables(rows, best, a="stock", b="ours"):
    metrics = [("restore_s", "restore returns (s)", 3), ("resident_s", "all resident (s)", 3),
               ("p50_us", "first touches p50 (us)", 1), ("p99_us", "first touches p99 (us)", 1),
               ("fault_p50_us", "fault p50 (us)", 1), ("fault_p99_us", "fault p99 (us)", 1),
               ("faults", "touches that faulted", 0)]
    names = {"stock": "stock criu lazy-pages", "ours": "lazyrestore", "base": "lazyrestore (LR_BASE)"}
    print(f"| size | touches | program | metric | {names[a]} | {names[b]} | {b}/{a} |")
    print("|---|---|---|---|---|---|---|")
    groups = sorted({(int(r["size_mib"]), int(r["touches"]), r["program"]) for r in rows},
                    key=lambda g: (g[1], g[0], g[2]))
    spreads, closeness = [], []
    for size, touches, prog in groups:
        sel = [r for r in rows if (int(r["size_mib"]), int(r["touches"]), r["program"]) == (size, touches, prog)]
        for key, label, nd in metrics:
            v = {d: mmm([float(r[key]) for r in sel if r["daemon"] == d]) for d in (a, b)}
            v["stock"], v["ours"] = v[a], v[b]
            ratio = v["ours"][1] / v["stock"][1] if v["stock"][1] else float("nan")
            print(f"| {size_name(size)} | {touches} | {prog} | {label} | {fmt(v['stock'], nd)} | {fmt(v['ours'], nd)} "
                  f"| {ratio:.2f} |")
            if key == "resident_s":
                n = len([r for r in sel if r["daemon"] == "ours"])
                spreads.append(f"  {size_name(size)} {touches} {prog}: {a} {spread(v['stock']):.0f}%, "
                               f"{b} {spread(v['ours']):.0f}% ({n} runs each)")
                if size in best:
                    (_, kind, step, thr), fv = best[size]
                    closeness.append(f"  {size_name(size)} {touches} {prog}: stock {v['stock'][1] / fv[1]:.2f}x, "
                                     f"ours {v['ours'][1] / fv[1]:.2f}x the floor {fv[1]:.3f} s "
                                     f"({kind}, {step} KiB steps, {thr} thread{'s' if thr > 1 else ''})")
    print(f"\ncells: median (min-max) over the runs; {b}/{a}: ratio of the medians")
    print("run-to-run spread of all resident, (max-min)/median:")
    print("\n".join(spreads))
    if closeness:
        print("close to the limit: all resident (median) against the best copy-floor row of the same dump:")
        print("\n".join(closeness))


def tables(raw, floorfile):
    rows = list(csv.DictReader(open(raw), delimiter="\t"))
    floor = list(csv.DictReader(open(floorfile), delimiter="\t"))
    best = floor_tables(floor) if floor else {}
    print()
    if rows:
        restore_tables(rows, best)
    if any(r["daemon"] == "base" for r in rows):
        print("\nA/B: this build against LR_BASE, the same runs")
        restore_tables(rows, {}, "base", "ours")
    print(f"\nraw data: {raw}, {floorfile}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "tables":
        tables(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 8:
        row(sys.argv[1:])
    else:
        sys.exit(__doc__)
