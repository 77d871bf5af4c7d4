#!/bin/bash
# timeout: 240
# Lazy restore of memhog (several VMAs with known bytes, a fork child, two
# threads) served by stock `criu lazy-pages` and by ours; every process checks
# every word, and each daemon must exit 0 once all memory is in.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-memhog)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_memhog "$d" -m 64 -f -t 2) || { fail lazy-memhog "memhog did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-memhog-dump "$(first_err "$d/img/dump.log")"; finish; }
both_daemons lazy-memhog "$d/img" "$d" check_memhog


finish
