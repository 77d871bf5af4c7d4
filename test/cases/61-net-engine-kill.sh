#!/bin/bash
# timeout: 300
# SIGKILL of the engine of our `lazyrestore lazy-pages --page-server` right
# after a remote restore, while the pages are still streaming from our page
# server: the supervisor restarts the engine, which connects to the server
# again and resumes from the uffd journal, and every word is right.  The
# restore reads a copy of the dump whose lazy pages are overwritten
# (scribble_lazy), so it is right only if every lazy page came over the
# network, before the kill or after it.  (46 does the same with image files.)
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/lazy.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-engine-kill)
LAZY_DIR=$d
at_exit 'lazy_cleanup; [ -n "$spid" ] && kill "$spid" 2>/dev/null'
pid=$(start_memhog "$d" -m 256 -t 1) && criu_dump "$pid" "$d/img" || { fail net-engine-kill-setup "cannot dump memhog"; finish; }
scribble_lazy "$d/img" "$d/dst" || { fail net-engine-kill-setup "cannot make the destination copy"; finish; }
wait_tree_gone "$d/img" || { fail net-engine-kill-setup "dumped pids still in use"; finish; }

name=net-engine-kill
# --sessions 0: the restarted engine's connections come after the first ones closed
start_ps "$d" "$name" --sessions 0 || { fail "$name" "page server did not start"; finish; }
start_lazy "$name" "$LAZYRESTORE" "$d/dst" --stats "stats-$name.json" \
	--page-server --address 127.0.0.1 --port "$port" || { fail "$name-daemon" "did not start"; finish; }
eng=$(ps -o pid= --ppid "$LAZY_PID" | head -n1 | tr -d ' ')
if criu_restore "$name" "$d/dst" --lazy-pages -d; then
	kill_engine "$name" "$LAZY_PID" "$eng"
	check_memhog "$name-memory" "$d"
	daemon_ok "$name" "$d/dst"
	expect_resumed "$name" "$d/dst/lazy-pages-$name.log"
	# each engine that connects says so once: the first, and the restarted one
	n=$(grep -c 'a second connection for urgent requests' "$d/dst/lazy-pages-$name.log")
	if [ "$n" -ge 2 ]; then
		pass "$name-reconnected"
	else
		fail "$name-reconnected" "$n engine(s) connected to the page server, want 2 (lazy-pages-$name.log)"
	fi
else
	fail "$name-restore" "criu restore --lazy-pages failed: $(first_err "$d/dst/restore-$name.log")"
fi
kill_memhogs "$d"
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
finish
