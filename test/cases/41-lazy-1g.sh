#!/bin/bash
# timeout: 300
# One process with 1 GiB of distinct data (plus memhog's other VMAs), restored
# lazily by stock criu lazy-pages and by ours; every word is checked.  Ours
# must have installed every lazy page it was given (stats).
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-1g)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_memhog "$d" -m 1024) || { fail lazy-1g "memhog did not start"; finish; }
DUMP_BOUND=180 criu_dump "$pid" "$d/img" || { fail lazy-1g-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-1g "$d/img" "$d" check_memhog
stats=$d/img/stats-lazy-1g-ours.json
total=$(sed -n 's/.*"total_pages": \([0-9]*\).*/\1/p' "$stats")
got=$(sed -n 's/.*"\(fault_pages\|fault_around_pages\|prefetch_pages\)": \([0-9]*\).*/\2/p' "$stats" | awk '{ s += $1 } END { print s + 0 }')
if [ -n "$total" ] && [ "$total" -gt 262144 ] && [ "$got" -eq "$total" ]; then
	pass lazy-1g-ours-all-pages-served
else
	fail lazy-1g-ours-all-pages-served "stats: total_pages ${total:-?}, installed $got"
fi
finish
