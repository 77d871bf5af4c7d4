#!/bin/bash
# timeout: 300
# Our page-server client against our page server on loopback: every page of
# a dump fetched and compared with the pages files (one connection; urgent
# connection with fault-like GETs during the stream; the 32-byte header on
# both sides); a header-format mismatch is an error, not wrong bytes; the
# server binds loopback unless told otherwise and says so in its first line.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-client)
spid=
trap 'kill_memhogs "$d"; [ -n "$spid" ] && kill "$spid" 2>/dev/null' EXIT
pid=$(start_memhog "$d" -m 64 -f -t 1) && criu_dump "$pid" "$d/img" || { fail net-client-setup "cannot dump memhog"; finish; }

# fetch NAME SERVER-ARGS -- CLIENT-ARGS: one session; pass if verified and the server exits 0
fetch() {
	local name=$1 sargs=() out
	shift
	while [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	start_ps "$d" "$name" "${sargs[@]}" || { fail "net-client-$name" "server did not start"; return; }
	out=$("$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" "$@" 2>&1)
	local rc=$?
	echo "    $name: $out"
	if [ $rc -eq 0 ] && [[ $out == *verified* ]] && ps_exit; then
		pass "net-client-$name"
	else
		fail "net-client-$name" "fetch status $rc: $(echo "$out" | tail -n1); server: $(grep -m1 Error "$d/ps-$name.log")"
	fi
}

fetch plain -- --chunk 64
fetch urgent-channel --sessions 2 -- --urgent-channel --faults 200 --chunk 256
fetch one-connection-faults -- --faults 200
fetch wire-32 --wire 4.2 -- --wire 4.2 --urgent-every 5
fetch small-window -- --window 16 --chunk 1

# a client speaking 32-byte headers to a 24-byte server: refused, no bytes accepted
start_ps "$d" mismatch
out=$("$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" --wire 4.2 2>&1)
rc=$?
ps_exit
if [ $rc -eq 1 ] && [[ $out == *"peer 127.0.0.1:$port: "* ]] && [[ $out != *verified* ]]; then
	pass net-client-wire-mismatch
else
	fail net-client-wire-mismatch "status $rc: $out"
fi

# the first log line says where it listens; loopback by default
start_ps "$d" bind
first=$(head -n1 "$d/ps-bind.log")
listening=$(ss -Hltn "sport = :$port" | awk '{print $4}')
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
if [[ $first == *"listening on 127.0.0.1 port $port"* ]] && [ "$listening" = "127.0.0.1:$port" ]; then
	pass net-server-binds-loopback
else
	fail net-server-binds-loopback "first line '$first', socket '$listening'"
fi
finish
