#!/bin/bash
# timeout: 900
# CRIU's own lazy-pages CI set (zdtm: maps0*, uffd-events, lazy-thp, futex,
# fork*), run with stock `criu lazy-pages` and with `lazyrestore lazy-pages`
# in the same run.  Ours must pass wherever stock passes; a test that fails
# with both is reported as skipped with stock's reason.
. "$(dirname "$0")/../lib/common.sh"

logs=$BUILD/test-work/zdtm-lazy
rm -rf "$logs" && mkdir -p "$logs"
for daemon in stock ours; do
	# each zdtm test has its own 120 s; the whole run gets 420 s (the case, 900).
	# One test at a time: two dumps at once can race on zdtm's named cgroup
	# hierarchy (mount of name=zdtmtst: EBUSY), a failure of neither daemon.
	run_bounded -o "$logs/$daemon.out" 420 "zdtm/run --lazy-daemon $daemon" "$logs/$daemon.out" \
		"$TOP/zdtm/run" --lazy --lazy-daemon $daemon --lazy-ci -p 1 --keep-going --timeout 120 \
		--log-dir "$logs/$daemon"
	tail -n1 "$logs/$daemon.out" | sed 's/^/    /'
	[ -f "$logs/$daemon/results.tsv" ] || { fail "zdtm-lazy-$daemon" "no results: $(tail -n2 "$logs/$daemon.out")"; finish; }
done

# results.tsv: STATUS<TAB>TEST<TAB>WHY
declare -A stock
while IFS=$'\t' read -r st test why; do stock[$test]="$st	$why"; done <"$logs/stock/results.tsv"
while IFS=$'\t' read -r st test why; do
	s=${stock[$test]:-MISSING	not run with stock}
	case "$st/${s%%	*}" in
	PASS/*) pass "zdtm-lazy-ours:$test" ;;
	SKIP/*) skip "zdtm-lazy-ours:$test" "$why" ;;
	*/PASS) fail "zdtm-lazy-ours:$test" "fails with ours but passes with stock: $why" ;;
	*) skip "zdtm-lazy-ours:$test" "fails with stock criu lazy-pages too (stock: ${s#*	}; ours: $why)" ;;
	esac
done <"$logs/ours/results.tsv"
finish
