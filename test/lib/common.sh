#!/bin/bash
# shellcheck disable=SC2034 # sets variables for the scripts that source it
# Helpers shared by test/cases/*.sh.  Source it: . "$(dirname "$0")/../lib/common.sh"
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$TOP/build
CRIU=$BUILD/criu/criu
LAZYRESTORE=$BUILD/lazyrestore
PROGS=$BUILD/test-progs
failures=0

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; failures=$((failures + 1)); }
skip() { echo "SKIP: $1: $2"; }
finish() { exit $((failures > 0)); }

# A fresh scratch directory under build/test-work, removed by cleanup unless KEEP=1.
scratch() {
	local d=$BUILD/test-work/$1
	rm -rf "$d" && mkdir -p "$d" && echo "$d"
}

# wait_for_file FILE [SECONDS]
wait_for_file() {
	local f=$1 n=$((${2:-30} * 10))
	while [ ! -e "$f" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	[ -e "$f" ]
}

# start_memhog DIR ARGS... : starts memhog detached (own session, no tty), prints its pid
start_memhog() {
	local d=$1
	shift
	setsid "$PROGS/memhog" -d "$d" "$@" </dev/null >/dev/null 2>&1 &
	local pid=$!
	wait_for_file "$d/ready.$pid" 60 || { echo "memhog $pid did not get ready" >&2; return 1; }
	echo "$pid"
}

# pids of every memhog process that wrote a manifest into DIR
memhog_pids() {
	local f
	for f in "$1"/ready.*; do [ -e "$f" ] && echo "${f##*.}"; done
}

# collect_results NAME DIR: each process that wrote DIR/ready.PID writes
# DIR/result.PID (memhog on SIGUSR1, lazy-events by itself once restored);
# each must say OK.
collect_results() {
	local name=$1 d=$2 pid ok=1 res
	for pid in $(memhog_pids "$d"); do
		if ! wait_for_file "$d/result.$pid" 120; then
			fail "$name" "task $pid wrote no result"
			ok=0
			continue
		fi
		res=$(cat "$d/result.$pid")
		case $res in
		OK*) echo "    $name: task $pid: $res" ;;
		*) fail "$name" "task $pid: $res"; ok=0 ;;
		esac
	done
	rm -f "$d"/result.*
	[ $ok = 1 ] && pass "$name"
	[ $ok = 1 ]
}

# check_memhog NAME DIR: SIGUSR1 each memhog of DIR and expect "OK" from each
check_memhog() {
	local pid
	rm -f "$2"/result.*
	for pid in $(memhog_pids "$2"); do
		kill -USR1 "$pid" 2>/dev/null || { fail "$1" "task $pid is not running"; return 1; }
	done
	collect_results "$@"
}

kill_memhogs() {
	local pid
	for pid in $(memhog_pids "$1"); do kill -KILL "$pid" 2>/dev/null; done
	return 0
}

# criu_dump PID DIR [extra args]: dump (tree is killed), log in DIR/dump.log
criu_dump() {
	local pid=$1 d=$2
	shift 2
	mkdir -p "$d" && "$CRIU" dump -t "$pid" -D "$d" -o dump.log -v4 "$@" || return 1
	wait_tree_gone "$d"
}

# The dumped tree was killed; its pids must be free (reaped) before a restore can reuse them.
wait_tree_gone() {
	local pid n=100
	for pid in $(sed -n 's/.*Seized task \([0-9]*\).*/\1/p' "$1/dump.log"); do
		while [ -e "/proc/$pid" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	done
	[ $n -gt 0 ] || { echo "dumped tasks still exist after 10 s" >&2; return 1; }
}
