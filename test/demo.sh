#!/bin/bash
# make demo: the main job, end to end.
#  1. start memhog: 256 MiB of distinct data (plus a forked child and threads)
#  2. dump it with the pinned criu (the program is gone afterwards)
#  3. lazyrestore show: what the dump holds
#  4. start `lazyrestore lazy-pages`, then `criu restore --lazy-pages -d`:
#     the tree runs at once while its memory streams in
#  5. every process checks every word of its memory; print the daemon's stats
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

d=$BUILD/demo
rm -rf "$d" && mkdir -p "$d"
dpid=
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; kill_memhogs "$d"' EXIT

step() { printf '\n== %s\n' "$*"; }

step "starting memhog: 256 MiB of distinct data, a forked child, 2 threads"
pid=$(start_memhog "$d" -m 256 -f -t 2)
wait_for_file "$d/ready.$(($(cat "/proc/$pid/task/$pid/children" | awk '{ print $1 }')))" 30
echo "memhog is pid $pid, its child $(memhog_pids "$d" | grep -vx "$pid" | tr '\n' ' ')"

step "criu dump -t $pid -D $d/img"
criu_dump "$pid" "$d/img" || { tail -5 "$d/img/dump.log"; exit 1; }
du -sh "$d/img" | awk '{ print "images: " $1 }'

step "lazyrestore show $d/img (totals)"
"$LAZYRESTORE" show "$d/img" | grep -E '^(task|total|  pages)'

step "lazyrestore lazy-pages -D $d/img --stats $d/stats.json"
mkfifo "$d/status"
"$LAZYRESTORE" lazy-pages -D "$d/img" -o lazy-pages.log --verbosity=3 --stats "$d/stats.json" \
	--status-fd 3 3>"$d/status" &
dpid=$!
[ "$(head -c1 "$d/status" | od -An -tx1 | tr -d ' ')" = 00 ] ||
	{ echo "demo: lazy-pages did not start, see $d/img/lazy-pages.log" >&2; exit 1; }
echo "the daemon listens on $d/img/lazy-pages.socket"

step "criu restore -D $d/img --lazy-pages -d"
t0=$(date +%s%N)
"$BUILD/criu/criu" restore -D "$d/img" --lazy-pages -d -o restore.log ||
	{ echo "demo: criu restore failed, see $d/img/restore.log" >&2; exit 1; }
t1=$(date +%s%N)
echo "criu restore returned after $(((t1 - t0) / 1000000)) ms: the tree is running, its memory is arriving"

step "each process checks every word of its memory"
check_memhog demo-memory "$d" || { echo "demo: memory check failed" >&2; exit 1; }

step "waiting for the daemon to finish"
wait "$dpid" || { echo "demo: lazy-pages failed, see $d/img/lazy-pages.log" >&2; exit 1; }
dpid=
t2=$(date +%s%N)
echo "all memory resident $(((t2 - t0) / 1000000)) ms after the restore started"
grep -iE 'summary|faulted|prefetch|resident|latency' "$d/img/lazy-pages.log" | tail -8 || true
step "stats ($d/stats.json)"
/usr/bin/python3 -m json.tool "$d/stats.json"
