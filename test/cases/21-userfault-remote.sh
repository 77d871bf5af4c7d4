#!/bin/bash
# timeout: 300
# libuserfault's demo over TCP (lib/userfault/examples/uf-demand-remote.c):
# a region demand-paged in the SIGBUS handler from `lazyrestore page-server`,
# which serves a memhog dump; every word is checked against what memhog wrote.
. "$(dirname "$0")/../lib/common.sh"

BIN=$BUILD/bin/uf-demand-remote
d=$(scratch uf-remote)
spid=
at_exit 'kill_memhogs "$d"'
pid=$(start_memhog "$d" -m 64) && criu_dump "$pid" "$d/img" || { fail uf-remote-setup "cannot dump memhog"; finish; }
# memhog's manifest: the first region is "big", every page written with its seed
read -r start len seed _ <"$d/manifest.$pid"

serve() { # NAME: our page server on a free loopback port, sets $port
	status_open "$d/st" || return 1
	bounded_start -o "$d/ps-$1.out" "lazyrestore page-server ($1)" "$d/ps-$1.log" \
		"$LAZYRESTORE" page-server -D "$d/img" --address 127.0.0.1 --port 0 -o "$d/ps-$1.log" \
		--status-fd 3 3>"$d/st"
	spid=$BOUNDED_PID
	status_byte 30 "the status byte of lazyrestore page-server ($1)" "$d/ps-$1.log" "$spid"
	port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/ps-$1.out")
}

for chunk in 1 16; do
	serve "chunk$chunk"
	if out=$(run_bounded 60 "uf-demand-remote --chunk $chunk" /dev/null "$BIN" --port "$port" --pid "$pid" --vaddr "0x$start" --size "$len" --seed "$seed" --chunk $chunk 2>&1) &&
		[[ $out == "verified $len bytes"* ]]; then
		pass "uf-remote-chunk$chunk"
		echo "    $out"
	else
		fail "uf-remote-chunk$chunk" "$out"
	fi
	bounded_wait 30 "$spid" && pass "uf-remote-chunk$chunk-server" ||
		fail "uf-remote-chunk$chunk-server" "$(grep -m1 Error "$d/ps-chunk$chunk.log")"
	spid=
done

# A region the dump does not hold: the server refuses, the program stops with a reason, no zeros.
serve absent
out=$(run_bounded 60 "uf-demand-remote of an absent region" /dev/null "$BIN" --port "$port" --pid "$pid" --vaddr 0x10000 --size 65536 --seed 1 2>&1)
rc=$?
[ $rc -ne 0 ] && [[ $out == *"page server"* ]] && grep -q "which the dump does not hold" "$d/ps-absent.log" &&
	pass uf-remote-absent-stops || fail uf-remote-absent-stops "status $rc: $out"
bounded_wait 30 "$spid"
spid=

# The check can fail: with the wrong seed the same bytes do not verify.
serve wrong-seed
out=$(run_bounded 60 "uf-demand-remote with a wrong seed" /dev/null "$BIN" --port "$port" --pid "$pid" --vaddr "0x$start" --size "$len" --seed $((seed + 1)) 2>&1)
[ $? -ne 0 ] && [[ $out == *"want"* ]] && pass uf-remote-check-can-fail || fail uf-remote-check-can-fail "$out"
kill "$spid" 2>/dev/null
bounded_reap 10 "$spid"
spid=
finish
