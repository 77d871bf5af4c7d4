#!/bin/bash
# timeout: 300
# The harness's bounds work: each scenario below runs this script again
# (--inner MODE) with a step that blocks on purpose, against a fake
# lazy-pages daemon (test/lib/silent-peer.py) that accepts and never answers.
# The inner run must end within its 5 s bound (not before it, not much
# after), print exactly one line
#   FAIL: 16-bounded-step: STEP did not finish in 5s; last log line: LINE
# naming the stuck step and the last line of that step's log, go no further,
# and leave no process running (everything it started carries a mark in its
# environment; none may remain).  A step that finishes in time must pass
# through with its own status and no such line.
. "$(dirname "$0")/../lib/lazy.sh"
PEER=$TOP/test/lib/silent-peer.py
BOUND=5

# ---- the inner runs: each ends at its stuck step ------------------------------
if [ "${1:-}" = --inner ]; then
	mode=$2 w=$3
	img=$w/img
	mkdir -p "$img"
	# the fake daemon gets time to start on a busy machine, except where that is the stuck step
	export LAZY_START_BOUND=30 LAZY_EXIT_BOUND=$BOUND
	[ "$mode" = mute ] && LAZY_START_BOUND=$BOUND
	case $mode in
	quick)
		run_bounded $BOUND "a quick step" "$w/quick.log" true
		echo "quick status $?"
		run_bounded $BOUND "a failing step" "$w/quick.log" sh -c 'exit 3'
		echo "failing status $?"
		x=$(run_bounded $BOUND "a quick step in a command substitution" "$w/quick.log" echo captured)
		echo "substitution got '$x'"
		exit 0
		;;
	client)
		# criu restore's side: the daemon listens, the hand-off never gets an answer
		start_lazy silent "$PEER" "$img" || exit 2
		run_bounded $BOUND "hand-off to the silent daemon" "$w/client.log" "$PEER" connect "$img" "$w/client.log"
		;;
	subshell)
		# the same, from inside a command substitution (the main shell must report it)
		start_lazy silent "$PEER" "$img" || exit 2
		x=$(run_bounded $BOUND "hand-off in a command substitution" "$w/client.log" \
			"$PEER" connect "$img" "$w/client.log")
		echo "got '$x'"
		;;
	daemon)
		# the final wait on a daemon that never exits
		start_lazy silent "$PEER" "$img" || exit 2
		run_bounded $BOUND "a peer that connects and leaves" /dev/null /usr/bin/python3 -c "
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect('$img/lazy-pages.socket')
s.close()"
		daemon_ok silent "$img"
		;;
	mute)
		# a daemon that never says it listens: the wait for its status byte
		start_lazy mute "$PEER" "$img" --mute
		;;
	esac
	echo "NOT REACHED: the $mode step returned $?"
	exit 0
fi

# ---- the outer run: judge each inner run --------------------------------------
d=$(scratch bounded-step)

# leftovers MARK: pids of live (not zombie) processes whose environment has MARK
leftovers() {
	local f pid state
	for f in $(grep -lzx "LR_STUCK_MARK=$1" /proc/[0-9]*/environ 2>/dev/null); do
		pid=${f#/proc/}
		pid=${pid%/environ}
		state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
		[ "$state" = Z ] || [ -z "$state" ] || echo "$pid($(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-60))"
	done
}
_no_leftovers() { [ -z "$(leftovers "$1")" ]; }

# scenario MODE WANT-STATUS STEP-REGEX LAST-LINE-REGEX (empty regexes: no FAIL line)
scenario() {
	local mode=$1 want=$2 step=$3 last=$4 w=$d/$1 mark rc t0 ms fails line left
	mkdir -p "$w"
	mark=$mode.$$.$RANDOM
	t0=$(date +%s%N)
	run_bounded -o "$w/inner.out" 60 "the inner run ($mode)" "$w/inner.out" \
		env LR_STUCK_MARK="$mark" BOUND_SCALE=1 bash "$0" --inner "$mode" "$w"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	fails=$(grep -c '^FAIL: ' "$w/inner.out")
	line=$(grep -m1 '^FAIL: ' "$w/inner.out")
	_bound_poll 5 _no_leftovers "$mark"
	left=$(leftovers "$mark")
	local name=bounded-step-$mode why=
	if [ -z "$step" ]; then
		[ "$rc" = "$want" ] || why="inner run exited $rc, want $want"
		[ "$fails" = 0 ] || why="$why; a step in time printed: $line"
	else
		[ "$rc" = "$want" ] || why="inner run exited $rc, want $want"
		[ "$fails" = 1 ] || why="$why; $fails FAIL lines, want exactly 1"
		local re="^FAIL: 16-bounded-step: $step did not finish in ${BOUND}s; last log line: $last\$"
		[[ $line =~ $re ]] || why="$why; the line '$line' does not match '$re'"
		grep -q 'NOT REACHED' "$w/inner.out" && why="$why; the case went on after the stuck step"
		[ $ms -ge $((BOUND * 1000)) ] || why="$why; ended after $ms ms, before its ${BOUND}s bound"
		[ $ms -le $((BOUND * 1000 + 15000)) ] || why="$why; ended after $ms ms, long after its ${BOUND}s bound"
	fi
	[ -z "$left" ] || why="$why; still running: $left"
	if [ -z "$why" ]; then
		pass "$name"
		echo "    $name: ${ms} ms: ${line:-$(tr '\n' ' ' <"$w/inner.out")}"
	else
		fail "$name" "${why#; } (output: $w/inner.out)"
		for p in $left; do kill -KILL "${p%%(*}" 2>/dev/null; done
	fi
}

scenario quick 0 "" ""
grep -q "^quick status 0$" "$d/quick/inner.out" && grep -q "^failing status 3$" "$d/quick/inner.out" &&
	grep -q "^substitution got 'captured'$" "$d/quick/inner.out" && pass bounded-step-quick-statuses ||
	fail bounded-step-quick-statuses "a step in time did not keep its status or output: $(tr '\n' ' ' <"$d/quick/inner.out")"
num='[0-9]+'
scenario client 1 "hand-off to the silent daemon" \
	"silent-peer $num: sent the hand-off of task 4242; waiting for the daemon's answer"
scenario subshell 1 "hand-off in a command substitution" \
	"silent-peer $num: sent the hand-off of task 4242; waiting for the daemon's answer"
scenario daemon 1 "silent-peer\.py lazy-pages \(silent\)" \
	"silent-peer $num: accepted a connection; never answering"
scenario mute 1 "the status byte of silent-peer\.py lazy-pages \(mute\)" \
	"silent-peer $num: listening on lazy-pages\.socket; never saying so \(no status byte\)"
finish
