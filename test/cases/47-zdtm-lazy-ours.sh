#!/bin/bash
# timeout: 420
# CRIU's own lazy CI set (zdtm: maps0*, uffd-events, lazy-thp, futex, fork*)
# with every lazy-pages action served by our daemon (zdtm/run's criu wrapper).
# zdtm/run prints one PASS/FAIL/SKIP line per test; `make zdtm-lazy` runs the
# same set with stock criu lazy-pages for comparison.
. "$(dirname "$0")/49-lazy-lib.sh"
[ -x "$TOP/zdtm/run" ] || { skip zdtm-lazy-ours "zdtm/run is not there"; finish; }
exec "$TOP/zdtm/run" --lazy --lazy-daemon ours --lazy-ci -p 2 --keep-going --timeout 120
