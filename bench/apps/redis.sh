#!/bin/bash
# redis-server restored four ways from one dump, a GET load starting the moment
# `criu restore -d` returns (bench/apps/getload.py: 90% of the requests on 10000
# hot keys, every reply checked):
#   eager   criu restore, every page copied before the program runs
#   stock   criu restore --lazy-pages, pages served by stock `criu lazy-pages`
#   ours    the same, served by `lazyrestore lazy-pages`
#   ours+ws ours with the dump's working set (recorded once, beforehand, by a
#           restore with --record-ws under the same load)
# Per mode and repetition (modes alternate within a repetition): time from the
# restore's start to the first correct reply, request p50/p99 over the first
# second after it, and for ours the daemon's stats (faults, working-set pages,
# AnonHugePages).  Prints a table of medians with min-max.
#   redis.sh [--keys N] [--size BYTES] [--reps R]     (default 1000000 x 1000 B: ~1.2 GiB)
set -uo pipefail # not -e: the bound helpers of common.sh return non-zero on their way
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../test/lib/common.sh"
. "$TOP/test/lib/redis.sh"

keys=1000000 size=1000 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--keys) keys=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	*) echo "usage: $0 [--keys N] [--size BYTES] [--reps R]" >&2; exit 2 ;;
	esac
done
d=$(scratch bench-redis)
out=$d/results.tsv
LAZY_PID=
at_exit redis_cleanup

now() { python3 -c 'import time; print(time.monotonic())'; }

# start_daemon NAME BIN [ARGS]: BIN lazy-pages on the dump, until it listens
start_daemon() {
	local name=$1 bin=$2
	shift 2
	status_open "$d/status" || return 1
	bounded_start -o "$d/$name.out" "$(basename "$bin") lazy-pages ($name)" "$d/img/lazy-pages-$name.log" \
		"$bin" lazy-pages --no-default-config --images-dir "$d/img" --log-file "lazy-pages-$name.log" \
		--verbosity=3 --status-fd 9 "$@" 9>"$d/status"
	LAZY_PID=$BOUNDED_PID
	status_byte 30 "the status byte of $name" "$d/img/lazy-pages-$name.log" "$LAZY_PID"
	[ "$STATUS_BYTE" = 00 ] || { echo "no status byte from $name" >&2; return 1; }
}

# one MODE REP: restore, load, stop; appends a line to $out
one() {
	local mode=$1 rep=$2 name=$1-$2 t0 res stats="" extra=()
	wait_tree_gone "$d/img" >/dev/null || { echo "pids still in use" >&2; return 1; }
	case $mode in
	eager) ;;
	stock) start_daemon "$name" "$CRIU" || return 1 ;;
	ours | ours+ws | record) 
		[ "$mode" = record ] && extra=(--record-ws)
		if [ "$mode" = ours ]; then mv -f "$d/img/lazyrestore-ws.img" "$d/ws.off" 2>/dev/null || true; fi
		if [ "$mode" = ours+ws ]; then mv -f "$d/ws.off" "$d/img/lazyrestore-ws.img" 2>/dev/null || true; fi
		start_daemon "$name" "$LAZYRESTORE" --stats "stats-$name.json" "${extra[@]}" || return 1 ;;
	esac
	t0=$(now)
	local lazy=(--lazy-pages)
	[ "$mode" = eager ] && lazy=()
	criu_restore "$name" "$d/img" "${lazy[@]}" -d || { echo "restore $name failed: $(first_error "$d/img/restore-$name.log")" >&2; return 1; }
	res=$(python3 "$here/getload.py" --port "$REDIS_PORT" --keys "$keys" --size "$size" --t0 "$t0" --seed "$rep") ||
		{ echo "$name: the load failed" >&2; return 1; }
	[ -n "$LAZY_PID" ] && { bounded_wait 120 "$LAZY_PID"; LAZY_PID=; }
	kill_redis_pid "$DUMPED_PID"
	[ -f "$d/img/stats-$name.json" ] && stats=$(tr -d '\n ' <"$d/img/stats-$name.json")
	[ "$mode" = record ] && return 0
	printf '%s\t%s\t%s\t%s\n' "$mode" "$rep" "$res" "$stats" >>"$out"
	echo "  $mode rep $rep: $res"
}

command -v redis-server >/dev/null || { echo "redis-server not installed" >&2; exit 1; }
redis_start "$d" || { echo "redis-server did not start" >&2; exit 1; }
fill=$(python3 "$here/getload.py" --fill --keys "$keys" --size "$size" |
	run_bounded 600 "filling redis" /dev/null redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --pipe 2>&1)
grep -q "errors: 0, replies: $keys" <<<"$fill" || { echo "fill failed: $fill" >&2; exit 1; }
echo "redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'): $keys keys x $size B, used_memory $(rcli INFO memory | sed -n 's/^used_memory_human:\(.*\)\r*$/\1/p')"
DUMPED_PID=$REDIS_PID
criu_dump "$REDIS_PID" "$d/img" || { echo "criu dump failed: $(first_error "$d/img/dump.log")" >&2; exit 1; }
du -sh "$d/img" | sed 's/^/dump: /'
: >"$out"
one record 0 || exit 1
[ -s "$d/img/lazyrestore-ws.img" ] || { echo "no working set recorded" >&2; exit 1; }
for rep in $(seq "$reps"); do
	# rotate the order each repetition: no mode always goes first
	modes=(eager stock ours ours+ws)
	for k in 0 1 2 3; do one "${modes[$(((k + rep) % 4))]}" "$rep" || exit 1; done
done
python3 "$here/summarize.py" "$out"
