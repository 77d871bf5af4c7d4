#!/bin/bash
# Lazy restore benchmark: ours (build/lazyrestore lazy-pages) against stock
# `criu lazy-pages`, on the same dump, in the same run, alternating order,
# beside this machine's UFFDIO_COPY floor (bench/copyfloor).
#   run.sh [--quick] [--full-floor] [--rows "SIZE:TOUCHES:PROGRAMS ..."] [--reps 5] [--floor-reps 5]
#          [--sizes "MIB..." --touches N --programs "busy idle"]   (one row per size)
#          [--no-floor]   (no copy floor nor probe: A/B runs of the daemons only)
# Default rows: 256:1000:busy,idle 1024:1000:busy,idle 512:20000:busy
# (--quick: 256:1000:busy,idle 512:20000:busy and the quick floor matrix).
# The restored program touches TOUCHES random pages at once, then checks every word:
#   busy  the check runs at once, beside the page streaming (it faults too)
#   idle  the check waits until the daemon has exited (a program that waits)
# Per row and daemon it reports the median, min and max over the repetitions of:
#   restore   time for `criu restore --lazy-pages -d` to return
#   resident  time from restore start until the daemon exits (all pages resident)
#   p50/p99   latency of the restored program's first random page touches
# and, per dump, the copy floor: bench/copyfloor puts the dump's pages file
# (in page cache) into a fresh uffd-registered region with nothing else
# running, for source kinds x steps (16 KiB-4 MiB) x 1/2 threads: the kinds in
# the race at 256 MiB and 1 GiB (every kind with --full-floor), three kinds and
# two steps at other sizes and with --quick.  Its best row (lowest median) is the
# floor "all resident" is read against.  Then the run-time probe an engine
# could use to choose between mmap and pread (copyfloor -P), with its cost.
# Every run's program checks every word of its memory; a mismatch aborts the bench.
# LR_ARGS="--prefetch-step 64 ..." passes extra options to lazyrestore lazy-pages;
# LR_BIN=PATH runs another build of it; LR_BASE=PATH adds a third daemon, "base",
# that build of lazyrestore, to each run (A/B of two commits side by side), with
# LR_BASE_ARGS instead of LR_ARGS if set (A/B of two settings: LR_BASE=build/lazyrestore).
# criu runs with the caller's environment (CRIU_FAULT=130 where criu needs it).
set -euo pipefail
here=$(dirname "$0")
. "$here/../../test/lib/common.sh"
LAZYRESTORE=${LR_BIN:-$LAZYRESTORE}

rows="256:1000:busy,idle 1024:1000:busy,idle 512:20000:busy" reps=5 floor_reps=5 quick=0 full_floor=0 no_floor=0
# The floor's kinds by default: those in the race on the hosts measured so far
# (bench/README.md); --full-floor runs every kind (O_DIRECT, UFFDIO_MOVE, ...) at 256 MiB and 1 GiB.
FLOOR_256_KINDS=mmap-populate,pread,preadv,memfd-sendfile
FLOOR_1G_KINDS=mmap-populate,pread,preadv
PROBE_MIB=16
sizes="" touches=1000 programs="busy idle"
usage() {
	echo "usage: run.sh [--quick] [--full-floor] [--rows \"SIZE:TOUCHES:PROGRAMS ...\"] [--reps N] [--floor-reps N]" \
		"[--sizes \"MIB...\"] [--touches N] [--programs \"busy idle\"] [--no-floor]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 rows="256:1000:busy,idle 512:20000:busy"; shift ;;
	--full-floor) full_floor=1; shift ;;
	--no-floor) no_floor=1; shift ;;
	--rows) rows=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--floor-reps) floor_reps=$2; shift 2 ;;
	--touches) touches=$2; shift 2 ;;
	--programs) programs=$2; shift 2 ;;
	*) usage ;;
	esac
done
if [ -n "$sizes" ]; then
	rows=
	for s in $sizes; do rows="$rows $s:$touches:${programs// /,}"; done
fi
COPYFLOOR=$BUILD/bench/copyfloor
out=$BUILD/bench/restore
mkdir -p "$out"
raw=$out/raw.tsv
printf 'size_mib\ttouches\tprogram\tdaemon\trep\trestore_s\tresident_s\tp50_us\tp99_us\tfault_p50_us\tfault_p99_us\tfaults\n' >"$raw"
floor=$out/floor.tsv
printf 'size_mib\tkind\tstep_kib\tthreads\trep\tseconds\tgbps\tcpu_s\n' >"$floor"
host_noise "before the runs"

now() { date +%s.%N; }

# (if, not &&: under set -e a failing kill of a task already gone would be the script's exit status)
cleanup() {
	if [ -n "${pid:-}" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	if [ -n "${dpid:-}" ]; then kill -KILL "$dpid" 2>/dev/null || true; fi
	if [ -n "${w:-}" ]; then rm -rf "$w"; fi
}
trap cleanup EXIT

# one_run SIZE TOUCHES PROGRAM DAEMON REP: restore the dump in $w/img lazily with DAEMON
one_run() {
	local size=$1 touches=$2 program=$3 daemon=$4 rep=$5 t0 t1 t2 res
	rm -f "$w"/result.* "$w/img/lazy-pages.socket" "$w/status" "$w/idle"
	[ "$program" = idle ] && touch "$w/idle"
	mkfifo "$w/status"
	if [ "$daemon" = stock ]; then
		"$CRIU" lazy-pages -D "$w/img" -o "lazy-$daemon.log" --status-fd 3 3>"$w/status" &
	else
		local bin=$LAZYRESTORE stats=$out/stats-$size-$touches-$program-$rep.json args=${LR_ARGS:-}
		if [ "$daemon" = base ]; then
			bin=$LR_BASE stats=$out/stats-base-$size-$touches-$program-$rep.json args=${LR_BASE_ARGS:-$args}
		fi
		# shellcheck disable=SC2086 # args is a list of options
		"$bin" lazy-pages $args -D "$w/img" -o "lazy-$daemon.log" \
			--stats "$stats" --status-fd 3 3>"$w/status" &
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
		/usr/bin/python3 "$here/summarize.py" "$size" "$program" "$daemon" "$rep" "$t0" "$t1" "$t2" |
		sed "s/\t/\t$touches\t/" >>"$raw"
	kill -KILL "$pid"
	while [ -e "/proc/$pid" ]; do sleep 0.05; done
}

floor_done=" "
for row in $rows; do
	IFS=: read -r size touches progs <<<"$row"
	[ -n "$progs" ] || usage
	w=$(scratch "bench-$size-$touches")
	pid=$(dump_touch "$w" "$size" "$touches") || exit 1
	pages=$(find "$w/img" -name 'pages-*.img' -printf '%s %p\n' | sort -n | tail -n1 | cut -d' ' -f2)
	if [ "$no_floor" = 0 ] && [[ $floor_done != *" $size "* ]]; then
		floor_done="$floor_done$size "
		fargs=()
		if [ "$full_floor" = 1 ] && { [ "$size" = 256 ] || [ "$size" = 1024 ]; }; then
			fargs=()
		elif [ "$quick" = 1 ] || { [ "$size" != 256 ] && [ "$size" != 1024 ]; }; then
			fargs=(-q)
		elif [ "$size" = 256 ]; then
			fargs=(-k "$FLOOR_256_KINDS")
		else
			fargs=(-k "$FLOOR_1G_KINDS")
		fi
		echo "  $size MiB copy floor (${fargs[*]:-every kind}, $floor_reps reps, alternating)..."
		"$COPYFLOOR" -f "$pages" -m "$size" -r "$floor_reps" "${fargs[@]}" | tail -n +2 | sed "s/^/$size\t/" >>"$floor" ||
			{ echo "bench: copyfloor failed" >&2; exit 1; }
		"$COPYFLOOR" -f "$pages" -P "$PROBE_MIB" | sed "s/^/  probe $size MiB: /"
	fi
	for program in ${progs//,/ }; do
		for rep in $(seq 1 "$reps"); do
			# alternate who goes first, so page-cache warmth favours neither
			if [ -n "${LR_BASE:-}" ]; then
				case $((rep % 3)) in
				1) order="stock ours base" ;;
				2) order="base stock ours" ;;
				*) order="ours base stock" ;;
				esac
			elif [ $((rep % 2)) = 1 ]; then order="stock ours"; else order="ours stock"; fi
			for daemon in $order; do
				one_run "$size" "$touches" "$program" "$daemon" "$rep"
				tail -n1 "$raw" | awk -F'\t' '{ printf "  %5s MiB %5s touches %-4s %-5s rep %s: restore %.3f s, resident %.3f s, touch p50 %.1f p99 %.1f us, %d faulting touches p50 %.1f p99 %.1f us\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $12, $10, $11 }'
			done
		done
	done
	kill -KILL "$pid" 2>/dev/null || true
	pid=
	rm -rf "$w"
	w=
done

host_noise "after the runs"
/usr/bin/python3 "$here/summarize.py" tables "$raw" "$floor" | tee "$out/table.txt"
