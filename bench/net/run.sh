#!/bin/bash
# Remote lazy restore benchmark: our `lazyrestore lazy-pages --page-server`
# against stock `criu lazy-pages --page-server`, both fetching from the same
# `lazyrestore page-server` of the same dump over loopback, in the same run,
# alternating order.
#   run.sh [--sizes "256 1024"] [--reps 3] [--touches 1000]
# The restored program (bench/restore's touch, "busy") touches TOUCHES random
# pages at once, beside the background stream, then checks every word.  Per
# size and client: the median (min-max) over the repetitions of
#   restore   time for `criu restore --lazy-pages -d` to return
#   resident  time from restore start until the client exits (all resident)
#   fault p50/p99  latency of the touches that faulted, during the stream
# A network-namespace pair with `tc netem` delay (0/1/10 ms) and rate (1/10
# Gbit/s) needs sch_netem: the bench says whether this kernel has it, and
# measures loopback only when it does not.
# Every run's program checks every word of its memory; a mismatch aborts the bench.
set -euo pipefail
here=$(dirname "$0")
. "$here/../../test/lib/common.sh"

sizes="256 1024" reps=3 touches=1000
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) sizes=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--touches) touches=$2; shift 2 ;;
	*) echo "usage: run.sh [--sizes \"MIB...\"] [--reps N] [--touches N]" >&2; exit 2 ;;
	esac
done
TOUCH=$BUILD/bench/touch
out=$BUILD/bench/net
mkdir -p "$out"
raw=$out/raw.tsv
printf 'size_mib\tprogram\tdaemon\trep\trestore_s\tresident_s\tp50_us\tp99_us\tfault_p50_us\tfault_p99_us\tfaults\n' >"$raw"

now() { date +%s.%N; }

cleanup() {
	if [ -n "${pid:-}" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	if [ -n "${dpid:-}" ]; then kill -KILL "$dpid" 2>/dev/null || true; fi
	if [ -n "${spid:-}" ]; then kill -KILL "$spid" 2>/dev/null || true; fi
	if [ -n "${w:-}" ]; then rm -rf "$w"; fi
}
trap cleanup EXIT

# netem: the delay/rate rows need it; say plainly when this kernel lacks it
netem_ok() {
	local ns=lrbench$$ ok=1
	ip netns add "$ns" 2>/dev/null || return 1
	if ip link add "v$$a" type veth peer name "v$$b" netns "$ns" 2>/dev/null; then
		tc qdisc add dev "v$$a" root netem delay 1ms 2>/dev/null && ok=0
		ip link del "v$$a" 2>/dev/null || true
	fi
	ip netns del "$ns"
	return $ok
}
if netem_ok; then
	echo "bench/net: sch_netem is here, but only loopback rows are implemented so far"
else
	echo "bench/net: no delay/rate rows: this kernel ($(uname -r)) has no sch_netem (tc: qdisc kind unknown); loopback only"
fi

# one_run SIZE DAEMON REP: restore $w/img lazily, pages from our page server on $port
one_run() {
	local size=$1 daemon=$2 rep=$3 t0 t1 t2 res
	rm -f "$w"/result.* "$w/img/lazy-pages.socket" "$w/status" "$w/idle"
	mkfifo "$w/status"
	if [ "$daemon" = stock ]; then
		"$CRIU" lazy-pages -D "$w/img" --page-server --address 127.0.0.1 --port "$port" -o "lazy-$daemon.log" \
			--status-fd 3 3>"$w/status" &
	else
		"$LAZYRESTORE" lazy-pages -D "$w/img" --page-server --address 127.0.0.1 --port "$port" \
			-o "lazy-$daemon.log" -v3 --stats "$out/stats-$size-$rep.json" --status-fd 3 3>"$w/status" &
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
	wait_for_file "$w/result.$pid" 300 || { echo "bench: restored program wrote no result" >&2; exit 1; }
	res=$(head -n1 "$w/result.$pid")
	[ "$res" = OK ] || { echo "bench: WRONG MEMORY after $daemon restore of $size MiB: $res" >&2; exit 1; }
	tail -n +2 "$w/result.$pid" |
		/usr/bin/python3 "$here/../restore/summarize.py" "$size" busy "$daemon" "$rep" "$t0" "$t1" "$t2" >>"$raw"
	if [ "$daemon" = ours ]; then # which connections the client had (one, or a second for faults)
		grep -h -o 'a second connection for urgent requests\|the server takes one connection' "$w/img/lazy-ours.log" |
			head -n1 | sed 's/^/    ours: /'
	fi
	kill -KILL "$pid"
	while [ -e "/proc/$pid" ]; do sleep 0.05; done
}

for size in $sizes; do
	w=$(scratch "bench-net-$size")
	setsid "$TOUCH" -d "$w" -m "$size" -n "$touches" </dev/null >/dev/null 2>&1 &
	pid=$!
	disown "$pid"
	wait_for_file "$w/ready.$pid" 120
	criu_dump "$pid" "$w/img" || { echo "bench: dump of $size MiB failed" >&2; exit 1; }
	sync
	rm -f "$w/ps.out"
	"$LAZYRESTORE" page-server -D "$w/img" --address 127.0.0.1 --port 0 --sessions 0 -o "$w/ps.log" >"$w/ps.out" 2>&1 &
	spid=$!
	wait_for_file "$w/ps.out" 10
	for _ in $(seq 50); do
		port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$w/ps.out")
		[ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "$port" ] || { echo "bench: the page server did not start" >&2; exit 1; }
	for rep in $(seq 1 "$reps"); do
		if [ $((rep % 2)) = 1 ]; then order="stock ours"; else order="ours stock"; fi
		for daemon in $order; do
			one_run "$size" "$daemon" "$rep"
			tail -n1 "$raw" | awk -F'\t' '{ printf "  %5s MiB %-5s rep %s: restore %.3f s, resident %.3f s, %d faulting touches p50 %.1f p99 %.1f us\n", $1, $3, $4, $5, $6, $11, $9, $10 }'
		done
	done
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	spid=
	rm -rf "$w"
	w=
done

/usr/bin/python3 - "$raw" <<'PY' | tee "$out/table.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def cell(size, daemon, col):
    # a run whose touches all came after the stream has no fault latency (nan): left out
    v = [float(r[col]) for r in rows if r["size_mib"] == size and r["daemon"] == daemon]
    v = [x for x in v if x == x] or [float("nan")]
    return statistics.median(v), min(v), max(v)
print("| size | restore (s) stock / ours | all resident (s) stock / ours (ours/stock) | MB/s stock / ours | fault p50 (us) stock / ours | fault p99 (us) stock / ours | spread of resident stock / ours |")
print("|---|---|---|---|---|---|---|")
for size in sorted({r["size_mib"] for r in rows}, key=int):
    s, o = {}, {}
    for col in ("restore_s", "resident_s", "fault_p50_us", "fault_p99_us"):
        s[col], o[col] = cell(size, "stock", col), cell(size, "ours", col)
    mb = int(size) * 1048576 / 1e6
    sp = lambda c: (c[2] - c[1]) / c[0] * 100
    print(f"| {size} MiB | {s['restore_s'][0]:.3f} / {o['restore_s'][0]:.3f} | "
          f"{s['resident_s'][0]:.3f} / {o['resident_s'][0]:.3f} ({o['resident_s'][0] / s['resident_s'][0]:.2f}) | "
          f"{mb / s['resident_s'][0]:.0f} / {mb / o['resident_s'][0]:.0f} | "
          f"{s['fault_p50_us'][0]:.0f} / {o['fault_p50_us'][0]:.0f} | {s['fault_p99_us'][0]:.0f} / {o['fault_p99_us'][0]:.0f} | "
          f"{sp(s['resident_s']):.0f}% / {sp(o['resident_s']):.0f}% |")
PY
