#!/bin/bash
# timeout: 400
# The integration programs of 40-44, restored by `criu restore --lazy-pages
# --libdir build/lib -d` alone: the plugin starts our daemon, nothing is
# started before.  Every word is checked, the daemon must exit 0, and it
# must have seen the events (fork, mremap, munmap, DONTNEED).
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT

# one NAME START-CMD CHECK ARGS...: start, dump, restore through the plugin.
one() {
	local name=$1 start=$2 check=$3 pid d
	shift 3
	d=$(scratch "$name")
	# shellcheck disable=SC2034 # lazy_cleanup (lazy.sh) kills the programs of LAZY_DIR
	LAZY_DIR=$d
	pid=$("$start" "$d" "$@") || { fail "$name" "program did not start"; return 1; }
	criu_dump "$pid" "$d/img" || { fail "$name-dump" "$(first_err "$d/img/dump.log")"; return 1; }
	through_plugin "$name" "$d/img" "$d" "$check"
}

one plugin-memhog start_memhog check_memhog -m 64 -f -t 2
one plugin-tree start_lazy_prog collect_results -M tree -m 96
one plugin-random start_lazy_prog collect_results -M random -m 256 -n 4000
if one plugin-events start_lazy_prog collect_results -M events; then
	expect_events plugin-events "$BUILD/test-work/plugin-events/img/stats-plugin-events.json"
fi
if one plugin-1g start_memhog check_memhog -m 1024; then
	stats=$BUILD/test-work/plugin-1g/img/stats-plugin-1g.json
	total=$(sed -n 's/.*"total_pages": \([0-9]*\).*/\1/p' "$stats")
	got=$(sed -n 's/.*"\(fault_pages\|fault_around_pages\|prefetch_pages\)": \([0-9]*\).*/\2/p' "$stats" |
		awk '{ s += $1 } END { print s + 0 }')
	if [ -n "$total" ] && [ "$total" -gt 262144 ] && [ "$got" -eq "$total" ]; then
		pass plugin-1g-all-pages-served
	else
		fail plugin-1g-all-pages-served "stats: total_pages ${total:-?}, installed $got"
	fi
fi
finish
