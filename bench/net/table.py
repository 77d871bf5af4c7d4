#!/usr/bin/python3
"""bench/net's tables.
  table.py RAW_TSV LINKS_TSV
The link table (the emulator measured by itself), the restore table:
medians over the repetitions, stock / ours, and issue 17's targets per row;
where loopback rows from `criu dump --lazy-pages` were run, each client and
source against stock end to end (criu dump -> criu lazy-pages)."""
import csv
import statistics
import sys

RATES = {"1g": 1e9, "10g": 1e10}


SOURCES = {"images": "our page server", "dump": "criu dump"}


def cells(rows, key, size, daemon, col, source="images"):
    v = [float(r[col]) for r in rows
         if r["link"] == key and r["size_mib"] == size and r["daemon"] == daemon and r["source"] == source]
    # a run whose touches all came after the stream has no fault latency (nan): left out
    v = [x for x in v if x == x] or [float("nan")]
    return statistics.median(v), min(v), max(v)


def spread(c):
    return (c[2] - c[1]) / c[0] * 100 if c[0] else float("nan")


def link_params(key):
    if key == "lo":
        return None, None, None
    rtt, rate, q = key.split("/")
    return float(rtt) * 1e-3, RATES.get(rate, float("nan")), q


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    links = {r["link"]: r for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
    short = {}
    if links:
        print("The emulated links, measured through the emulator (TCP ping-pong, one TCP stream of 2 s; "
              "then pings during a 2 s stream):\n")
        print("| link (RTT ms / rate / queue) | TCP RTT p50 / p99 (us) | stream (Mbit/s) | "
              "during a stream: RTT p50 / p99 (us), Mbit/s | note |")
        print("|---|---|---|---|---|")
        for key, l in links.items():
            rtt, rate, q = link_params(key)
            mbit = float(l["stream_mbit_s"])
            note = ""
            if mbit < 0.9 * rate / 1e6:
                short[key] = mbit
                note = f"**short of its rate**: {mbit / (rate / 1e6) * 100:.0f}% of {rate / 1e9:.0f} Gbit/s"
            print(f"| {key} | {float(l['rtt_p50_us']):.0f} / {float(l['rtt_p99_us']):.0f} | {mbit:.0f} | "
                  f"{float(l['loaded_rtt_p50_us']):.0f} / {float(l['loaded_rtt_p99_us']):.0f}, "
                  f"{float(l['loaded_mbit_s']):.0f} | {note} |")
        print()
    print("Restores, medians (stock / ours); bound = size / rate + RTT; xRTT = multiples of the set RTT:\n")
    print("| link | size | restore (s) | all resident (s) (ours/stock) | MB/s | bound (s), resident/bound | "
          "fault p50 (us) (xRTT) | fault p99 (us) (xRTT) | faults | spread of resident | targets (ours) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = []
    for r in rows:
        k = (r["link"], r["source"], r["size_mib"])
        if k not in keys:
            keys.append(k)
    for key, source, size in keys:
        s, o = {}, {}
        for col in ("restore_s", "resident_s", "fault_p50_us", "fault_p99_us", "faults"):
            s[col], o[col] = cells(rows, key, size, "stock", col, source), cells(rows, key, size, "ours", col, source)
        mb = int(size) * 1048576 / 1e6
        rtt, rate, q = link_params(key)
        sr, orr = s["resident_s"][0], o["resident_s"][0]
        bound = "-"
        met = []
        if rtt is not None:
            b = mb * 8e6 / rate + rtt
            bound = f"{b:.3f}, {sr / b:.2f} / {orr / b:.2f}"
            met.append(("resident ok" if orr <= 1.2 * b else "resident NO") +
                       (f" (link short: {short[key]:.0f} Mbit/s)" if key in short else ""))
            if rtt > 0:
                p50s, p50o = s["fault_p50_us"][0], o["fault_p50_us"][0]
                p99s, p99o = s["fault_p99_us"][0], o["fault_p99_us"][0]
                met.append("p50 ok" if p50o <= 1.5 * rtt * 1e6 else "p50 NO")
                met.append("p99 ok" if p99o <= 3 * rtt * 1e6 else "p99 NO")
        better = orr < sr and o["fault_p50_us"][0] <= s["fault_p50_us"][0] and o["fault_p99_us"][0] <= s["fault_p99_us"][0]
        met.append("better than stock" if better else "not better than stock in all of resident, p50, p99")

        def lat(col):
            a, b2 = s[col][0], o[col][0]
            txt = f"{a:.0f} / {b2:.0f}"
            if rtt:
                txt += f" ({a / (rtt * 1e6):.2f} / {b2 / (rtt * 1e6):.2f})"
            return txt
        label = key if source == "images" else f"{key}, from {SOURCES[source]}"
        print(f"| {label} | {size} MiB | {s['restore_s'][0]:.3f} / {o['restore_s'][0]:.3f} | "
              f"{sr:.3f} / {orr:.3f} ({orr / sr:.2f}) | {mb / sr:.0f} / {mb / orr:.0f} | {bound} | "
              f"{lat('fault_p50_us')} | {lat('fault_p99_us')} | {s['faults'][0]:.0f} / {o['faults'][0]:.0f} | "
              f"{spread(s['resident_s']):.0f}% / {spread(o['resident_s']):.0f}% | {'; '.join(met)} |")

    end_to_end(rows, [(k, src, size) for k, src, size in keys if src == "dump"])


def end_to_end(rows, keys):
    """Each client and source against stock end to end, on the links that had rows from criu dump."""
    if not keys:
        return
    print("\nAgainst stock end to end (criu dump --lazy-pages -> criu lazy-pages), medians (min-max); "
          "all resident from restore start (the dump before it not counted); "
          "x stock = stock end to end's all resident / this one's:\n")
    print("| link | size | source -> client | restore (s) | all resident (s) | MB/s | x stock end to end | "
          "fault p50 / p99 (us) | faults | spread of resident |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    targets = []
    for key, _, size in keys:
        mb = int(size) * 1048576 / 1e6
        base = cells(rows, key, size, "stock", "resident_s", "dump")[0]
        for source in ("dump", "images"):
            ours = cells(rows, key, size, "ours", "resident_s", source)[0]
            if ours == ours:
                met = mb / ours >= 1000 and base / ours >= 8
                targets.append(f"{size} MiB from {SOURCES[source]}: {mb / ours:.0f} MB/s, {base / ours:.2f}x: "
                               f"{'met' if met else 'NOT met'}")
        for source, daemon in (("dump", "stock"), ("dump", "ours"), ("images", "ours"), ("images", "stock")):
            c = {col: cells(rows, key, size, daemon, col, source)
                 for col in ("restore_s", "resident_s", "fault_p50_us", "fault_p99_us", "faults")}
            res = c["resident_s"]
            if res[0] != res[0]:
                continue
            print(f"| {key} | {size} MiB | {SOURCES[source]} -> {daemon} | {c['restore_s'][0]:.3f} | "
                  f"{res[0]:.3f} ({res[1]:.3f}-{res[2]:.3f}) | {mb / res[0]:.0f} ({mb / res[2]:.0f}-{mb / res[1]:.0f}) | "
                  f"{base / res[0]:.2f} | {c['fault_p50_us'][0]:.0f} / {c['fault_p99_us'][0]:.0f} | "
                  f"{c['faults'][0]:.0f} | {spread(res):.0f}% |")
    print("\nIssue 17's loopback target, ours all resident >= 1 GB/s and >= 8x stock end to end: " +
          "; ".join(targets))


main()
