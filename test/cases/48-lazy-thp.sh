#!/bin/bash
# timeout: 240
# Huge pages back after a lazy restore: hugetouch fills a 64 MiB
# MADV_HUGEPAGE region with a pattern and records its AnonHugePages before
# the dump.  Restored by stock `criu lazy-pages` and by ours; once each daemon
# has exited (all resident) the program checks every word and reads its
# AnonHugePages again.  Ours must bring back at least what the dump had (its
# stats list the same figure); stock's is printed for comparison.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-thp)
LAZY_DIR=$d
at_exit lazy_cleanup

if ! grep -q '\[always\]\|\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
	skip lazy-thp "transparent huge pages are off on this host ($(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1))"
	finish
fi
pid=$(start_hugetouch "$d" -m 64) || { fail lazy-thp "hugetouch did not start"; finish; }
before=$(sed -n 's/^before \([0-9-]*\)$/\1/p' "$d/thp.$pid")
if [ "${before:-0}" -le 0 ]; then
	kill -KILL "$pid"
	skip lazy-thp "the kernel gave the region no huge page before the dump (AnonHugePages ${before:-unreadable})"
	finish
fi
criu_dump "$pid" "$d/img" || { fail lazy-thp-dump "$(first_err "$d/img/dump.log")"; finish; }

declare -A after
for which in stock ours; do
	bin=$CRIU
	[ $which = ours ] && bin=$LAZYRESTORE
	name=lazy-thp-$which
	wait_tree_gone "$d/img" || { fail "$name" "dumped pids still in use"; continue; }
	lazy_restore "$name" "$bin" "$d/img" || continue
	daemon_ok "$name" "$d/img" # all resident: nothing is left to install or collapse
	rm -f "$d/result.$pid"
	kill -USR1 "$pid" 2>/dev/null || { fail "$name-words" "task $pid is not running"; continue; }
	if ! wait_for_file "$d/result.$pid" 120; then
		fail "$name-words" "task $pid wrote no result"
	elif res=$(cat "$d/result.$pid") && [[ $res == OK* ]]; then
		pass "$name-words"
		after[$which]=$(sed -n 's/.*AnonHugePages \([0-9-]*\) kB.*/\1/p' <<<"$res")
	else
		fail "$name-words" "task $pid: $res"
	fi
	kill_memhogs "$d"
	sleep 0.2
done

stats=$d/img/stats-lazy-thp-ours.json
eng=$(tr -d '\n' <"$stats" 2>/dev/null | sed -n 's/.*"anon_huge_kib": \[{"pid": [0-9]*, "kib": \([0-9-]*\)}.*/\1/p')
coll=$(sed -n 's/.*"thp_collapsed": \([0-9]*\).*/\1/p' "$stats" 2>/dev/null)
ms=$(sed -n 's/.*"thp_collapse_ms": \([0-9.]*\).*/\1/p' "$stats" 2>/dev/null)
figures="AnonHugePages before dump $before kB, after restore: stock ${after[stock]:-?} kB, ours ${after[ours]:-?} kB (engine saw ${eng:-?} kB; ${coll:-?} extents collapsed in ${ms:-?} ms)"
if [ -n "${after[ours]}" ] && [ "${after[ours]}" -ge "$before" ] && [ "${eng:--1}" -ge "$before" ]; then
	pass "lazy-thp-ours-huge-pages-back: $figures"
else
	fail "lazy-thp-ours-huge-pages-back" "$figures"
fi
finish
