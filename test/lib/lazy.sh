#!/bin/bash
# Helpers for the lazy-restore cases test/cases/4*.sh (sourced, not run).
# Each case restores one dump twice in the same run, served first by stock
# `criu lazy-pages`, then by ours, and both must verify.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

LAZY_PID=

# start_lazy NAME BIN IMGDIR [extra args]: start "BIN lazy-pages" with zdtm's
# command line and wait for its --status-fd byte (it listens then).  The log
# goes to the work dir (IMGDIR unless -W is among the extra args).
start_lazy() {
	local name=$1 bin=$2 img=$3 byte fifo
	shift 3
	fifo=$img/status-$name
	rm -f "$fifo" && mkfifo "$fifo" || return 1
	"$bin" lazy-pages --no-default-config --images-dir "$img" --log-file "lazy-pages-$name.log" \
		--verbosity=4 --status-fd 9 "$@" 9>"$fifo" </dev/null >"$img/lazy-$name.out" 2>&1 &
	LAZY_PID=$!
	byte=$(timeout 30 head -c1 "$fifo" | od -An -tx1 | tr -d ' \n')
	[ "$byte" = 00 ] || { echo "no status byte from $bin lazy-pages (got '$byte')"; return 1; }
}

# wait_lazy SECONDS: the daemon's exit status (124 if it is still running).
wait_lazy() {
	local n=$(($1 * 10)) rc
	while kill -0 "$LAZY_PID" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	if kill -0 "$LAZY_PID" 2>/dev/null; then
		kill -KILL "$LAZY_PID"
		wait "$LAZY_PID" 2>/dev/null
		LAZY_PID=
		return 124
	fi
	wait "$LAZY_PID"
	rc=$?
	LAZY_PID=
	return $rc
}

first_err() { grep -m1 -E 'Error|FAIL' "$1" 2>/dev/null || tail -n1 "$1" 2>/dev/null; }

# lazy_restore NAME BIN IMGDIR: start the daemon, criu restore --lazy-pages -d.
lazy_restore() {
	local name=$1 bin=$2 img=$3
	shift 3
	local extra=()
	[ "$bin" = "$LAZYRESTORE" ] && extra=(--stats "stats-$name.json")
	if ! start_lazy "$name" "$bin" "$img" "${extra[@]}" "$@"; then
		fail "$name-daemon" "$bin lazy-pages did not start: $(cat "$img/lazy-$name.out")"
		return 1
	fi
	if ! "$CRIU" restore -D "$img" --lazy-pages -d -o "restore-$name.log" -v4; then
		fail "$name-restore" "criu restore --lazy-pages failed: $(first_err "$img/restore-$name.log")"
		wait_lazy 10
		return 1
	fi
	local lazy
	lazy=$(sed -n 's/.*nr_lazy: *\([0-9]*\).*/\1/p' "$img/restore-$name.log" | awk '{ s += $1 } END { print s + 0 }')
	if [ "$lazy" -gt 0 ]; then
		pass "$name-restore"
	else
		fail "$name-restore" "restore left no page to the daemon (no nr_lazy in restore-$name.log)"
	fi
}

# daemon_ok NAME IMGDIR: the daemon must exit 0 within 60 s.
daemon_ok() {
	local name=$1 img=$2 rc
	wait_lazy 60
	rc=$?
	if [ $rc -eq 0 ]; then
		pass "$name-daemon-exit"
	else
		fail "$name-daemon-exit" "status $rc: $(first_err "$img/lazy-pages-$name.log")"
	fi
}

lazy_cleanup() {
	[ -n "$LAZY_PID" ] && kill -KILL "$LAZY_PID" 2>/dev/null
	[ -n "${LAZY_DIR:-}" ] && kill_memhogs "$LAZY_DIR"
	return 0
}

# both_daemons NAME IMGDIR DIR CHECK: restore with stock then ours; after each
# restore run "CHECK NAME-which", then expect the daemon to finish.
both_daemons() {
	local name=$1 img=$2 d=$3 check=$4 which bin
	for which in stock ours; do
		bin=$CRIU
		[ $which = ours ] && bin=$LAZYRESTORE
		wait_tree_gone "$img" || { fail "$name-$which" "dumped pids still in use"; continue; }
		if lazy_restore "$name-$which" "$bin" "$img"; then
			"$check" "$name-$which" "$d"
			daemon_ok "$name-$which" "$img"
		fi
		kill_memhogs "$d"
		sleep 0.2
	done
}

# start_lazy_prog DIR ARGS...: lazy-events detached (own session, no tty);
# waits until every process it starts is ready, prints the root's pid.
start_lazy_prog() {
	local d=$1 nready=1
	shift
	[[ " $* " == *" tree "* ]] && nready=3
	setsid "$PROGS/lazy-events" -d "$d" "$@" </dev/null >"$d/prog.out" 2>&1 &
	local pid=$! n=600
	while [ "$(ls "$d"/ready.* 2>/dev/null | wc -l)" -lt $nready ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	[ $n -gt 0 ] || { echo "lazy-events $pid did not get ready" >&2; return 1; }
	echo "$pid"
}
