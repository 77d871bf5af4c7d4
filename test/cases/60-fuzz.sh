#!/bin/bash
# timeout: 200
# Fuzz targets: every committed seed and regression input, and the generated
# ones (test/fuzz/gen-regressions.sh), replays cleanly; then each target
# fuzzes for FUZZ_TEST_SECONDS (default 20) with no finding.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/fuzz/lib.sh"
secs=${FUZZ_TEST_SECONDS:-20}
targets=$(fuzz_targets)
[ -n "$targets" ] || { fail fuzz-build "no fuzz targets in $FUZZ_BIN"; finish; }
for src in "$TOP"/test/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	[ -x "$FUZZ_BIN/$t" ] || fail "fuzz-build-$t" "$FUZZ_BIN/$t was not built"
done
gen=$(scratch fuzz-generated)
if run_bounded -o "$gen.log" 120 "test/fuzz/gen-regressions.sh" "$gen.log" "$TOP/test/fuzz/gen-regressions.sh" "$gen"; then
	pass fuzz-generate-regressions
else
	fail fuzz-generate-regressions "$(tail -n1 "$gen.log") (log: $gen.log)"
fi
for t in $targets; do
	w=$(scratch "fuzz-$t")
	n=$(fuzz_inputs "$t" "$gen" | wc -l)
	# the helpers of test/fuzz/lib.sh, each in a bounded shell of its own
	if run_bounded 120 "fuzz replay of $t" "$w/replay.log" \
		bash -c '. "$1" && fuzz_replay "$2" "$3" "$4"' _ "$TOP/test/fuzz/lib.sh" "$t" "$w/replay.log" "$gen"; then
		pass "fuzz-replay-$t ($n inputs)"
	else
		fail "fuzz-replay-$t" "$(grep -m1 -E 'invariant violated|ERROR|deadly|no inputs' "$w/replay.log") (log: $w/replay.log)"
	fi
	if run_bounded $((secs + 60)) "fuzzing $t for ${secs}s" "$w/fuzz.log" \
		bash -c '. "$1" && fuzz_run "$2" "$3" "$4"' _ "$TOP/test/fuzz/lib.sh" "$t" "$secs" "$w"; then
		pass "fuzz-$t-${secs}s ($(fuzz_summary "$w"))"
	else
		fail "fuzz-$t-${secs}s" "$(fuzz_finding "$w" | tr '\n' ' ') (log: $w/fuzz.log)"
	fi
done
finish
