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

# For benchmarks: how quiet the machine is right now (bench/noise), as a line "WHEN: host noise: ...".
host_noise() {
	echo "$1: $("$BUILD/bench/noise" 3 2>&1 || echo "host noise: not measured")"
}

# A fresh scratch directory under build/test-work, removed by cleanup unless KEEP=1.
scratch() {
	local d=$BUILD/test-work/$1
	rm -rf "$d" && mkdir -p "$d" && echo "$d"
}

# ---- bounds: no step of a case waits without one ---------------------------
# Every criu, daemon and program a case starts runs in its own process group
# under a bound.  A step that hits its bound ends the case at once
# with ONE line,
#   FAIL: CASE: STEP did not finish in Ns; last log line: LINE
# and everything the case started is killed (the step's group, every group
# started by bounded_start, then any process still carrying this case's
# LR_CASE_TOKEN in its environment).  One code path: _bound_poll waits,
# _bound_hit reports and ends.
#   run_bounded [-o OUT] SECONDS STEP LOG CMD...  foreground step; CMD's status
#   bounded_start [-o OUT] STEP LOG CMD...        background daemon, sets BOUNDED_PID
#   bounded_wait SECONDS PID                      its final wait; its status
#   bounded_reap SECONDS PID                      wait, then kill quietly; 124 if killed
#   wait_until SECONDS STEP LOG CMD...            until CMD succeeds (a condition)
#   wait_for_file FILE [SECONDS]                  a condition, not fatal: 0 or 1
# STEP names the step in the FAIL line, LOG is the file whose last line it
# quotes (criu's -o log, a daemon's log).  -o OUT sends CMD's stdout and
# stderr to OUT (default: the case's).  Never redirect the stdout of these
# helpers themselves: the FAIL line is printed there.  A bound hit inside a
# command substitution or pipeline is handed to the case's main shell (USR2),
# which prints it and exits.  Bounds scale with BOUND_SCALE (default 1).
CASE=${CASE:-$(basename "$0" .sh)}
LR_CASE_TOKEN=$CASE.$$.$RANDOM$RANDOM
export LR_CASE_TOKEN
mkdir -p "$BUILD/test-work"
_BOUND_FILE=$BUILD/test-work/.bound.$$
_BOUND_CLEANUP=
declare -A _BOUND_STEP=() _BOUND_LOG=()

# at_exit CMD: the case's own cleanup, run (eval) before the bounds' own.
at_exit() { _BOUND_CLEANUP=$1; }

# _bound_secs SECONDS: the bound scaled by BOUND_SCALE (an integer factor).
_bound_secs() { echo $(($1 * ${BOUND_SCALE:-1})); }

# _bound_poll SECONDS CMD...: 0 as soon as CMD succeeds, 1 after SECONDS.
# (microseconds from EPOCHREALTIME: $SECONDS counts whole seconds, so a bound
# taken from it could end up to a second early)
_bound_now_us() { local t=${EPOCHREALTIME/./}; echo $((10#$t)); }
_bound_poll() {
	local end=$(($(_bound_now_us) + $1 * 1000000)) n=0
	shift
	until "$@"; do
		[ "$(_bound_now_us)" -ge $end ] && return 1
		# quick steps are seen ending quickly, long ones cost little
		if [ $((n += 1)) -le 10 ]; then sleep 0.02; else sleep 0.1; fi
	done
}

# _bound_kill PID: SIGKILL the process group PID leads (and PID itself).
_bound_kill() {
	kill -KILL -- "-$1" 2>/dev/null
	kill -KILL "$1" 2>/dev/null
	return 0
}

_bound_last_line() {
	local line
	[ -e "$1" ] || { echo "(no log: $1)"; return; }
	line=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n1 | tr -d '\r')
	echo "${line:-(empty: $1)}" | cut -c1-400
}

# _bound_hit STEP SECONDS LOG [PID]: kill PID's group, print the one line, end the case.
_bound_hit() {
	local line
	if [ -n "${4:-}" ]; then
		_bound_kill "$4"
		wait "$4" 2>/dev/null # (not ours in a subshell: then nothing to reap)
	fi
	line="FAIL: $CASE: $1 did not finish in $2s; last log line: $(_bound_last_line "$3")"
	if [ "$BASHPID" != "$$" ]; then
		# a subshell (command substitution, pipeline): the main shell reports
		echo "$line" >"$_BOUND_FILE"
		kill -USR2 $$
		exit 124
	fi
	echo "$line"
	failures=$((failures + 1))
	exit 1
}

_bound_from_subshell() {
	if [ -s "$_BOUND_FILE" ]; then
		cat "$_BOUND_FILE"
		failures=$((failures + 1))
	fi
	exit 1
}

# Kill what is left: the daemons' groups, then whatever still has our token.
_bound_sweep() {
	local pid f
	for pid in "${!_BOUND_STEP[@]}"; do _bound_kill "$pid"; done
	for f in $(grep -lzx "LR_CASE_TOKEN=$LR_CASE_TOKEN" /proc/[0-9]*/environ 2>/dev/null); do
		pid=${f#/proc/}
		pid=${pid%/environ}
		[ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] || kill -KILL "$pid" 2>/dev/null
	done
	return 0
}

_bound_exit() {
	local rc=$?
	trap - EXIT
	[ -n "$_BOUND_CLEANUP" ] && eval "$_BOUND_CLEANUP"
	_bound_sweep
	rm -f "$_BOUND_FILE"
	exit $rc
}
trap _bound_exit EXIT
trap _bound_from_subshell USR2
trap 'exit 143' TERM
trap 'exit 130' INT

# _bound_spawn OUT IN CMD...: CMD in its own process group (same session: a
# session of its own would be an autogroup of its own, which changes how the
# scheduler shares the CPUs with the case's other processes), in the
# background, stdin from fd IN (the caller's stdin) or /dev/null if empty,
# stdout/stderr to OUT unless it is empty; sets BOUNDED_PID (CMD's own pid:
# perl execs it in place).
_BOUND_PGRP=(perl -e 'setpgrp(0, 0) or die "setpgrp: $!\n"; exec { $ARGV[0] } @ARGV; die "exec $ARGV[0]: $!\n"')
_bound_spawn() {
	local out=$1 in=$2 own=''
	shift 2
	if [ -z "$in" ]; then
		exec {in}</dev/null
		own=1
	fi
	if [ -n "$out" ]; then
		"${_BOUND_PGRP[@]}" "$@" <&"$in" {in}<&- >"$out" 2>&1 &
	else
		"${_BOUND_PGRP[@]}" "$@" <&"$in" {in}<&- &
	fi
	BOUNDED_PID=$!
	[ -n "$own" ] && exec {in}<&-
	return 0
}

_bound_gone() { ! kill -0 "$1" 2>/dev/null; }

run_bounded() {
	local out='' secs step log pid rc
	[ "$1" = -o ] && out=$2 && shift 2
	secs=$(_bound_secs "$1") step=$2 log=$3
	shift 3
	local in
	exec {in}<&0
	_bound_spawn "$out" "$in" "$@"
	exec {in}<&-
	pid=$BOUNDED_PID
	_bound_poll "$secs" _bound_gone "$pid" || _bound_hit "$step" "$secs" "$log" "$pid"
	wait "$pid"
	rc=$?
	# the step is over; what it left in its group is not to outlive it
	kill -KILL -- "-$pid" 2>/dev/null
	return $rc
}

bounded_start() {
	local out=''
	[ "$1" = -o ] && out=$2 && shift 2
	local step=$1 log=$2
	shift 2
	_bound_spawn "$out" "" "$@"
	_BOUND_STEP[$BOUNDED_PID]=$step
	_BOUND_LOG[$BOUNDED_PID]=$log
}

# bounded_wait SECONDS PID: the exit status of a bounded_start'ed daemon.
bounded_wait() {
	local secs pid=$2 rc
	secs=$(_bound_secs "$1")
	_bound_poll "$secs" _bound_gone "$pid" ||
		_bound_hit "${_BOUND_STEP[$pid]:-process $pid}" "$secs" "${_BOUND_LOG[$pid]:-/dev/null}" "$pid"
	wait "$pid"
	rc=$?
	kill -KILL -- "-$pid" 2>/dev/null
	unset "_BOUND_STEP[$pid]" "_BOUND_LOG[$pid]"
	return $rc
}

# bounded_reap SECONDS PID: like bounded_wait, but a daemon still running
# after SECONDS is killed quietly (status 124): for cleanup after a failure.
bounded_reap() {
	local pid=$2 rc
	if _bound_poll "$(_bound_secs "$1")" _bound_gone "$pid"; then
		wait "$pid"
		rc=$?
	else
		_bound_kill "$pid"
		wait "$pid" 2>/dev/null
		rc=124
	fi
	kill -KILL -- "-$pid" 2>/dev/null
	unset "_BOUND_STEP[$pid]" "_BOUND_LOG[$pid]"
	return $rc
}

# wait_until [-k PID] SECONDS STEP LOG CMD...: -k: the group to kill on a hit
wait_until() {
	local kill='' secs step log
	[ "$1" = -k ] && kill=$2 && shift 2
	secs=$(_bound_secs "$1") step=$2 log=$3
	shift 3
	_bound_poll "$secs" "$@" || _bound_hit "$step" "$secs" "$log" "$kill"
}

# A daemon's --status-fd byte.  status_open FIFO makes the fifo and holds it
# open (read-write, so that neither side blocks and a byte written before it
# is read is kept); start the daemon with "--status-fd N N>FIFO"; then
# status_byte SECONDS STEP LOG PID sets STATUS_BYTE to the byte in hex (""
# if PID exited without one; a stuck step if neither comes within SECONDS)
# and closes the fifo.  Both in the case's main shell, not in $(...).
STATUS_FD=''
STATUS_BYTE=''
status_open() {
	rm -f "$1" && mkfifo "$1" || return 1
	exec {STATUS_FD}<>"$1"
}
_status_or_exit() { read -r -t 0 -u "$STATUS_FD" || ! kill -0 "$1" 2>/dev/null; }
status_byte() {
	wait_until "$1" "$2" "$3" _status_or_exit "$4"
	STATUS_BYTE=
	if read -r -t 0 -u "$STATUS_FD"; then
		STATUS_BYTE=$(head -c1 <&"$STATUS_FD" | od -An -tx1 | tr -d ' \n')
	fi
	exec {STATUS_FD}<&-
}

# wait_for_file FILE [SECONDS]
wait_for_file() {
	_bound_poll "$(_bound_secs "${2:-30}")" test -e "$1"
}

# start_memhog DIR ARGS... : starts memhog detached (own session, no tty), prints its pid
start_memhog() {
	local d=$1
	shift
	setsid "$PROGS/memhog" -d "$d" "$@" </dev/null >/dev/null 2>&1 &
	local pid=$!
	wait_until -k "$pid" 60 "memhog $pid getting ready" /dev/null test -e "$d/ready.$pid"
	echo "$pid"
}

# dump_touch DIR MIB TOUCHES: bench/touch (bench/restore's restored program) of
# MIB MiB started in DIR and dumped into DIR/img, synced (the dump's writeback
# would slow whichever restore runs first); prints its pid.  On failure it is
# killed and the line says so.
dump_touch() {
	local w=$1 pid
	setsid "$BUILD/bench/touch" -d "$w" -m "$2" -n "$3" </dev/null >/dev/null 2>&1 &
	pid=$!
	if ! wait_for_file "$w/ready.$pid" 120 || ! criu_dump "$pid" "$w/img"; then
		kill -KILL "$pid" 2>/dev/null
		echo "bench: dump of $2 MiB failed (see $w/img/dump.log)" >&2
		return 1
	fi
	sync
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

# criu_dump PID DIR [extra args]: dump (tree is killed), log in DIR/dump.log,
# bounded by DUMP_BOUND (default 60 s).  CRIU_FAULT is criu's business: a case
# never sets it, one set by the caller reaches criu unchanged.
criu_dump() {
	local pid=$1 d=$2
	shift 2
	mkdir -p "$d" || return 1
	run_bounded "${DUMP_BOUND:-60}" "criu dump of $pid" "$d/dump.log" \
		"$CRIU" dump -t "$pid" -D "$d" -o dump.log -v4 "$@" || return 1
	wait_tree_gone "$d"
}

# criu_restore NAME IMGDIR [criu restore args]: criu restore -D IMGDIR -o
# restore-NAME.log -v4 ARGS, bounded by RESTORE_BOUND (default 60 s).
criu_restore() {
	local name=$1 img=$2
	shift 2
	run_bounded "${RESTORE_BOUND:-60}" "criu restore $* ($name)" "$img/restore-$name.log" \
		"$CRIU" restore -D "$img" -o "restore-$name.log" -v4 "$@"
}

# The dumped tree was killed; its pids must be free (reaped) before a restore can reuse them.
_pids_gone() {
	local pid
	for pid in "$@"; do [ -e "/proc/$pid" ] && return 1; done
	return 0
}
wait_tree_gone() {
	# shellcheck disable=SC2046 # one pid a word
	_bound_poll 10 _pids_gone $(sed -n 's/.*Seized task \([0-9]*\).*/\1/p' "$1/dump.log") ||
		{ echo "dumped tasks still exist after 10 s" >&2; return 1; }
}

# nr_lazy LOG: the pages criu's restore left to a lazy-pages daemon, summed over its tasks
nr_lazy() {
	sed -n 's/.*nr_lazy: *\([0-9]*\).*/\1/p' "$1" | awk '{ s += $1 } END { print s + 0 }'
}
