#!/bin/bash
# timeout: 240
# Random single-word reads of a 256 MiB region right after restore, while the
# background prefetch runs, each checked; then every word.  Stock criu
# lazy-pages, then ours.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-random)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_lazy_prog "$d" -M random -m 256 -n 4000) || { fail lazy-random "lazy-events -M random did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-random-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-random "$d/img" "$d" collect_results
finish
