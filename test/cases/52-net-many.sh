#!/bin/bash
# timeout: 300
# `lazyrestore page-server` serves many restores of one dump at once: a real
# remote lazy restore (stock `criu lazy-pages --page-server` as the client)
# while four of our clients (two of them with an urgent second connection)
# fetch and check every page, all on one server; then a fifth client that
# breaks the protocol ends only its own session.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-many)
spid=
trap 'kill_memhogs "$d"; [ -n "$spid" ] && kill "$spid" 2>/dev/null' EXIT
pid=$(start_memhog "$d" -m 48 -f -t 1) && criu_dump "$pid" "$d/img" || { fail net-many-setup "cannot dump memhog"; finish; }

# 1 stock restore + 2 plain clients + 2 clients with two connections each = 7 sessions
start_ps "$d" many --sessions 7 || { fail net-many-server "did not start"; finish; }
fpids=()
for i in 1 2 3 4; do
	extra=()
	[ "$i" -gt 2 ] && extra=(--urgent-channel --faults 100)
	"$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" --chunk $((16 * i)) "${extra[@]}" >"$d/fetch-$i.out" 2>&1 &
	fpids+=($!)
done
stock_remote_restore net-many-stock-restore "$d" "$port"
for i in 1 2 3 4; do
	if wait "${fpids[$((i - 1))]}" && grep -q verified "$d/fetch-$i.out"; then
		pass "net-many-client-$i"
	else
		fail "net-many-client-$i" "$(tail -n1 "$d/fetch-$i.out")"
	fi
	sed 's/^/    /' "$d/fetch-$i.out"
done
ps_exit && pass net-many-server-clean || fail net-many-server-clean "$(grep -m1 Error "$d/ps-many.log")"
sessions=$(grep -c "page-server: client 127.0.0.1:" "$d/ps-many.log")
[ "$sessions" = 7 ] && pass net-many-sessions-7 || fail net-many-sessions-7 "$sessions sessions in the log"
kill_memhogs "$d"

# a bad client among good ones: its session ends, the others are served
start_ps "$d" mixed --sessions 3
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" >"$d/good-1.out" 2>&1 &
g1=$!
/usr/bin/python3 "$TOP/test/lib/ps-client.py" "$port" "get:$pid:0x1000:1" >/dev/null 2>&1
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" >"$d/good-2.out" 2>&1
g2=$?
wait "$g1"
g1=$?
ps_exit
rc=$?
if [ $g1 -eq 0 ] && [ $g2 -eq 0 ] && [ $rc -eq 1 ] && grep -q "which the dump does not hold" "$d/ps-mixed.log"; then
	pass net-many-bad-client-alone
else
	fail net-many-bad-client-alone "clients $g1 $g2, server $rc: $(grep -m1 Error "$d/ps-mixed.log")"
fi
finish
