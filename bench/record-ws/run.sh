#!/bin/bash
# record-ws's cost to the recorded program (plugin/README.md "Recording a
# running program").  reader (256 MiB, reading random words of its first
# 64 MiB) runs 8 s, REPS times without and REPS times with
# 'lazyrestore record-ws --pid --for 3' started at 2 s, interleaved
# (plain recorded recorded plain ...).  Reads per second per phase: before
# the window (0.5-2 s), its first second, the rest of it, after it (5.5-8 s);
# medians (min-max) over the runs, recorded/plain ratio of the medians.
# Needs swap: uses the active one, or makes a 512 MiB swap file in
# build/bench/record-ws and removes it at exit.  ZSWAP=1 turns zswap on for
# the run (system-wide; the previous setting is put back at exit).
#   [ZSWAP=1] bench/record-ws/run.sh [REPS]
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
LR=${LR_BIN:-$TOP/build/lazyrestore}
W=$TOP/build/bench/record-ws
REPS=${1:-5}
mkdir -p "$W" || exit 1
cc -O2 -o "$W/reader" "$TOP/bench/record-ws/reader.c" || exit 1
swapfile=
zswap_was=
cleanup() {
	[ -n "$zswap_was" ] && echo "$zswap_was" >/sys/module/zswap/parameters/enabled
	[ -n "$swapfile" ] && swapoff "$swapfile" && rm -f "$swapfile"
}
trap cleanup EXIT
if [ "$(awk 'NR > 1 && $3 > $4 + 300000' /proc/swaps | wc -l)" = 0 ]; then
	swapfile=$W/swapfile
	{ fallocate -l 512M "$swapfile" && chmod 600 "$swapfile" && mkswap "$swapfile" >/dev/null && swapon "$swapfile"; } ||
		{ echo "no swap, and a swap file could not be turned on" >&2; swapfile=; exit 1; }
fi
if [ "${ZSWAP:-0}" = 1 ]; then
	zswap_was=$(cat /sys/module/zswap/parameters/enabled) && echo Y >/sys/module/zswap/parameters/enabled ||
		{ echo "zswap could not be turned on" >&2; exit 1; }
fi
echo "host: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, $(uname -r)"
echo "load before: $(uptime | sed 's/.*load/load/')"
echo "swap: $(awk 'NR > 1 {print $1, $2}' /proc/swaps | tr '\n' ' ')zswap $(cat /sys/module/zswap/parameters/enabled 2>/dev/null)"
: >"$W/raw.tsv"
run() { # MODE REP
	local mode=$1 rep=$2 pid
	"$W/reader" -m 256 -H 64 -s 8 >"$W/$mode.$rep.out" &
	pid=$!
	until grep -q ready "$W/$mode.$rep.out" 2>/dev/null; do sleep 0.05; done
	if [ "$mode" = recorded ]; then
		sleep 2
		"$LR" record-ws --pid "$pid" --for 3 -o "$W/ws.$rep" 2>"$W/rec.$rep.err"
	fi
	wait "$pid"
	grep -q '^OK' "$W/$mode.$rep.out" || echo "$mode run $rep: reader says $(tail -n1 "$W/$mode.$rep.out")" >&2
	awk -v m="$mode" -v r="$rep" 'NF == 2 && $1 ~ /^[0-9]+$/ {
		p = $1 <= 500 ? "" : $1 <= 2000 ? "before" : $1 <= 3000 ? "window-1st-s" : $1 <= 5000 ? "window-rest" : $1 > 5500 ? "after" : ""
		if (p != "") { s[p] += $2; c[p]++ } }
		END { for (p in s) printf "%s\t%s\t%s\t%.0f\n", m, r, p, s[p] / c[p] * 10 }' "$W/$mode.$rep.out" >>"$W/raw.tsv"
}
for rep in $(seq 1 "$REPS"); do
	if [ $((rep % 2)) = 1 ]; then run plain "$rep"; run recorded "$rep"; else run recorded "$rep"; run plain "$rep"; fi
done
echo "load after: $(uptime | sed 's/.*load/load/')"
python3 - "$W/raw.tsv" <<'PY'
import statistics, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l]
v = {}
for m, r, p, x in rows:
    v.setdefault((m, p), []).append(float(x))
print("reads/s of the recorded program, median (min-max) over %d runs each" % len(set(r for _, r, _, _ in rows)))
print("%-14s %-28s %-28s %s" % ("phase", "plain", "recorded", "recorded/plain"))
for p in ("before", "window-1st-s", "window-rest", "after"):
    a, b = v.get(("plain", p), [0]), v.get(("recorded", p), [0])
    f = lambda x: "%.2fM (%.2f-%.2f)" % (statistics.median(x) / 1e6, min(x) / 1e6, max(x) / 1e6)
    print("%-14s %-28s %-28s %.2f" % (p, f(a), f(b), statistics.median(b) / statistics.median(a)))
PY
echo "recorder lines:"
cat "$W"/rec.*.err | grep -E 'touched|paged out'
