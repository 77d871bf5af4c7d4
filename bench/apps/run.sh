#!/bin/bash
# Key-value servers restored four ways from one dump each, a GET load starting
# the moment `criu restore -d` returns (bench/apps/load.py: 90% of the requests
# on 10000 hot keys, every reply checked):
#   eager   criu restore, every page copied before the program runs
#   stock   criu restore --lazy-pages, pages served by stock `criu lazy-pages`
#   ours    the same, served by `lazyrestore lazy-pages`
#   ours+ws ours with the dump's working set (recorded once, beforehand, by a
#           restore with --record-ws under the same load)
# and, before the dump, the same load on the program as it runs ("live").
# --modes picks some of them; modes "base" and "base+ws" are "ours" and "ours+ws"
# run by LR_BASE=another build of lazyrestore (an A/B of two builds, interleaved
# in one run); LR_ARGS adds options to ours' and base's command line (-v4: the
# collapses with their times).
# The apps: redis (redis-server), memcached (memcached -L: its memory
# preallocated with MADV_HUGEPAGE) and pydict (bench/apps/pydict.py: a python
# process holding a dict), each filled with --keys values of --size bytes.
# Per app, mode and repetition (modes rotate within a repetition): time from
# the restore's start to the first correct reply, request p50/p99 over the
# first second and the first --seconds after it, AnonHugePages of the process
# at the end, and for ours the daemon's stats.  Prints a table of medians with
# min-max per app.
#   run.sh [--apps "redis memcached pydict"] [--keys N] [--size BYTES] [--reps R] [--seconds S]
#   (defaults: all three, 1000000 x 1000 B: about 1.1 GiB each, 3 repetitions, 10 s)
set -uo pipefail # not -e: the bound helpers of common.sh return non-zero on their way
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../test/lib/common.sh"
. "$TOP/test/lib/redis.sh"

apps="redis memcached pydict" keys=1000000 size=1000 reps=3 seconds=10 rate=5000 settle=3
all_modes="eager stock ours ours+ws"
while [ $# -gt 0 ]; do
	case $1 in
	--rate) rate=$2; shift 2 ;;
	--modes) all_modes=$2; shift 2 ;;
	--settle) settle=$2; shift 2 ;;
	--apps) apps=$2; shift 2 ;;
	--keys) keys=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	*) echo "usage: $0 [--apps \"redis memcached pydict\"] [--keys N] [--size BYTES] [--reps R] [--seconds S] [--rate R] [--settle W] [--modes \"eager stock ours ours+ws\"]" >&2; exit 2 ;;
	esac
done
windows=1
[ "$seconds" != 1 ] && windows=1,$seconds
# the dumped python is Debian's own (a pyenv shim would be a shell in between)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
top=$(scratch bench-apps)
out=$top/results.tsv
: >"$out"
LAZY_PID='' APP_PID='' APP_PIDS=()
app_cleanup() {
	local pid
	for pid in "${APP_PIDS[@]}"; do kill_app "$pid"; done
	[ -n "$LAZY_PID" ] && _bound_kill "$LAZY_PID"
}
at_exit app_cleanup

# ---- the apps: start_APP DIR sets APP_PORT, APP_PID and APP_PROTO --

start_redis() {
	redis_start "$1" || return 1
	APP_PORT=$REDIS_PORT APP_PID=$REDIS_PID APP_PROTO=resp
}

# memcached's own pid, from itself
mc_pid() {
	local fd line
	{ exec {fd}<>"/dev/tcp/127.0.0.1/$APP_PORT"; } 2>/dev/null || return 1
	printf 'stats\r\n' >&"$fd"
	while read -r -t 5 -u "$fd" line; do
		case $line in
		"STAT pid "*) line=${line#STAT pid } && echo "${line%$'\r'}" ;;
		END*) break ;;
		esac
	done
	exec {fd}<&-
}

start_memcached() {
	APP_PORT=$(free_port) || return 1
	# -L: preallocated, MADV_HUGEPAGE; -m: room for the values without evictions
	(cd "$1" && exec setsid memcached -u root -l 127.0.0.1 -p "$APP_PORT" -U 0 -L \
		-m $((keys * (size + 200) / 1048576 + 64)) </dev/null >/dev/null 2>&1 &)
	for _ in $(seq 50); do
		APP_PID=$(mc_pid)
		[ -n "$APP_PID" ] && break
		sleep 0.1
	done
	APP_PROTO=memcache
	[ -n "$APP_PID" ]
}

start_pydict() {
	APP_PORT=$(free_port) || return 1
	(cd "$1" && exec setsid "$PY" "$here/pydict.py" --port "$APP_PORT" --keys "$keys" --size "$size" \
		--pidfile "$1/pydict.pid" </dev/null >"$1/pydict.out" 2>&1 &)
	for _ in $(seq 600); do
		[ -s "$1/pydict.pid" ] && break
		sleep 0.1
	done
	APP_PID=$(cat "$1/pydict.pid" 2>/dev/null)
	APP_PROTO=resp
	[ -n "$APP_PID" ]
}

# kill_app PID: kill it if it still is one of ours (pids get reused).
kill_app() {
	local pid=$1
	case $(cat "/proc/$pid/comm" 2>/dev/null) in
	redis-server | memcached | python3*) ;;
	*) return 0 ;;
	esac
	kill -KILL "$pid" 2>/dev/null
	for _ in $(seq 50); do [ -e "/proc/$pid" ] || return 0; sleep 0.1; done
	return 1
}

anon_huge_kib() { sed -n 's/^AnonHugePages: *\([0-9]*\) kB/\1/p' "/proc/$1/smaps_rollup" 2>/dev/null; }

# No connection of the load may be open at the dump (criu would want --tcp-established).
_no_conn() { [ -z "$(ss -Htn state established "( sport = :$APP_PORT )" 2>/dev/null)" ]; }

# load fill|run [ARGS]: bench/apps/load.py on the app
load() {
	local what=$1
	shift
	"$PY" "$here/load.py" "$what" --proto "$APP_PROTO" --port "$APP_PORT" --keys "$keys" --size "$size" \
		--rate "$rate" --settle-seconds "$settle" "$@"
}

# ---- the modes ----------------------------------------------------------------

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

# one APP MODE REP: restore, load, stop; appends a line to $out
one() {
	local app=$1 mode=$2 rep=$3 name=$2-$3 res stats="" extra=() lazy=(--lazy-pages) thp settle_pid=()
	wait_tree_gone "$d/img" >/dev/null || { echo "pids still in use" >&2; return 1; }
	case $mode in
	eager) lazy=() ;;
	stock) start_daemon "$name" "$CRIU" || return 1 ;;
	ours | ours+ws | record | base | base+ws)
		local bin=$LAZYRESTORE
		[ "$mode" = record ] && extra=(--record-ws)
		case $mode in base*) bin=${LR_BASE:?mode $mode needs LR_BASE=another build of lazyrestore} ;; esac
		case $mode in
		ours | base) mv -f "$d/img/lazyrestore-ws.img" "$d/ws.off" 2>/dev/null || true ;;
		*+ws) mv -f "$d/ws.off" "$d/img/lazyrestore-ws.img" 2>/dev/null || true ;;
		esac
		# shellcheck disable=SC2086 # LR_ARGS: options for ours, split as a shell does
		start_daemon "$name" "$bin" --stats "stats-$name.json" "${extra[@]}" ${LR_ARGS:-} || return 1 ;;
	esac
	# the settled window starts when the daemon is gone (all resident, its last collapses done)
	[ -n "$LAZY_PID" ] && settle_pid=(--settle-pid "$LAZY_PID")
	res=$(load run --seed "$rep" --seconds "$windows" "${settle_pid[@]}" --trace "$d/trace-$name.txt" --bound "$(_bound_secs "${RESTORE_BOUND:-60}")" -- \
		"$CRIU" restore -D "$d/img" -o "restore-$name.log" -v4 "${lazy[@]}" -d) || {
		echo "$app $name: $(first_error "$d/img/restore-$name.log")" >&2
		return 1
	}
	# huge pages once the daemon is done (its last collapses run at its end)
	[ -n "$LAZY_PID" ] && { bounded_wait 120 "$LAZY_PID"; LAZY_PID=; }
	thp=$(anon_huge_kib "$APP_PID")
	kill_app "$APP_PID"
	[ -f "$d/img/stats-$name.json" ] && stats=$(tr -d '\n ' <"$d/img/stats-$name.json")
	[ "$mode" = record ] && return 0
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$app" "$mode" "$rep" "$res" "${thp:-0}" "$stats" >>"$out"
	echo "  $app $mode rep $rep: $res AnonHugePages ${thp:-?} kB"
}

# bench APP: start, fill, measure live, dump, record the working set, restore reps x 4 ways
bench() {
	local app=$1 fill rep k modes
	d=$top/$app
	mkdir -p "$d" || return 1
	"start_$app" "$d" || { echo "$app did not start" >&2; return 1; }
	APP_PIDS+=("$APP_PID")
	if [ "$app" != pydict ]; then
		fill=$(load fill 2>&1) || { echo "$app: fill failed: $fill" >&2; return 1; }
	fi
	res=$(load run --seconds "$windows") || { echo "$app: the live load failed" >&2; return 1; }
	printf '%s\tlive\t0\t%s\t%s\t\n' "$app" "$res" "$(anon_huge_kib "$APP_PID")" >>"$out"
	echo "$app: $keys keys x $size B, RSS $(($(sed -n 's/^Rss: *\([0-9]*\) kB/\1/p' "/proc/$APP_PID/smaps_rollup") >> 10)) MiB, AnonHugePages $(anon_huge_kib "$APP_PID") kB"
	echo "  $app live: $res"
	_bound_poll 10 _no_conn || { echo "$app: a connection is still open" >&2; return 1; }
	criu_dump "$APP_PID" "$d/img" || { echo "$app: criu dump failed: $(first_error "$d/img/dump.log")" >&2; return 1; }
	echo "  dump: $(du -sh "$d/img" | cut -f1)"
	one "$app" record 0 || return 1
	[ -s "$d/img/lazyrestore-ws.img" ] || { echo "$app: no working set recorded" >&2; return 1; }
	for rep in $(seq "$reps"); do
		# rotate the order each repetition: no mode always goes first
		read -ra modes <<<"$all_modes"
		for k in "${!modes[@]}"; do one "$app" "${modes[$(((k + rep) % ${#modes[@]}))]}" "$rep" || return 1; done
	done
	# the images are large; the logs and stats stay
	rm -f "$d"/img/pages-*.img
}

command -v redis-server >/dev/null || { echo "redis-server not installed (scripts/deps.sh)" >&2; exit 1; }
command -v memcached >/dev/null || { echo "memcached not installed (scripts/deps.sh)" >&2; exit 1; }
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs, THP $(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled); load:$(uptime | sed 's/.*load average://')"
for app in $apps; do
	host_noise "before $app"
	bench "$app" || exit 1
done
host_noise "after the runs"
echo "load at the end:$(uptime | sed 's/.*load average://')"
python3 "$here/summarize.py" "$out"
