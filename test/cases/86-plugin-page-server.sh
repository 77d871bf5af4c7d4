#!/bin/bash
# timeout: 240
# LAZYRESTORE_PAGE_SERVER=HOST:PORT: the plugin serves the restore from a page
# server (ours, lazyrestore page-server, on a free loopback port) by starting
# `lazyrestore lazy-pages --page-server`: the daemon's log must show it asked
# the server (its connection for faults), every word is checked, the client
# ends without an error and the page server closes cleanly.
. "$(dirname "$0")/../lib/plugin.sh"
spid=
trap 'plugin_cleanup; [ -n "$spid" ] && kill "$spid" 2>/dev/null' EXIT

d=$(scratch plugin-page-server)
# shellcheck disable=SC2034 # lazy_cleanup (lazy.sh) kills the programs of LAZY_DIR
LAZY_DIR=$d
img=$d/img
pid=$(start_memhog "$d" -m 32 -f -t 1) && criu_dump "$pid" "$img" || { fail plugin-page-server "cannot dump memhog"; finish; }

rm -f "$d/st" && mkfifo "$d/st"
"$LAZYRESTORE" page-server -D "$img" --address 127.0.0.1 --port 0 -o "$d/ps.log" -v4 \
	--status-fd 3 3>"$d/st" >"$d/ps.out" 2>&1 &
spid=$!
head -c1 "$d/st" >/dev/null
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/ps.out")
[ -n "$port" ] || { fail plugin-page-server "page server gave no port: $(cat "$d/ps.out")"; finish; }

name=plugin-page-server
if LAZYRESTORE_PAGE_SERVER=127.0.0.1:$port plugin_restore "$name" "$img"; then
	if grep -q "lazyrestore.so: [^ ]*lazyrestore lazy-pages (pid [0-9]*) listens" "$img/restore-$name.log"; then
		pass "$name-our-client"
	else
		fail "$name-our-client" "$(grep -m1 lazyrestore.so "$img/restore-$name.log")"
	fi
	check_memhog "$name" "$d"
	n=300
	while [ -e "/proc/$PLUGIN_PID" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	if [ -e "/proc/$PLUGIN_PID" ]; then
		fail "$name-client-exit" "lazyrestore lazy-pages $PLUGIN_PID still runs after 30 s"
	elif grep -q Error "$img/lazyrestore-$name.log"; then
		fail "$name-client-exit" "$(first_err "$img/lazyrestore-$name.log")"
	else
		pass "$name-client-exit"
	fi
	if grep -q 'a second connection for urgent requests' "$img/lazyrestore-$name.log"; then
		pass "$name-over-the-network"
	else
		fail "$name-over-the-network" "no connection to 127.0.0.1:$port in lazyrestore-$name.log"
	fi
	PLUGIN_PID=
fi
n=300
while kill -0 "$spid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
if wait "$spid"; then pass "$name-server-closed"; else fail "$name-server-closed" "$(first_err "$d/ps.log")"; fi
spid=
finish
