#!/bin/bash
# lazyrestore test runner.
#   run.sh [UNIT_TEST_BINARY...]
# Runs the given cmocka binaries, then every executable test/cases/*.sh in
# order.  A case script reports each check on a line of its own:
#   PASS: name      FAIL: name: why      SKIP: name: reason
# and exits non-zero if anything failed.  A script that prints none of these
# counts as one test, judged by its exit status (77 = skipped).
# TESTS=REGEX runs only the unit-test binaries and cases whose name matches.
# Ends with one line: "N passed, N failed, N skipped".
# Every step inside a case has a bound of its own (test/lib/common.sh: a
# stuck criu ends its case within about a minute, with one line naming the
# step).  The per-case "# timeout:" (default 600 s) and UNIT_TIMEOUT (180 s
# per unit-test binary) are the last resort only.  CRIU_FAULT, when the
# caller sets it, reaches every criu unchanged; no case sets it itself
# (except 15-breakpoint-paths, which runs both ways on purpose).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
LOGDIR=$TOP/build/test-logs
mkdir -p "$LOGDIR"
pass=0 fail=0 skip=0
failed_names=()

count_output() { # name log status
	local name=$1 log=$2 status=$3 p f s
	p=$(grep -c '^PASS: ' "$log")
	f=$(grep -c '^FAIL: ' "$log")
	s=$(grep -c '^SKIP: ' "$log")
	# cmocka's own summary lines
	local cp cf
	cp=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
	cf=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n1)
	p=$((p + ${cp:-0}))
	f=$((f + ${cf:-0}))
	if [ $((p + f + s)) -eq 0 ]; then
		case $status in
		0) p=1 ;;
		77) s=1; echo "SKIP: $name: $(tail -n1 "$log")" ;;
		*) f=1 ;;
		esac
	elif [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		# It said all was well but died: that is a failure too.
		f=1
		echo "FAIL: $name: exited with status $status after its checks"
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	[ "$f" -gt 0 ] && failed_names+=("$name (log: $log)")
	grep -E '^(FAIL|SKIP): ' "$log" | sed 's/^/    /'
}

run_one() { # name timeout cmd...
	local name=$1 tmo=$2 log status start
	shift 2
	log=$LOGDIR/$name.log
	start=$(date +%s)
	printf '%-44s ' "$name"
	timeout --kill-after=10 "$tmo" "$@" >"$log" 2>&1
	status=$?
	if [ $status -eq 124 ] || [ $status -eq 137 ]; then
		echo "FAIL: $name: did not finish in ${tmo}s (the runner's last-resort timeout); last log line: $(grep -v '^[[:space:]]*$' "$log" | tail -n1 | cut -c1-400)" >>"$log"
	fi
	printf '%s (%ds)\n' "$([ $status -eq 0 ] && echo ok || ([ $status -eq 77 ] && echo skipped) || echo "FAILED status $status")" $(($(date +%s) - start))
	count_output "$name" "$log" "$status"
}

filter=${TESTS:-.}
echo "criu: CRIU_FAULT=${CRIU_FAULT-(unset: criu chooses its breakpoint path)}"
for bin in "$@"; do
	name=$(basename "$bin")
	[[ $name =~ $filter ]] || continue
	run_one "$name" "${UNIT_TIMEOUT:-180}" "$bin"
done
for t in "$TOP"/test/cases/*.sh; do
	[ -x "$t" ] || continue
	name=$(basename "$t" .sh)
	[[ $name =~ $filter ]] || continue
	tmo=$(sed -n 's/^# timeout: \([0-9]*\)/\1/p' "$t" | head -n1)
	run_one "$name" "${tmo:-600}" "$t"
done

if [ ${#failed_names[@]} -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${failed_names[@]}"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ $((pass + skip)) -gt 0 ]
