#!/bin/bash
# timeout: 300
# lazyrestore page-server: a remote lazy restore through it (stock
# `criu lazy-pages --page-server` as the client) verifies every word, its
# answers carry exactly the image's bytes, and each protocol violation by a
# peer ends the session with an error naming the peer, offset and problem.
. "$(dirname "$0")/../lib/common.sh"

d=$(scratch page-server)
spid=
at_exit 'kill_memhogs "$d"'
pid=$(start_memhog "$d" -m 32 -f -t 1) && criu_dump "$pid" "$d/img" || { fail page-server-setup "cannot dump memhog"; finish; }

# start_server NAME: our page server on a free loopback port; sets $port, $spid
start_server() {
	rm -f "$d/ps-$1.out"
	status_open "$d/st" || return 1
	bounded_start -o "$d/ps-$1.out" "lazyrestore page-server ($1)" "$d/ps-$1.log" \
		"$LAZYRESTORE" page-server -D "$d/img" --address 127.0.0.1 --port 0 -o "$d/ps-$1.log" -v4 \
		--status-fd 3 3>"$d/st"
	spid=$BOUNDED_PID
	status_byte 30 "the status byte of lazyrestore page-server ($1)" "$d/ps-$1.log" "$spid"
	port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/ps-$1.out")
}

# server_exit: its exit status (a stuck step after 30 s)
server_exit() {
	bounded_wait 30 "$spid"
	local rc=$?
	spid=
	return $rc
}

# 1. A real remote lazy restore: stock criu lazy-pages fetches every page from us.
start_server remote
status_open "$d/st2"
bounded_start "criu lazy-pages --page-server (remote)" "$d/img/lazy-remote.log" \
	"$CRIU" lazy-pages -D "$d/img" --page-server --address 127.0.0.1 --port "$port" -o lazy-remote.log -v4 \
	--status-fd 3 3>"$d/st2"
lpid=$BOUNDED_PID
status_byte 30 "the status byte of criu lazy-pages --page-server" "$d/img/lazy-remote.log" "$lpid"
if criu_restore remote "$d/img" --lazy-pages -d; then
	check_memhog page-server-remote-restore "$d"
else
	fail page-server-remote-restore "criu restore failed: $(grep -m1 Error "$d/img/restore-remote.log")"
fi
bounded_wait 60 "$lpid" && pass page-server-stock-client-exit || fail page-server-stock-client-exit "criu lazy-pages failed"
server_exit && pass page-server-clean-close || fail page-server-clean-close "$(grep -m1 Error "$d/ps-remote.log")"
kill_memhogs "$d"

# 2. Answers are the image's bytes: compare with the pages file at the library's offset.
# the first present pagemap entry of >= 4 pages (crit decodes the image), and its offset in pages-N.img
read -r vaddr off pages_id < <("$BUILD/criu/crit" decode -i "$d/img/pagemap-$pid.img" | /usr/bin/python3 -c '
import json, sys
off = 0
entries = json.load(sys.stdin)["entries"]
for e in entries[1:]:
    present = e.get("flags", 4) & 4
    if present and e["nr_pages"] >= 4:
        print(hex(e["vaddr"]), off, entries[0]["pages_id"])
        break
    if present:
        off += e["nr_pages"] * 4096
')
start_server bytes
want=$(dd if="$d/img/pages-$pages_id.img" bs=4096 skip=$((off / 4096)) count=4 status=none | sha256sum | cut -d' ' -f1)
got=$(run_bounded 30 "ps-client.py get" /dev/null /usr/bin/python3 "$TOP/test/lib/ps-client.py" "$port" "get:$pid:$vaddr:4" close)
[[ $got == *"add_f 0x40006 $vaddr 4 $want"* && $got == *"status 0"* ]] && pass page-server-exact-bytes ||
	fail page-server-exact-bytes "got '$got', want sha256 $want of 4 pages at $vaddr"
server_exit || fail page-server-exact-bytes-exit "server failed after a clean session"
# a client on this host gets a congestion control without pacing (cubic, else reno)
cc=$(sed -n 's/.*client 127.0.0.1:[0-9]* (TCP congestion control \([a-z0-9]*\)).*/\1/p' "$d/ps-bytes.log")
[[ $cc == cubic || $cc == reno ]] && pass "page-server-local-congestion: $cc" ||
	fail page-server-local-congestion "session on loopback has '${cc:-no log line}'"

# 3. Hostile peers: each violation is an error naming the peer and offset, exit status 1.
hostile() { # NAME EXPECTED-TEXT REQUEST...
	local name=$1 want=$2
	shift 2
	start_server "$name"
	run_bounded -o /dev/null 30 "ps-client.py ($name)" /dev/null /usr/bin/python3 "$TOP/test/lib/ps-client.py" "$port" "$@"
	server_exit
	local rc=$? msg
	msg=$(grep -m1 Error "$d/ps-$name.log")
	if [ $rc -eq 1 ] && [[ $msg == *"peer 127.0.0.1:"*": offset "*"$want"* ]]; then
		pass "page-server-$name"
	else
		fail "page-server-$name" "status $rc, log: ${msg:-nothing}"
	fi
}
hostile unknown-command "command 0x63 is not one" raw:630000000100000000000000000000000100000000000000
hostile unknown-pid "pid 999999, which is no live task" "get:999999:$vaddr:1"
hostile unaligned "unaligned address" "get:$pid:$((vaddr + 8)):1"
hostile absent-page "which the dump does not hold" "get:$pid:0x1000:1"
hostile zero-pages "PS_IOV_GET of 0 pages" "get:$pid:$vaddr:0"
hostile short-request "connection closed inside a 24-byte request" short
hostile no-close "without PS_IOV_CLOSE" "get:$pid:$vaddr:1"

# 4. Bad options.
run_bounded -o /dev/null 30 "lazyrestore page-server without --port" /dev/null "$LAZYRESTORE" page-server -D "$d/img"
[ $? -eq 2 ] && pass page-server-needs-port || fail page-server-needs-port "want exit status 2"
run_bounded -o /dev/null 30 "lazyrestore page-server --tcp-congestion nosuch" "$d/ps-cc.log" "$LAZYRESTORE" page-server -D "$d/img" --port 0 --tcp-congestion nosuch -o "$d/ps-cc.log"
[ $? -eq 1 ] && grep -q -- "--tcp-congestion: TCP congestion control nosuch: " "$d/ps-cc.log" &&
	pass page-server-bad-congestion || fail page-server-bad-congestion "$(cat "$d/ps-cc.log")"
run_bounded -o /dev/null 30 "lazyrestore page-server on a missing dir" "$d/ps-nodir.log" "$LAZYRESTORE" page-server -D "$d/no-such" --port 0 -o "$d/ps-nodir.log"
[ $? -eq 1 ] && grep -q "no-such: offset 0: cannot open image directory" "$d/ps-nodir.log" &&
	pass page-server-missing-dir || fail page-server-missing-dir "$(cat "$d/ps-nodir.log")"

# 5. criu page-server's command line as zdtm gives it (--pidfile, --lazy-pages, --no-default-config).
status_open "$d/st3"
bounded_start -o "$d/ps-zdtm.out" "lazyrestore page-server (zdtm's options)" "$d/ps-zdtm.log" \
	"$LAZYRESTORE" page-server --no-default-config -D "$d/img" --pidfile "$d/ps.pid" --port 0 --lazy-pages \
	-o "$d/ps-zdtm.log" --status-fd 3 3>"$d/st3"
spid=$BOUNDED_PID
status_byte 30 "the status byte of lazyrestore page-server (zdtm's options)" "$d/ps-zdtm.log" "$spid"
if [ "$(cat "$d/ps.pid" 2>/dev/null)" = "$spid" ]; then
	pass page-server-criu-options
else
	fail page-server-criu-options "pidfile says '$(cat "$d/ps.pid" 2>/dev/null)', server is $spid: $(cat "$d/ps-zdtm.out")"
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
finish
