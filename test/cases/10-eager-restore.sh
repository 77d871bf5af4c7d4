#!/bin/bash
# timeout: 300
# The pinned CRIU works here: dump memhog (VMAs with known bytes, a fork
# child, threads), restore it eagerly, and have every process check every
# word of its memory.
. "$(dirname "$0")/../lib/common.sh"

d=$(scratch eager-restore)
at_exit 'kill_memhogs "$d"'

pid=$(start_memhog "$d" -m 64 -f -t 2) || { fail eager-restore "memhog did not start"; finish; }
check_memhog eager-before-dump "$d" || finish
if criu_dump "$pid" "$d/img"; then
	pass eager-dump
else
	fail eager-dump "criu dump failed: $(grep -m1 Error "$d/img/dump.log")"
	finish
fi
"$LAZYRESTORE" show "$d/img" >"$d/show.txt" && grep -q "^task $pid " "$d/show.txt" && pass show-dump ||
	fail show-dump "lazyrestore show failed on a fresh dump"

if criu_restore eager "$d/img" -d; then
	pass eager-restore
	check_memhog eager-memory-after-restore "$d"
else
	fail eager-restore "criu restore failed: $(grep -m1 Error "$d/img/restore-eager.log")"
fi
finish
