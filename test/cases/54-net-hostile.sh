#!/bin/bash
# timeout: 200
# A hostile or broken page server: every answer our client takes is checked
# against the GET it answers.  A wrong address or pid, more pages than
# asked, zero pages, another command, garbage, an answer nobody asked for,
# or a stream cut inside the pages ends the client with an error naming the
# peer, the stream offset and the problem; nothing is taken as served (the
# fetch never says 'verified') and nothing crashes.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-hostile)
trap 'kill_memhogs "$d"' EXIT
pid=$(start_memhog "$d" -m 4 -t 1) && criu_dump "$pid" "$d/img" || { fail net-hostile-setup "cannot dump memhog"; finish; }

hostile() { # MODE EXPECTED-TEXT... (any of them)
	local mode=$1 out rc bpid w ok=0
	shift
	rm -f "$d/port"
	bad_ps "$d/port" "$mode" &
	bpid=$!
	wait_for_file "$d/port" 10 || { fail "net-hostile-$mode" "fake server did not start"; return; }
	local p
	p=$(cat "$d/port")
	out=$(timeout 60 "$LAZYRESTORE" page-fetch -D "$d/img" --port "$p" --chunk 4 2>&1)
	rc=$?
	kill "$bpid" 2>/dev/null
	wait "$bpid" 2>/dev/null
	for w in "$@"; do
		[[ $out == *"peer 127.0.0.1:$p: offset "*"$w"* ]] && ok=1
	done
	if [ $rc -eq 1 ] && [ $ok = 1 ] && [[ $out != *verified* ]]; then
		pass "net-hostile-$mode"
	else
		fail "net-hostile-$mode" "status $rc: $out"
	fi
	echo "$out" | grep -m1 "first:" | sed 's/^/    /'
}
hostile wrong-vaddr "answer at 0x"
hostile later-wrong-vaddr "answer at 0x"
hostile wrong-pid "answer for pid"
hostile too-many "pages (asked "
hostile zero-pages "answer of 0 pages"
hostile bad-cmd "answer command 0x1 "
hostile garbage "answer command 0x50545448"
# the answer nobody asked for: taken for the next GET's if one is out by then, else seen as unasked
hostile later-extra "answer at 0x" "an answer when no request is outstanding"
hostile cut "124: connection closed with answers due"
finish
