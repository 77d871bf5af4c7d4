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
expect_events lazy-events-ours "$d/img/stats-lazy-events-ours.json"
finish
