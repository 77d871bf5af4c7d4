#!/bin/bash
# timeout: 240
# A 3-process tree, each process with three threads that start checking their
# third of its memory concurrently the moment they are restored (concurrent
# faults from several threads and tasks).  Stock criu lazy-pages, then ours.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-tree)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_lazy_prog "$d" -M tree -m 96) || { fail lazy-tree "lazy-events -M tree did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-tree-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-tree "$d/img" "$d" collect_results
finish
