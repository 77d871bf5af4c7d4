#!/bin/bash
# Helpers for the lazy-restore cases test/cases/4*.sh (sourced, not run).
# Each case restores one dump twice in the same run, served first by stock
# `criu lazy-pages`, then by ours, and both must verify.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

LAZY_PID=

# start_lazy NAME BIN IMGDIR [extra args]: start "BIN lazy-pages" with zdtm's
# command line (bounded_start: its own group, killed when the case ends) and
# wait up to LAZY_START_BOUND (30 s) for its --status-fd byte (it listens then).  The log goes to
# the work dir (IMGDIR unless -W is among the extra args).
start_lazy() {
	local name=$1 bin=$2 img=$3 byte fifo log work
	shift 3
	work=$img
	[[ " $* " =~ \ -W\ ([^ ]*) ]] && work=${BASH_REMATCH[1]}
	log=$work/lazy-pages-$name.log
	fifo=$img/status-$name
	status_open "$fifo" || return 1
	bounded_start -o "$img/lazy-$name.out" "$(basename "$bin") lazy-pages ($name)" "$log" \
		"$bin" lazy-pages --no-default-config --images-dir "$img" --log-file "lazy-pages-$name.log" \
		--verbosity=4 --status-fd 9 "$@" 9>"$fifo"
	LAZY_PID=$BOUNDED_PID
	status_byte "${LAZY_START_BOUND:-30}" "the status byte of $(basename "$bin") lazy-pages ($name)" \
		"$log" "$LAZY_PID"
	byte=$STATUS_BYTE
	[ "$byte" = 00 ] || { echo "no status byte from $bin lazy-pages (got '$byte')"; return 1; }
}

# wait_lazy SECONDS: the daemon's exit status; still running after SECONDS
# is a stuck step (the case ends with the one-line reason).
wait_lazy() {
	local rc
	bounded_wait "$1" "$LAZY_PID"
	rc=$?
	LAZY_PID=
	return $rc
}

# stop_lazy SECONDS: after a failure, give the daemon SECONDS, then kill it.
stop_lazy() {
	[ -n "$LAZY_PID" ] || return 0
	bounded_reap "$1" "$LAZY_PID"
	LAZY_PID=
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
	if ! criu_restore "$name" "$img" --lazy-pages -d; then
		fail "$name-restore" "criu restore --lazy-pages failed: $(first_err "$img/restore-$name.log")"
		stop_lazy 10
		return 1
	fi
	local lazy
	lazy=$(nr_lazy "$img/restore-$name.log")
	if [ "$lazy" -gt 0 ]; then
		pass "$name-restore"
	else
		fail "$name-restore" "restore left no page to the daemon (no nr_lazy in restore-$name.log)"
	fi
}

# daemon_ok NAME IMGDIR: the daemon must exit 0 within LAZY_EXIT_BOUND (60 s).
daemon_ok() {
	local name=$1 img=$2 rc
	wait_lazy "${LAZY_EXIT_BOUND:-60}"
	rc=$?
	if [ $rc -eq 0 ]; then
		pass "$name-daemon-exit"
	else
		fail "$name-daemon-exit" "status $rc: $(first_err "$img/lazy-pages-$name.log")"
	fi
}

# The case's cleanup (at_exit lazy_cleanup); the daemons' groups are the bounds'.
lazy_cleanup() {
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
	local pid=$!
	wait_until -k "$pid" 60 "lazy-events $pid getting ready" "$d/prog.out" _nready "$d" $nready
	echo "$pid"
}

# start_hugetouch DIR ARGS...: test/progs/hugetouch detached, its pid once ready.
start_hugetouch() {
	local d=$1
	shift
	setsid "$PROGS/hugetouch" -d "$d" "$@" </dev/null >"$d/prog.out" 2>&1 &
	local pid=$!
	wait_until -k "$pid" 60 "hugetouch $pid getting ready" "$d/prog.out" test -e "$d/ready.$pid"
	echo "$pid"
}

_nready() { # DIR N: at least N ready files in DIR
	local f n=0
	for f in "$1"/ready.*; do [ -e "$f" ] && n=$((n + 1)); done
	[ $n -ge "$2" ]
}

# expect_events NAME STATS: the daemon's stats must count each kind of uffd event.
expect_events() {
	local name=$1 stats=$2 ev n
	for ev in forks remaps removes unmaps; do
		n=$(sed -n "s/.*\"$ev\": \([0-9]*\).*/\1/p" "$stats")
		if [ "${n:-0}" -gt 0 ]; then
			pass "$name-saw-$ev"
		else
			fail "$name-saw-$ev" "stats say ${n:-nothing} (no such event reached the daemon)"
		fi
	done
}

# expect_resumed NAME LOG: the supervisor restarted the killed engine, which resumed.
expect_resumed() {
	local name=$1 log=$2 line
	line=$(grep -m1 'resumed .* tasks' "$log")
	if grep -q 'killed by signal 9; restart 1' "$log" && [ -n "$line" ]; then
		pass "$name-resumed"
		echo "    $name: ${line#*) }"
	else
		fail "$name-resumed" "no restart in $log: $(first_err "$log")"
	fi
}

# kill_engine NAME DAEMON-PID [ENGINE-PID]: SIGKILL the daemon's engine child
# (ENGINE-PID if found earlier, else its first child now); passes NAME-engine-killed.
kill_engine() {
	local name=$1 daemon=$2 eng=${3:-}
	[ -z "$eng" ] && eng=$(ps -o pid= --ppid "$daemon" | head -n1 | tr -d ' ')
	if [ -n "$eng" ] && kill -KILL "$eng"; then
		pass "$name-engine-killed"
	else
		fail "$name-engine-killed" "no engine process under daemon $daemon (all pages in already?)"
	fi
}

# stat_of FILE KEY: a number of a --stats JSON file
stat_of() { sed -n "s/.*\"$2\": \\([0-9.]*\\).*/\\1/p" "$1" 2>/dev/null; }

# ask DIR PID SIG FILE NAME: signal, wait for DIR/FILE.PID, print it (fails unless OK)
ask() {
	local dir=$1 p=$2 sig=$3 file=$4 name=$5 res
	rm -f "$dir/$file.$p"
	kill "-$sig" "$p" 2>/dev/null || { fail "$name" "task $p is not running"; return 1; }
	wait_for_file "$dir/$file.$p" 120 || { fail "$name" "task $p wrote no $file"; return 1; }
	res=$(cat "$dir/$file.$p")
	[[ $res == OK* ]] || { fail "$name" "task $p: $res"; return 1; }
	echo "$res"
}
