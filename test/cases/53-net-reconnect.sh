#!/bin/bash
# timeout: 300
# A lost connection during the stream.  With --reconnect our client survives
# our page server being killed and started again on the same port (peer gone,
# then back), and a server that stops answering (peer stalled): it reconnects
# with bounded backoff and resends what was outstanding; every page still
# matches the images.  Without --reconnect (a stock dump serves exactly one
# connection), the same loss ends every outstanding request with an error
# naming the peer, the task and the page, and no page is taken as served.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-reconnect)
spid=
trap 'kill_memhogs "$d"; [ -n "$spid" ] && kill "$spid" 2>/dev/null; [ -n "$spid" ] && kill -CONT "$spid" 2>/dev/null' EXIT
pid=$(start_memhog "$d" -m 64 -f -t 1) && criu_dump "$pid" "$d/img" || { fail net-reconnect-setup "cannot dump memhog"; finish; }
kill_memhogs "$d"
PORT=$(free_port)

# 1. killed and back: the client is paced (16 steps, 150 ms apart), the server dies after 0.6 s
start_ps "$d" first --sessions 0 || { fail net-reconnect-server "did not start"; finish; }
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$PORT" --reconnect --urgent-channel --faults 300 --pace-ms 150 \
	>"$d/fetch-killed.out" 2>&1 &
fpid=$!
sleep 0.6
kill -KILL "$spid"
wait "$spid" 2>/dev/null
sleep 0.5
start_ps "$d" second --sessions 0 || fail net-reconnect-restart "server did not start again on $PORT"
wait "$fpid"
rc=$?
sed 's/^/    /' "$d/fetch-killed.out"
if [ $rc -eq 0 ] && grep -q verified "$d/fetch-killed.out" && grep -q "reconnecting" "$d/fetch-killed.out" &&
	! grep -q " 0 reconnects" "$d/fetch-killed.out"; then
	pass net-reconnect-server-killed
else
	fail net-reconnect-server-killed "status $rc: $(tail -n1 "$d/fetch-killed.out")"
fi

# 2. stalled: the server stops (SIGSTOP) for 2 s, the client gives up on it after 700 ms without a
# byte, reconnects (the kernel queues the new connection until the server goes on) and completes
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$PORT" --reconnect --stall-ms 700 --pace-ms 100 \
	>"$d/fetch-stalled.out" 2>&1 &
fpid=$!
sleep 0.4
kill -STOP "$spid"
sleep 2
kill -CONT "$spid"
wait "$fpid"
rc=$?
sed 's/^/    /' "$d/fetch-stalled.out"
if [ $rc -eq 0 ] && grep -q verified "$d/fetch-stalled.out"; then
	pass net-reconnect-server-stalled
else
	fail net-reconnect-server-stalled "status $rc: $(tail -n1 "$d/fetch-stalled.out")"
fi
kill "$spid"
wait "$spid" 2>/dev/null
spid=

# 3. no reconnect (a source that serves one connection): one clear error, exit 1
start_ps "$d" once --sessions 0
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$PORT" --pace-ms 150 >"$d/fetch-once.out" 2>&1 &
fpid=$!
sleep 0.6
kill -KILL "$spid"
wait "$spid" 2>/dev/null
spid=
wait "$fpid"
rc=$?
msg=$(grep -m1 -E "pid [0-9]+ page 0x[0-9a-f]+ \([0-9]+ pages\) not served: peer 127.0.0.1:$PORT: offset [0-9]+: " "$d/fetch-once.out")
if [ $rc -eq 1 ] && [ -n "$msg" ] &&
	! grep -q verified "$d/fetch-once.out"; then
	pass net-reconnect-off-fails-clearly
else
	fail net-reconnect-off-fails-clearly "status $rc: $(tail -n2 "$d/fetch-once.out")"
fi
echo "    $msg"

# 4. the server never comes back: bounded backoff, then an error
start_ps "$d" gone --sessions 0
"$LAZYRESTORE" page-fetch -D "$d/img" --port "$PORT" --reconnect --retry-ms 1500 --pace-ms 150 \
	>"$d/fetch-gone.out" 2>&1 &
fpid=$!
sleep 0.6
kill -KILL "$spid"
wait "$spid" 2>/dev/null
spid=
start=$SECONDS
wait "$fpid"
rc=$?
took=$((SECONDS - start))
if [ $rc -eq 1 ] && grep -q "gave up after 1500 ms" "$d/fetch-gone.out" && [ $took -lt 15 ]; then
	pass net-reconnect-bounded
else
	fail net-reconnect-bounded "status $rc after ${took}s: $(tail -n1 "$d/fetch-gone.out")"
fi
finish
