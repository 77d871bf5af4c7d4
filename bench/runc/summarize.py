#!/usr/bin/python3
"""bench/runc's table.
  summarize.py RAW_TSV
Per size and variant: runs, the container's RSS, then downtime and resident
as median (min-max) in seconds; then the ratios of the medians: each lazy
variant's downtime against eager's, and ours against the stock daemon of the
same mode and against stock post-copy (remote-stock)."""
import csv
import statistics
import sys


def mmm(vals):
    return min(vals), statistics.median(vals), max(vals)


def fmt(v):
    lo, med, hi = v
    return f"{med:.3f} ({lo:.3f}-{hi:.3f})"


def ratio(a, b):
    return f"{a / b:.2f}x" if b else "-"


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    cells = {}
    for r in rows:
        cells.setdefault((int(r["size_mib"]), r["variant"]), []).append(r)
    order = ["eager", "images-stock", "images-ours", "remote-stock", "remote-ours"]
    print()
    print("| size | variant | runs | RSS MiB | downtime s, median (min-max) | resident s, median (min-max) "
          "| checkpoint s | runc restore s |")
    print("|---|---|---|---|---|---|---|---|")
    med = {}
    for size in sorted({k[0] for k in cells}):
        for var in order:
            rs = cells.get((size, var))
            if not rs:
                continue
            down = mmm([float(r["downtime_s"]) for r in rs])
            res = mmm([float(r["resident_s"]) for r in rs])
            ck = statistics.median([float(r["checkpoint_s"]) for r in rs])
            rst = statistics.median([float(r["restore_s"]) for r in rs])
            rss = statistics.median([int(r["rss_mib"]) for r in rs])
            med[(size, var)] = (down[1], res[1])
            print(f"| {size} MiB | {var} | {len(rs)} | {rss:.0f} | {fmt(down)} | {fmt(res)} | {ck:.3f} | {rst:.3f} |")
    print()
    print("ratios of the medians (downtime; resident):")
    for size in sorted({k[0] for k in med}):
        eager = med.get((size, "eager"))
        for var in order[1:]:
            m = med.get((size, var))
            if not m:
                continue
            parts = []
            if eager:
                parts.append(f"vs eager {ratio(m[0], eager[0])}; {ratio(m[1], eager[1])}")
            if var.endswith("-ours"):
                for base in (var.replace("-ours", "-stock"), "remote-stock"):
                    b = med.get((size, base))
                    if b and base != var:
                        parts.append(f"vs {base} {ratio(m[0], b[0])}; {ratio(m[1], b[1])}")
            print(f"  {size} MiB {var}: " + ", ".join(dict.fromkeys(parts)))


if __name__ == "__main__":
    main()
