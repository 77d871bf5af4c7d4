#!/bin/bash
# run-fuzz.sh SECONDS: `make fuzz` — run every target of build/fuzz/ for
# SECONDS each, keeping what it learns in build/fuzz-work/<target>/corpus,
# and print execs/s and coverage.  Non-zero if any target found something.
. "$(dirname "$0")/lib.sh"
secs=${1:-300}
status=0
targets=$(fuzz_targets)
[ -n "$targets" ] || { echo "fuzz: no targets in $FUZZ_BIN (run make)" >&2; exit 1; }
for t in $targets; do
	w=$FUZZ_TOP/build/fuzz-work/$t
	echo "fuzz: $t for ${secs}s (log: $w/fuzz.log)"
	if fuzz_run "$t" "$secs" "$w"; then
		echo "fuzz: $t: no finding: $(fuzz_summary "$w")"
	else
		echo "fuzz: $t: FOUND SOMETHING: $(fuzz_summary "$w")"
		fuzz_finding "$w" | sed 's/^/    /'
		status=1
	fi
done
exit $status
