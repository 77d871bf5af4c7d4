#!/bin/bash
# Lazy restore benchmark: ours (build/lazyrestore lazy-pages) against stock
# `criu lazy-pages`, on the same dump, in the same run, alternating order.
#   run.sh [--sizes "256 1024 4096"] [--reps 5] [--touches 1000] [--programs "busy idle"]
# The restored program touches random pages at once, then checks every word:
#   busy  the check runs at once, beside the page streaming (it faults too)
#   idle  the check waits until the daemon has exited (a program that waits)
# Per size, program and daemon it reports medians over the repetitions of:
#   restore   time for `criu restore --lazy-pages -d` to return
#   resident  time from restore start until the daemon exits (all pages resident)
#   p50/p99   latency of the restored program's first random page touches
# and, per size, the copy floor: seconds for bench/copyfloor to UFFDIO_COPY the
# dump's pages with 1 and 2 threads and nothing else running (what the kernel
# allows here; "all resident" adds the restore itself and the faults).
# Every run's program checks every word of its memory; a mismatch aborts the bench.
# LR_ARGS="--prefetch-step 64 ..." passes extra options to lazyrestore lazy-pages.
set -euo pipefail
. "$(dirname "$0")/../../test/lib/common.sh"

sizes="256 1024 4096" reps=5 touches=1000 programs="busy idle"
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) sizes=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--touches) touches=$2; shift 2 ;;
	--programs) programs=$2; shift 2 ;;
	*) echo "usage: run.sh [--sizes \"MIB...\"] [--reps N] [--touches N] [--programs \"busy idle\"]" >&2; exit 2 ;;
	esac
done
TOUCH=$BUILD/bench/touch
COPYFLOOR=$BUILD/bench/copyfloor
out=$BUILD/bench/restore
mkdir -p "$out"
raw=$out/raw.tsv
printf 'size_mib\tprogram\tdaemon\trep\trestore_s\tresident_s\tp50_us\tp99_us\tfault_p50_us\tfault_p99_us\tfaults\n' >"$raw"
floor=$out/floor.tsv
printf 'size_mib\tthreads\trep\tseconds\n' >"$floor"

now() { date +%s.%N; }

# (if, not &&: under set -e a failing kill of a task already gone would be the script's exit status)
cleanup() {
	if [ -n "${pid:-}" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	if [ -n "${dpid:-}" ]; then kill -KILL "$dpid" 2>/dev/null || true; fi
}
trap cleanup EXIT

# one_run SIZE PROGRAM DAEMON REP: restore the dump in $w/img lazily with DAEMON
one_run() {
	local size=$1 program=$2 daemon=$3 rep=$4 t0 t1 t2 res
	rm -f "$w"/result.* "$w/img/lazy-pages.socket" "$w/status" "$w/idle"
	[ "$program" = idle ] && touch "$w/idle"
	mkfifo "$w/status"
	if [ "$daemon" = stock ]; then
		"$CRIU" lazy-pages -D "$w/img" -o "lazy-$daemon.log" --status-fd 3 3>"$w/status" &
	else
		"$LAZYRESTORE" lazy-pages ${LR_ARGS:-} -D "$w/img" -o "lazy-$daemon.log" --stats "$out/stats-$size-$program-$rep.json" \
			--status-fd 3 3>"$w/status" &
	fi
	dpid=$!
	timeout 30 head -c1 "$w/status" >/dev/null
	t0=$(now)
	"$CRIU" restore -D "$w/img" --lazy-pages -d -o "restore-$daemon.log"
	t1=$(now)
	kill -USR1 "$pid"
	wait "$dpid" || { echo "bench: $daemon lazy-pages failed, see $w/img/lazy-$daemon.log" >&2; exit 1; }
	t2=$(now)
	dpid=
	kill -USR2 "$pid"
	wait_for_file "$w/result.$pid" 300 || { echo "bench: restored program wrote no result" >&2; exit 1; }
	res=$(head -n1 "$w/result.$pid")
	[ "$res" = OK ] || { echo "bench: WRONG MEMORY after $daemon restore of $size MiB: $res" >&2; exit 1; }
	tail -n +2 "$w/result.$pid" |
		/usr/bin/python3 "$(dirname "$0")/summarize.py" "$size" "$program" "$daemon" "$rep" "$t0" "$t1" "$t2" >>"$raw"
	kill -KILL "$pid"
	while [ -e "/proc/$pid" ]; do sleep 0.05; done
}

for size in $sizes; do
	w=$(scratch "bench-$size")
	setsid "$TOUCH" -d "$w" -m "$size" -n "$touches" </dev/null >/dev/null 2>&1 &
	pid=$!
	disown "$pid"
	wait_for_file "$w/ready.$pid" 120
	criu_dump "$pid" "$w/img" || { echo "bench: dump of $size MiB failed" >&2; exit 1; }
	sync # the dump's writeback would otherwise slow whichever daemon runs first
	pages=$(ls -S "$w"/img/pages-*.img | head -n1)
	for rep in $(seq 1 "$reps"); do
		# alternate as for the daemons: memory just freed by a run is cheaper for the next
		if [ $((rep % 2)) = 1 ]; then order="1 2"; else order="2 1"; fi
		for threads in $order; do
			s=$("$COPYFLOOR" -f "$pages" -m "$size" -t "$threads") || { echo "bench: copyfloor failed" >&2; exit 1; }
			printf '%s\t%s\t%s\t%s\n' "$size" "$threads" "$rep" "$s" >>"$floor"
			echo "  $size MiB copy floor, $threads thread(s), rep $rep: $s s"
		done
	done
	for program in $programs; do
		for rep in $(seq 1 "$reps"); do
			# alternate who goes first, so page-cache warmth favours neither
			if [ $((rep % 2)) = 1 ]; then order="stock ours"; else order="ours stock"; fi
			for daemon in $order; do
				one_run "$size" "$program" "$daemon" "$rep"
				tail -n1 "$raw" | awk -F'\t' '{ printf "  %5s MiB %-4s %-5s rep %s: restore %.3f s, resident %.3f s, touch p50 %.1f p99 %.1f us, %d faulting touches p50 %.1f p99 %.1f us\n", $1, $2, $3, $4, $5, $6, $7, $8, $11, $9, $10 }'
			done
		done
	done
	rm -rf "$w/img"
done

/usr/bin/python3 - "$raw" "$floor" <<'PY' | tee "$out/table.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
floor = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
metrics = [("restore_s", "restore returns (s)"), ("resident_s", "all resident (s)"),
           ("p50_us", "first touches p50 (us)"), ("p99_us", "first touches p99 (us)"),
           ("fault_p50_us", "fault p50 (us)"), ("fault_p99_us", "fault p99 (us)"),
           ("faults", "touches that faulted")]
print("| size | program | metric | stock criu lazy-pages | lazyrestore | ours/stock |")
print("|---|---|---|---|---|---|")
for size in sorted({int(r["size_mib"]) for r in rows}):
    for prog in sorted({r["program"] for r in rows}):
        sel = [r for r in rows if int(r["size_mib"]) == size and r["program"] == prog]
        for key, label in metrics:
            med = {}
            for d in ("stock", "ours"):
                vals = [float(r[key]) for r in sel if r["daemon"] == d]
                med[d] = statistics.median(vals) if vals else float("nan")
            n = len([r for r in sel if r["daemon"] == "ours"])
            ratio = med["ours"] / med["stock"] if med["stock"] else float("nan")
            print(f"| {size} MiB | {prog} | {label} | {med['stock']:.3f} | {med['ours']:.3f} | {ratio:.2f} |")
print(f"\nmedians of {n} runs each; raw data: {sys.argv[1]}")
print("\n| size | UFFDIO_COPY floor, 1 thread (s) | 2 threads (s) |")
print("|---|---|---|")
for size in sorted({int(r["size_mib"]) for r in floor}):
    med = [statistics.median(float(r["seconds"]) for r in floor if int(r["size_mib"]) == size and r["threads"] == t)
           for t in ("1", "2")]
    print(f"| {size} MiB | {med[0]:.3f} | {med[1]:.3f} |")
print(f"copy floor: bench/copyfloor, medians; raw data: {sys.argv[2]}")
PY
