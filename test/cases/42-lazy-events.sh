#!/bin/bash
# timeout: 240
# Events during the lazy period: right after restore the program forks (the
# child DONTNEEDs and mremaps on its own), mremaps, munmaps and maps fresh
# memory, DONTNEEDs every other MiB and rewrites a page of each; then it checks
# every word (removed pages must read zero, moved ones their old bytes).
# Served by stock criu lazy-pages and by ours; ours must also have seen each
# kind of event.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-events)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_lazy_prog "$d" -M events) || { fail lazy-events "lazy-events did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-events-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-events "$d/img" "$d" collect_results
stats=$d/img/stats-lazy-events-ours.json
for ev in forks remaps removes unmaps; do
	n=$(sed -n "s/.*\"$ev\": \([0-9]*\).*/\1/p" "$stats")
	if [ "${n:-0}" -gt 0 ]; then
		pass "lazy-events-ours-saw-$ev"
	else
		fail "lazy-events-ours-saw-$ev" "stats say ${n:-nothing} (no such event reached our daemon)"
	fi
done
finish
