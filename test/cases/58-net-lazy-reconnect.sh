#!/bin/bash
# timeout: 300
# A lost connection in the middle of a remote lazy restore served by our
# lazy-pages from our page server: the restored tree waits (its check of
# every word cannot finish while pages are missing), the client reconnects
# and resends what was outstanding, and every word is right.  (1) The
# connection is killed (ss -K) while the server lives; (2) the server is
# killed and started again on the same port.  The server is stopped
# (SIGSTOP) before the restore, so nothing is served before the loss.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/lazy.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-lazy-reconnect)
spid=
at_exit 'kill_memhogs "$d"; [ -n "$spid" ] && kill -CONT "$spid" 2>/dev/null'
pid=$(start_memhog "$d" -m 256 -t 1) && criu_dump "$pid" "$d/img" || { fail net-lazy-reconnect-setup "cannot dump memhog"; finish; }
scribble_lazy "$d/img" "$d/dst" || { fail net-lazy-reconnect-setup "cannot make the destination copy"; finish; }
PORT=$(free_port)

# waiting NAME: every memhog was asked to check its memory and none could finish: the tree waits
waiting() {
	local p
	kill -STOP "$spid"
	if ! kill -0 "$LAZY_PID" 2>/dev/null; then
		fail "$1-tree-waits" "every page was in before the server was stopped: nothing left to lose"
		return 1
	fi
	rm -f "$d"/result.*
	for p in $(memhog_pids "$d"); do kill -USR1 "$p"; done
	sleep 1
	if ls "$d"/result.* >/dev/null 2>&1; then
		fail "$1-tree-waits" "a memhog finished its check while the server was stopped: $(cat "$d"/result.*)"
	elif ! kill -0 "$LAZY_PID" 2>/dev/null; then
		fail "$1-tree-waits" "the daemon is gone: $(first_err "$d/dst/lazy-pages-$1.log")"
	else
		pass "$1-tree-waits"
	fi
}

# after NAME: every word right, the daemon done, and it reconnected
after() {
	collect_results "$1" "$d"
	daemon_ok "$1" "$d/dst"
	local line
	line=$(grep -m1 -o 'page server 127.*reconnects' "$d/dst/lazy-pages-$1.log")
	echo "    $1: $line"
	if grep -q "reconnecting" "$d/dst/lazy-pages-$1.log" && [[ $line != *" 0 reconnects" ]] && [ -n "$line" ]; then
		pass "$1-reconnected"
	else
		fail "$1-reconnected" "no reconnect in the daemon's log: ${line:-no summary}"
	fi
	kill_memhogs "$d"
	wait_tree_gone "$d/img"
}

# 1. the connection killed, the server alive
start_ps "$d" killed --sessions 0 || { fail net-lazy-reconnect-killed "page server did not start"; finish; }
if lazy_restore net-lazy-reconnect-killed "$LAZYRESTORE" "$d/dst" --page-server --port "$PORT"; then
	waiting net-lazy-reconnect-killed
	n=$(ss -HK state established dst 127.0.0.1 dport = ":$PORT" 2>/dev/null | wc -l)
	echo "    killed $n connection(s) to 127.0.0.1:$PORT"
	[ "$n" -gt 0 ] || fail net-lazy-reconnect-killed "ss -K found no connection to kill"
	kill -CONT "$spid"
	after net-lazy-reconnect-killed
fi
kill -CONT "$spid"
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=

# 2. the server killed and started again on the same port
start_ps "$d" gone --sessions 0 || { fail net-lazy-reconnect-server "page server did not start"; finish; }
if lazy_restore net-lazy-reconnect-server "$LAZYRESTORE" "$d/dst" --page-server --port "$PORT"; then
	waiting net-lazy-reconnect-server
	kill -KILL "$spid"
	wait "$spid" 2>/dev/null
	sleep 0.5
	start_ps "$d" back --sessions 0 || fail net-lazy-reconnect-server "the server did not start again on $PORT"
	after net-lazy-reconnect-server
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
finish
