#!/bin/bash
# timeout: 900
# CRIU's own lazy-pages CI set through the plugin (zdtm/run --lazy-daemon
# plugin): every criu of zdtm loads build/lib, criu restore --lazy-pages
# starts our daemon itself, and zdtm's own lazy-pages step only waits for
# that daemon's verdict.  Stock passes every test of this set here
# (zdtm/README.md), so each must pass (or be skipped by zdtm or
# zdtm/known-failures, which zdtm/run applies).
. "$(dirname "$0")/../lib/common.sh"

logs=$BUILD/test-work/plugin-zdtm
rm -rf "$logs" && mkdir -p "$logs"
# One test at a time (see 70-zdtm-lazy); each has its own 120 s, the whole run 420 s.
run_bounded -o "$logs/plugin.out" 420 "zdtm/run --lazy-daemon plugin" "$logs/plugin.out" \
	"$TOP/zdtm/run" --lazy --lazy-daemon plugin --lazy-ci -p 1 --keep-going --timeout 120 \
	--log-dir "$logs/plugin"
tail -n1 "$logs/plugin.out" | sed 's/^/    /'
[ -f "$logs/plugin/results.tsv" ] || { fail plugin-zdtm "no results: $(tail -n2 "$logs/plugin.out")"; finish; }
while IFS=$'\t' read -r st test why; do
	case $st in
	PASS) pass "plugin-zdtm:$test" ;;
	SKIP | XFAIL) skip "plugin-zdtm:$test" "$why" ;;
	*) fail "plugin-zdtm:$test" "$why" ;;
	esac
done <"$logs/plugin/results.tsv"
finish
