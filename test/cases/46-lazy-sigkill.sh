#!/bin/bash
# timeout: 300
# SIGKILL of our lazy-pages daemon's engine right after restore, while the memory
# is still being served: the supervisor must restart it, the restarted
# engine resumes from the images and the uffd journal, and the program sees
# exactly its dumped bytes (every word checked).  Twice: 1 GiB with random
# touches, and the events program (fork, mremap, munmap, DONTNEED) whose
# events land around the kill.  (Stock criu lazy-pages has no answer to
# this: its unserved pages then read as zero.)
. "$(dirname "$0")/../lib/lazy.sh"

# kill_engine_after_restore NAME IMG: restore, then SIGKILL the engine child.
kill_engine_after_restore() {
	local name=$1 img=$2 eng
	start_lazy "$name" "$LAZYRESTORE" "$img" --stats "stats-$name.json" ||
		{ fail "$name" "daemon did not start"; return 1; }
	eng=$(ps -o pid= --ppid "$LAZY_PID" | head -n1 | tr -d ' ')
	criu_restore "$name" "$img" --lazy-pages -d ||
		{ fail "$name" "restore failed: $(first_err "$img/restore-$name.log")"; return 1; }
	kill_engine "$name" "$LAZY_PID" "$eng"
}

# after_kill NAME IMG DIR: results OK, daemon exit 0, log shows the restart.
after_kill() {
	local name=$1 img=$2 d=$3
	collect_results "$name" "$d"
	daemon_ok "$name" "$img"
	expect_resumed "$name" "$img/lazy-pages-$name.log"
}

# For comparison only (no verdict): the same kill of stock criu lazy-pages.
stock_contrast() {
	local d=$1 res
	wait_tree_gone "$d/img"
	start_lazy stock-killed "$CRIU" "$d/img" || return
	criu_restore stock-killed "$d/img" --lazy-pages -d || return
	kill -KILL "$LAZY_PID"
	stop_lazy 5
	sleep 2
	res=$(cat "$d"/result.* 2>/dev/null)
	local p state=gone
	p=$(memhog_pids "$d" | head -n1)
	kill -0 "$p" 2>/dev/null && state="still running"
	echo "    stock criu lazy-pages SIGKILLed the same way: ${res:-no result}; task $p $state"
	rm -f "$d"/result.*
	kill_memhogs "$d"
}

at_exit lazy_cleanup
for mode in random events; do
	d=$(scratch "lazy-sigkill-$mode")
	LAZY_DIR=$d
	args=(-M events)
	[ $mode = random ] && args=(-M random -m 1024 -n 2000)
	pid=$(start_lazy_prog "$d" "${args[@]}") || { fail "lazy-sigkill-$mode" "program did not start"; continue; }
	criu_dump "$pid" "$d/img" || { fail "lazy-sigkill-$mode-dump" "$(first_err "$d/img/dump.log")"; continue; }
	wait_tree_gone "$d/img"
	if kill_engine_after_restore "lazy-sigkill-$mode" "$d/img"; then
		after_kill "lazy-sigkill-$mode" "$d/img" "$d"
	fi
	kill_memhogs "$d"
	[ $mode = random ] && stock_contrast "$d"
done
finish
